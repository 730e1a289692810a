"""Check the built book as a reader's browser sees it, with the network off.

Usage (``make check-site`` builds the quick site first and then runs this)::

    python tests/site/check_site.py [--site _build/html-quick] [--out _build/site-check]

What it does:

1. Static checks of every file of the site (no browser): no absolute path of the
   build machine (the repository root, ``PosixPath(``) in any page or download,
   no stray repr of a figure or an object on a page;
   downloadable notebooks carry no stderr output; every internal link (``href``,
   ``src``) of every page resolves to a file of the site and, with a fragment,
   to an element id of that page; launch links (Binder, Colab) and download links
   point at the repository named in ``_config.yml`` and at files that exist in it.
2. A headless Chromium (Debian's ``chromium``), driven over the DevTools protocol,
   loads every page of the table of contents plus the search, index and source
   pages from a server on 127.0.0.1. Every request to another host is refused
   (and recorded as an error), so the pages are checked with the network off.
   On each page: no console error, no uncaught exception, no failed request, every
   image loaded, MathJax finished typesetting and no raw TeX (``\\frac``, ``$``,
   ``\\(``) is left in a visible text node or in the tab title. A screenshot of each
   page is written to ``{out}/screens/``.

Exit status 0 when every check passes, 1 otherwise (each problem is printed with
its page). ``tests/site/`` holds no pytest tests that run by default: the browser
check is a separate step of ``.ci/run`` (after ``make test``).
"""

from __future__ import annotations

import argparse
import base64
import functools
import html.parser
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = {"127.0.0.1", "localhost"}

# ------------------------------------------------------------------ static checks


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []  # (attribute, value)
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        d = dict(attrs)
        for key in ("id", "name"):
            if d.get(key) and (key == "id" or tag == "a"):
                self.ids.add(d[key])
        for key in ("href", "src"):
            if d.get(key) and not (tag == "link" and d.get("rel") in ("preconnect", "dns-prefetch")):
                self.links.append((key, d[key]))


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8", errors="replace"))
    return p


def repository_url() -> tuple[str, str]:
    """(url, branch) of ``repository`` in ``_config.yml``: the one place that names it."""
    import yaml

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    repo = cfg.get("repository") or {}
    return str(repo.get("url", "")).rstrip("/"), str(repo.get("branch", "main"))


def check_launch_links(site: Path) -> list[str]:
    """Binder, Colab and download links of every chapter page point at files of the repository."""
    problems: list[str] = []
    url, branch = repository_url()
    m = re.match(r"https://github\.com/([^/]+)/([^/]+)$", url)
    if not m:
        return [f"_config.yml: repository.url {url!r} is not https://github.com/OWNER/REPO"]
    owner, repo = m.groups()
    chapters = sorted((site / "notebooks").glob("ch*.html"))
    if not chapters:
        problems.append("no chapter pages under notebooks/")
    for page in chapters:
        stem = page.stem
        hrefs = [v for k, v in _parse(page).links if k == "href"]
        want = {
            "Binder": f"https://mybinder.org/v2/gh/{owner}/{repo}/{branch}?urlpath=lab/tree/notebooks/{stem}.ipynb",
            "Colab": f"https://colab.research.google.com/github/{owner}/{repo}/blob/{branch}/notebooks/{stem}.ipynb",
        }
        for what, link in want.items():
            if link not in hrefs:
                near = [h for h in hrefs if what.lower() in h.lower()]
                problems.append(f"{page.name}: no {what} link {link} (found {near or 'none'})")
        if not (ROOT / "notebooks" / f"{stem}.ipynb").is_file():
            problems.append(f"{page.name}: launch links name notebooks/{stem}.ipynb, absent from the repository")
        dl = [h for h in hrefs if h.endswith(f"{stem}.ipynb") and "_sources" in h]
        if not dl:
            problems.append(f"{page.name}: no 'download .ipynb' link")
        for h in dl:
            target = (page.parent / h).resolve()
            if not target.is_file():
                problems.append(f"{page.name}: download link {h} names no file of the site")
    return problems


def check_static(site: Path) -> list[str]:
    problems: list[str] = []
    forbidden = [str(ROOT), "PosixPath(", "/_build/stage", "/_build/executed"]
    for path in sorted(site.rglob("*")):
        if not path.is_file() or path.suffix not in (".html", ".ipynb", ".txt", ".md", ".js", ".json"):
            continue
        if "_static" in path.relative_to(site).parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = path.relative_to(site).as_posix()
        stray = (["&lt;Figure size", "&lt;matplotlib.", "&lt;Axes:", "Claims(chapter="]
                 if path.suffix == ".html" and "_modules" not in path.relative_to(site).parts else [])
        for f in forbidden + stray:
            if f in text:
                i = text.index(f)
                problems.append(f"{rel}: contains {f!r}: …{text[max(0, i - 60):i + 60]!r}…")
        if path.suffix == ".ipynb":
            try:
                nb = json.loads(text)
            except ValueError:
                problems.append(f"{rel}: download is not valid JSON")
                continue
            n_err = sum(
                1 for c in nb.get("cells", []) for o in c.get("outputs", [])
                if o.get("output_type") == "stream" and o.get("name") == "stderr"
            )
            if n_err:
                problems.append(f"{rel}: download carries {n_err} stderr output(s)")
    # internal links
    pages = sorted(p for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts)
    for page in pages:
        rel = page.relative_to(site).as_posix()
        for attr, link in _parse(page).links:
            u = urllib.parse.urlsplit(link)
            if u.scheme or link.startswith("//") or link.startswith(("mailto:", "data:", "javascript:")):
                continue
            if not u.path and not u.fragment:
                continue
            target = page if not u.path else (page.parent / urllib.parse.unquote(u.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            try:
                target.relative_to(site.resolve())
            except ValueError:
                problems.append(f"{rel}: {attr}={link!r} points outside the site")
                continue
            if not target.is_file():
                problems.append(f"{rel}: broken link {attr}={link!r}")
                continue
            if u.fragment and target.suffix == ".html" and attr == "href":
                frag = urllib.parse.unquote(u.fragment)
                if frag not in _parse(target).ids:
                    problems.append(f"{rel}: link {link!r}: no id {frag!r} in {target.name}")
    return problems + check_launch_links(site)


# ------------------------------------------------------------------- the browser


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # noqa: D401 - silence the access log
        pass


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class Browser:
    """Headless Chromium over the DevTools protocol; requests to other hosts are refused."""

    def __init__(self, chromium: str, width: int = 1280, height: int = 900):
        import websocket  # websocket-client

        self.profile = Path(tempfile.mkdtemp(prefix="nqf-chromium-"))
        self.proc = subprocess.Popen(
            [
                chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-extensions",
                "--remote-debugging-port=0", "--remote-allow-origins=*",
                f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
                # network off: every host but the loopback fails to resolve, no proxy detour
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        port_file = self.profile / "DevToolsActivePort"
        t0 = time.time()
        while not port_file.is_file() or not port_file.read_text().strip():
            if time.time() - t0 > 30 or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start (no DevToolsActivePort)")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self._id = 0
        self.events: list[dict] = []
        for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            self.call(method)
        self.call("Fetch.enable", patterns=[{"urlPattern": "*"}])
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        self.blocked: list[str] = []

    def _handle(self, msg: dict) -> None:
        if msg.get("method") == "Fetch.requestPaused":
            p = msg["params"]
            url = p["request"]["url"]
            host = urllib.parse.urlsplit(url).hostname or ""
            if url.startswith(("data:", "blob:", "about:")) or host in LOOPBACK:
                self._send("Fetch.continueRequest", requestId=p["requestId"])
            else:
                self.blocked.append(url)
                self._send("Fetch.failRequest", requestId=p["requestId"], errorReason="InternetDisconnected")
            return
        if "method" in msg:
            self.events.append(msg)

    def _send(self, method: str, **params) -> int:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        return self._id

    def call(self, method: str, timeout: float = 60, **params) -> dict:
        i = self._send(method, **params)
        t0 = time.time()
        while True:
            self.ws.settimeout(max(0.1, timeout - (time.time() - t0)))
            msg = json.loads(self.ws.recv())
            if msg.get("id") == i:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._handle(msg)
            if time.time() - t0 > timeout:
                raise TimeoutError(method)

    def pump(self, seconds: float) -> None:
        """Handle events for ``seconds`` (requests keep being answered meanwhile)."""
        t_end = time.time() + seconds
        while time.time() < t_end:
            self.ws.settimeout(max(0.05, t_end - time.time()))
            try:
                self._handle(json.loads(self.ws.recv()))
            except Exception as exc:  # websocket timeout
                if type(exc).__name__ != "WebSocketTimeoutException":
                    raise

    def wait_event(self, method: str, timeout: float) -> bool:
        t0 = time.time()
        while time.time() - t0 < timeout:
            if any(e["method"] == method for e in self.events):
                return True
            self.pump(0.1)
        return False

    def evaluate(self, expression: str, timeout: float = 30):
        res = self.call("Runtime.evaluate", timeout=timeout + 5, expression=expression,
                        awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(res["exceptionDetails"].get("text", "exception") + ": "
                               + json.dumps(res["exceptionDetails"].get("exception", {}))[:300])
        return res.get("result", {}).get("value")

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


# Runs in the page after load: force lazy images, wait for them and for MathJax, then
# report broken images and raw TeX left in visible text nodes and in the title.
_PAGE_JS = r"""
(async () => {
  const imgs = Array.from(document.images);
  imgs.forEach(i => { i.loading = 'eager'; });
  await Promise.race([
    Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; }))),
    new Promise(r => setTimeout(r, 15000))]);
  let mathjax = 'absent';
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await Promise.race([MathJax.startup.promise, new Promise(r => setTimeout(r, 20000))]);
    mathjax = document.querySelector('mjx-merror, [data-mjx-error]') ? 'error' : 'typeset';
  }
  const badImgs = imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'));
  const skip = new Set(['SCRIPT', 'STYLE', 'CODE', 'PRE', 'TEXTAREA', 'NOSCRIPT', 'KBD', 'SAMP', 'TT']);
  const raw = /\\(frac|mathbb|mathrm|mathcal|sum|int|alpha|beta|gamma|epsilon|zeta|sigma|mu|lambda|phi|tfrac|top|le|ge|ne|cdot|left|right|begin|end|in|ln|max|min|sqrt|dots|infty|tau|rho|eta|quad|qquad|text|big|Big|\(|\)|\[|\])|\$/;
  const found = [];
  const walker = document.createTreeWalker(document.body || document.documentElement, NodeFilter.SHOW_TEXT, {
    acceptNode(n) {
      for (let e = n.parentElement; e; e = e.parentElement) {
        if (skip.has(e.tagName) || e.tagName.startsWith('MJX-') ||
            e.classList.contains('highlight') || e.classList.contains('MathJax')) return NodeFilter.FILTER_REJECT;
      }
      return NodeFilter.FILTER_ACCEPT;
    }});
  for (let n = walker.nextNode(); n && found.length < 8; n = walker.nextNode()) {
    const m = n.textContent.match(raw);
    if (m) { const i = m.index; found.push(n.textContent.slice(Math.max(0, i - 40), i + 40).replace(/\s+/g, ' ')); }
  }
  const title = document.title;
  return {mathjax, badImgs, rawTeX: found, title, titleRaw: raw.test(title),
          height: document.documentElement.scrollHeight,
          links: Array.from(document.links).map(a => a.href)};
})()
"""


def find_chromium() -> str:
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    for name in ("chromium", "google-chrome", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("check_site: chromium is not installed (make check-site installs Debian's chromium)")


def pages_to_visit(site: Path) -> list[str]:
    from nqfbook import toc_documents

    docs = [f"{d}.html" for d in toc_documents(ROOT)]
    extra = ["search.html", "genindex.html", "py-modindex.html", "_modules/index.html"]
    # index.html only redirects to the root document, which is visited itself
    return [p for p in dict.fromkeys([*docs, *extra]) if (site / p).is_file()]


def check_browser(site: Path, out: Path, *, full_page: bool = False) -> list[str]:
    problems: list[str] = []
    shots = out / "screens"
    if shots.exists():
        shutil.rmtree(shots)
    shots.mkdir(parents=True)
    server, base = serve(site)
    browser = Browser(find_chromium())
    report = {}
    try:
        for page in pages_to_visit(site):
            t0 = time.time()
            browser.events.clear()
            browser.blocked.clear()
            browser.call("Page.navigate", url=base + page)
            if not browser.wait_event("Page.loadEventFired", 60):
                problems.append(f"{page}: did not finish loading in 60 s")
                continue
            info = browser.evaluate(_PAGE_JS, timeout=45)
            browser.pump(0.3)  # late console messages
            errs = []
            for e in browser.events:
                m, p = e["method"], e.get("params", {})
                if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                    text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                    errs.append(f"console.{p['type']}: {text[:200]}")
                elif m == "Runtime.exceptionThrown":
                    d = p.get("exceptionDetails", {})
                    errs.append(f"uncaught: {d.get('text', '')} {d.get('exception', {}).get('description', '')[:200]}")
                elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                    ent = p["entry"]
                    errs.append(f"console: {ent.get('text', '')[:200]} {ent.get('url', '')}")
                elif m == "Network.responseReceived" and p.get("response", {}).get("status", 200) >= 400:
                    errs.append(f"HTTP {p['response']['status']}: {p['response']['url']}")
            errs += [f"tried to reach the network: {u}" for u in browser.blocked]
            for err in dict.fromkeys(errs):
                problems.append(f"{page}: {err}")
            for src in info["badImgs"]:
                problems.append(f"{page}: image did not load: {src}")
            if info["mathjax"] == "error":
                problems.append(f"{page}: MathJax reported a TeX error")
            for snippet in info["rawTeX"]:
                problems.append(f"{page}: raw TeX in the text: …{snippet}…")
            if info["titleRaw"]:
                problems.append(f"{page}: raw TeX in the tab title: {info['title']!r}")
            name = page.replace("/", "__").removesuffix(".html") + ".png"
            shot_args = {"format": "png"}
            if full_page:
                h = min(int(info["height"]), 16000)
                shot_args.update(captureBeyondViewport=True,
                                 clip={"x": 0, "y": 0, "width": 1280, "height": h, "scale": 1})
            data = browser.call("Page.captureScreenshot", **shot_args)["data"]
            (shots / name).write_bytes(base64.b64decode(data))
            report[page] = {"seconds": round(time.time() - t0, 2), "mathjax": info["mathjax"],
                            "images": len(info["links"]), "title": info["title"]}
            print(f"  {page}: {info['mathjax']}, {time.time() - t0:.1f} s", flush=True)
    finally:
        browser.close()
        server.shutdown()
    (out / "report.json").write_text(json.dumps({"pages": report, "problems": problems}, indent=1))
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", default=str(ROOT / "_build" / "html-quick"))
    ap.add_argument("--out", default=str(ROOT / "_build" / "site-check"))
    ap.add_argument("--full-page", action="store_true", help="screenshots of whole pages, not the first screen")
    ap.add_argument("--no-browser", action="store_true", help="static checks only")
    args = ap.parse_args(argv)
    site, out = Path(args.site).resolve(), Path(args.out).resolve()
    if not (site / "index.html").is_file():
        print(f"check_site: no site at {site} (build it: make quick-book)", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    print(f"check_site: static checks of {site.relative_to(ROOT) if site.is_relative_to(ROOT) else site}", flush=True)
    problems = check_static(site)
    if not args.no_browser:
        print("check_site: headless chromium, network off", flush=True)
        problems += check_browser(site, out, full_page=args.full_page)
    n_pages = len(pages_to_visit(site))
    if problems:
        print(f"\ncheck_site: {len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        print(f"check_site: 0 passed, 1 failed ({n_pages} pages, {time.time() - t0:.0f} s)")
        return 1
    print(f"check_site: {n_pages} pages load offline with no console error, math typeset, images and links resolve; "
          f"screenshots in {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}/screens")
    print(f"check_site: 1 passed, 0 failed ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
