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
   point at the repository named in ``_config.yml`` and at files that exist in it;
   while that address is the placeholder, no page links to it and there is no launch,
   edit or issue link at all, and no download installs from it; no chapter shows a
   stray output (a bare ``text/plain`` value a cell ends with).
2. A headless Chromium (Debian's ``chromium``), driven over the DevTools protocol,
   loads every page of the table of contents plus the search, index and source
   pages from a server on 127.0.0.1. Every request to another host is refused
   (and recorded as an error), so the pages are checked with the network off.
   On each page: no console error, no uncaught exception, no failed request, every
   image loaded, MathJax finished typesetting and no raw TeX (``\\frac``, ``$``,
   ``\\(``) is left in a visible text node or in the tab title. A screenshot of each
   page is written to ``{out}/screens/``. Every figure has alt text and links its
   full-size image; figure text that renders below the style's smallest size (9 pt) is
   a failure (``--no-strict-figures`` only lists it).
3. The same pages on a 390-px phone: no element of the article wider than the screen
   unless a scroll box holds it (``{page}--phone.png``).
4. The same pages with the system preferring dark: the theme follows it and the claims
   tables' text has a contrast of at least 4.5:1 (``{page}--dark.png``, scrolled to the
   first claims table).

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


def _placeholder() -> str:
    sys.path.insert(0, str(ROOT))
    from nqfbook.site import PLACEHOLDER_REPOSITORY

    return PLACEHOLDER_REPOSITORY


def check_no_placeholder_links(site: Path, placeholder: str | None = None, url: str | None = None) -> list[str]:
    """No page links to the placeholder repository, and no download installs from it.

    While ``_config.yml`` names the placeholder, the build publishes no launch (Binder, Colab),
    repository, issue or edit link at all (nqfbook/site.py, ``published_config``).
    """
    placeholder = (placeholder or _placeholder()).removeprefix("https://")
    url = (url or repository_url()[0]).rstrip("/")
    unpublished = url.removeprefix("https://") == placeholder
    problems: list[str] = []
    for page in sorted(p for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts):
        rel = page.relative_to(site).as_posix()
        for attr, link in _parse(page).links:
            if placeholder in link:
                problems.append(f"{rel}: {attr}={link!r} points at the placeholder repository")
            elif unpublished and re.search(r"mybinder\.org|colab\.research\.google\.com|/edit/|/issues", link):
                problems.append(f"{rel}: {attr}={link!r}: a launch/edit/issue link while the repository "
                                "is the placeholder")
    for nb in sorted(site.rglob("*.ipynb")):
        if f"git+https://{placeholder}" in nb.read_text(encoding="utf-8", errors="replace"):
            problems.append(f"{nb.relative_to(site).as_posix()}: the download installs nqf from the placeholder "
                            "repository (its install cell should say the book is not published)")
    return problems


def check_launch_links(site: Path, url: str | None = None, branch: str | None = None) -> list[str]:
    """Binder, Colab and download links of every chapter page point at files of the repository.

    With the placeholder address there must be no launch link at all
    (:func:`check_no_placeholder_links`); the download links are checked either way.
    """
    problems: list[str] = []
    cfg_url, cfg_branch = repository_url()
    url, branch = (url or cfg_url), (branch or cfg_branch)
    unpublished = url.rstrip("/") == _placeholder()
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
        for what, link in ({} if unpublished else want).items():
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


def _shown(cell: dict) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    return not ({"remove-cell", "remove-output"} & set(tags))


def _chapter_sources(site: Path):
    """``(path, notebook)`` of every chapter source the site publishes (an unreadable one is reported by
    check_static)."""
    for nb_path in sorted((site / "_sources" / "notebooks").glob("ch*.ipynb")):
        try:
            yield nb_path, json.loads(nb_path.read_text(encoding="utf-8"))
        except ValueError:
            continue


def check_stray_outputs(site: Path) -> list[str]:
    """No stray output on a chapter page: a bare value a cell happens to end with.

    An ``execute_result`` whose only representation is ``text/plain`` (``{'mlp': '3.7e-16'}``,
    ``163``) in a cell whose output is published is a stray repr; tables, figures and Markdown
    have richer representations, prints are ``stream`` outputs.
    """
    problems: list[str] = []
    for nb_path, nb in _chapter_sources(site):
        for i, cell in enumerate(nb.get("cells", [])):
            if cell.get("cell_type") != "code" or not _shown(cell):
                continue
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                if out.get("output_type") == "execute_result" and set(data) == {"text/plain"}:
                    text = "".join(data["text/plain"])
                    problems.append(f"notebooks/{nb_path.stem}.html: stray output of code cell {i}: "
                                    f"{text[:80]!r} (tag the cell remove-output, or end it with a statement)")
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
        # reprs, and the developers' files a reader does not have (the repository's brief, not the book)
        stray = (["&lt;Figure size", "&lt;matplotlib.", "&lt;Axes:", "Claims(chapter=", "BOOK.md", "ARCHITECTURE.md",
                  "STYLE.md", "PAPER.md"]
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
    problems += check_stray_outputs(site)
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
    return (problems + check_launch_links(site) + check_no_placeholder_links(site) + check_visible_code(site)
            + check_claims_tables(site) + check_api_entries(site))


# ------------------------------------------------------- pages that lead with the science
#: BOOK.md rule 13: the code a reader sees is the lesson; at most this many visible code lines a chapter.
MAX_VISIBLE_CODE_LINES = 80
_HIDDEN_TAGS = {"remove-input", "remove-cell", "hide-input", "hide-cell"}


def _visible_code(cell: dict) -> str:
    tags = set(cell.get("metadata", {}).get("tags", []))
    if cell.get("cell_type") != "code" or tags & _HIDDEN_TAGS:
        return ""
    return "".join(cell.get("source", []))


def check_visible_code(site: Path, limit: int = MAX_VISIBLE_CODE_LINES) -> list[str]:
    """Each chapter shows at most ``limit`` non-blank code lines (cells not hidden or removed), no
    ``glue(`` call (bookkeeping is not the lesson), and no lint comment in any code a reader can open."""
    problems: list[str] = []
    for nb_path, nb in _chapter_sources(site):
        code = [_visible_code(c) for c in nb.get("cells", [])]
        lines = sum(1 for src in code for line in src.splitlines() if line.strip())
        if lines > limit:
            problems.append(f"notebooks/{nb_path.stem}.html: {lines} visible code lines (at most {limit})")
        glued = sum(src.count("glue(") for src in code)
        if glued:
            problems.append(f"notebooks/{nb_path.stem}.html: {glued} visible glue( call(s)")
        # a reader can open a hidden cell: no lint comment there either
        on_page = ["".join(c.get("source", [])) for c in nb.get("cells", [])
                   if c.get("cell_type") == "code" and "remove-cell" not in c.get("metadata", {}).get("tags", [])
                   and "remove-input" not in c.get("metadata", {}).get("tags", [])]
        lint = sum(len(re.findall(r"#\s*(?:noqa|type:\s*ignore|pragma)\b", src)) for src in on_page)
        if lint:
            problems.append(f"notebooks/{nb_path.stem}.html: {lint} lint comment(s) (noqa, type: ignore) in its code")
    return problems


class _ClaimCells(html.parser.HTMLParser):
    """The text of the claim-name and number cells of the claims tables, math spans left out."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []
        self.numbers: list[str] = []
        self._cell = None
        self._math = 0
        self._buf: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "td" and ("claim" in cls or "num" in cls):
            self._cell, self._buf = ("name" if "claim" in cls else "num"), []
        elif self._cell and tag == "span" and "math" in cls:
            self._math += 1
        elif self._math and tag == "span":
            self._math += 1

    def handle_endtag(self, tag):
        if tag == "span" and self._math:
            self._math -= 1
        elif tag == "td" and self._cell:
            text = "".join(self._buf).strip()
            (self.names if self._cell == "name" else self.numbers).append(text)
            self._cell = None

    def handle_data(self, data):
        if self._cell and not self._math:
            self._buf.append(data)


_PSEUDO_MATH = re.compile(r"[A-Za-z0-9)\]][_^][A-Za-z0-9(({]|\bsqrt\(|\|\||->|<=|>=|\bt\*_")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?=(?:e[-+]?\d+)?\b)")


def check_claims_tables(site: Path, max_digits: int = 6) -> list[str]:
    """Claims tables: no number with more than ``max_digits`` significant digits, no ASCII pseudo-math
    (``H_ii``, ``eta^2``, ``t*_k``, ``sqrt(``) left in a claim's name outside typeset math."""
    problems: list[str] = []
    for page in sorted((site / "notebooks").glob("ch*.html")):
        p = _ClaimCells()
        p.feed(page.read_text(encoding="utf-8", errors="replace"))
        rel = page.relative_to(site).as_posix()
        long = sorted({n for cell in p.numbers for n in _NUMBER.findall(cell)
                       if len(n.replace(".", "").lstrip("0")) > max_digits})
        if long:
            problems.append(f"{rel}: claims numbers with more than {max_digits} significant digits: {long[:4]}")
        pseudo = [n for n in p.names if _PSEUDO_MATH.search(n)]
        if pseudo:
            problems.append(f"{rel}: {len(pseudo)} claim name(s) with ASCII pseudo-math, e.g. {pseudo[0][:70]!r}")
    return problems


_EMPTY_ENTRY = re.compile(r'<dt class="sig sig-object py" id="([^"]+)">(?:(?!</dt>).)*?</dt>\s*<dd>\s*</dd>', re.S)


def check_api_entries(site: Path) -> list[str]:
    """No API entry without text (a field listed twice, an undocumented public name)."""
    problems: list[str] = []
    for page in sorted(site.rglob("api*.html")):
        empties = _EMPTY_ENTRY.findall(page.read_text(encoding="utf-8", errors="replace"))
        if empties:
            problems.append(f"{page.relative_to(site).as_posix()}: {len(empties)} API entries without text, "
                            f"e.g. {', '.join(empties[:3])}")
    return problems


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


# Phone (390 px): elements of the article wider than the screen that no scroll box holds,
# and whether the page itself scrolls sideways.
_PHONE_JS = r"""
(() => {
  const W = document.documentElement.clientWidth;
  const root = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const wide = [];
  const held = el => {
    for (let a = el.parentElement; a && a !== root.parentElement; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if ((ox === 'auto' || ox === 'scroll' || ox === 'hidden' || ox === 'clip') &&
          a.getBoundingClientRect().right <= W + 1) return true;
    }
    return false;
  };
  for (const el of root.querySelectorAll('*')) {
    if (el.closest('mjx-assistive-mml')) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || getComputedStyle(el).visibility === 'hidden') continue;
    if (r.right > W + 1 && !held(el)) {
      const cls = (el.className && el.className.baseVal === undefined) ? el.className : '';
      wide.push(`${el.tagName.toLowerCase()}${cls ? '.' + String(cls).trim().split(/\s+/).join('.') : ''} `
                + `${Math.round(r.right - r.left)} px: ${(el.textContent || '').trim().slice(0, 50)}`);
      if (wide.length >= 6) break;
    }
  }
  return {W, scrollWidth: document.documentElement.scrollWidth, wide};
})()
"""

# Dark mode: the theme follows the system, and the claims tables' text has contrast >= 4.5.
_DARK_JS = r"""
(() => {
  const rgba = s => { const m = s.match(/[\d.]+/g) || [0, 0, 0, 0]; return [+m[0], +m[1], +m[2], m.length > 3 ? +m[3] : 1]; };
  const over = (top, below) => { const a = top[3]; return [0, 1, 2].map(i => top[i] * a + below[i] * (1 - a)).concat([1]); };
  const background = el => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let c = [255, 255, 255, 1];
    for (const l of layers.reverse()) c = over(l, c);
    return c;
  };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
                     return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  let min = null; const bad = [];
  for (const el of document.querySelectorAll('table.nqf-claims caption, table.nqf-claims th, table.nqf-claims td')) {
    if (!el.textContent.trim()) continue;
    const bg = background(el), fg = over(rgba(getComputedStyle(el).color), bg);
    const r = ratio(fg, bg);
    if (min === null || r < min) min = r;
    if (r < 4.5 && bad.length < 4) bad.push(`${el.tagName.toLowerCase()} "${el.textContent.trim().slice(0, 30)}" ${r.toFixed(2)}:1`);
  }
  return {theme: document.documentElement.dataset.theme, tables: document.querySelectorAll('table.nqf-claims').length,
          min, bad};
})()
"""

# Desktop: display equations wider than their column (a scroll box holds them: clipped at first sight).
_DISPLAY_JS = r"""
(() => Array.from(document.querySelectorAll('article mjx-container[display="true"]')).filter(m => {
   const box = m.closest('div.math') || m.parentElement;
   return m.scrollWidth > m.clientWidth + 1 || (box && box.scrollWidth > box.clientWidth + 1);
 }).map(m => (m.textContent || '').trim().slice(0, 60)))()
"""

# Desktop: the size at which figure text renders (the style's smallest font, at the inline dpi,
# scaled by how much the page shrinks the image). An image glued by nqfbook.kit.savefig is the saved
# file (savefig.dpi) with the width the figure has at the inline dpi set on the page (style="width: ..px"):
# that width, not its pixel count, is the figure at the inline dpi.
_FIGURE_JS = r"""
((pt, dpi) => Array.from(document.querySelectorAll('article img')).filter(i => i.naturalWidth > 200 &&
   (i.closest('figure') || i.closest('.cell_output'))).map(i => {
     const w = parseFloat(i.style.width) || i.naturalWidth;
     return {src: i.getAttribute('src'), alt: i.getAttribute('alt') || '', inches: w / dpi,
             linked: !!i.closest('a.nqf-full-size'), renderedPt: pt * dpi / 96 * (i.clientWidth / w)};
   }))
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


#: Screen widths of the three passes: desktop and dark mode at 1400 px, a phone at 390 px.
DESKTOP, PHONE = 1400, 390


def _figure_style() -> tuple[float, float]:
    """(smallest font in pt, inline dpi) of the book's figure style (nqfbook/kit/_style.py, imported as part
    of its package: it uses nqf's argument checks)."""
    import importlib

    sys.path.insert(0, str(ROOT))
    mod = importlib.import_module("nqfbook.kit._style")
    return float(getattr(mod, "MIN_FONT_PT", 9.0)), float(mod.RC_PARAMS["figure.dpi"])


def _load(browser: "Browser", base: str, page: str, problems: list[str], label: str = "") -> dict | None:
    """Load one page, collect its console errors, failed requests and what _PAGE_JS reports."""
    where = f"{page}{label}"
    browser.events.clear()
    browser.blocked.clear()
    browser.call("Page.navigate", url=base + page)
    if not browser.wait_event("Page.loadEventFired", 60):
        problems.append(f"{where}: did not finish loading in 60 s")
        return None
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
        problems.append(f"{where}: {err}")
    return info


def _shot(browser: "Browser", path: Path, width: int, height: int | None = None) -> None:
    args = {"format": "png"}
    if height:
        args.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
    path.write_bytes(base64.b64decode(browser.call("Page.captureScreenshot", **args)["data"]))


def check_browser(site: Path, out: Path, *, full_page: bool = False, strict_figures: bool = False) -> list[str]:
    """Three passes over the site: desktop (1400 px), phone (390 px), dark mode (1400 px).

    Desktop: console, requests, images, MathJax, raw TeX, figure alt text and full-size links,
    and the rendered size of figure text (below 9 pt is reported; a failure with
    ``strict_figures``). Phone: no element of the article wider than the screen unless a scroll
    box holds it. Dark (the system prefers dark): the page is dark and the claims tables' text
    has a contrast of at least 4.5:1. Screenshots: ``{page}.png``, ``{page}--phone.png``,
    ``{page}--dark.png`` (scrolled to the first claims table) in ``{out}/screens``.
    """
    problems: list[str] = []
    shots = out / "screens"
    if shots.exists():
        shutil.rmtree(shots)
    shots.mkdir(parents=True)
    server, base = serve(site)
    browser = Browser(find_chromium(), width=DESKTOP)
    min_pt, dpi = _figure_style()
    report: dict = {"pages": {}, "figures": {}, "phone": {}, "dark": {}}
    small_text: list[str] = []
    pages = pages_to_visit(site)
    try:
        for page in pages:
            t0 = time.time()
            info = _load(browser, base, page, problems)
            if info is None:
                continue
            for src in info["badImgs"]:
                problems.append(f"{page}: image did not load: {src}")
            if info["mathjax"] == "error":
                problems.append(f"{page}: MathJax reported a TeX error")
            for snippet in info["rawTeX"]:
                problems.append(f"{page}: raw TeX in the text: …{snippet}…")
            if info["titleRaw"]:
                problems.append(f"{page}: raw TeX in the tab title: {info['title']!r}")
            for eq in browser.evaluate(_DISPLAY_JS) or []:
                problems.append(f"{page}: a display equation is wider than the column at {DESKTOP} px: {eq!r}")
            figs = browser.evaluate(f"({_FIGURE_JS.strip()})({min_pt}, {dpi})") or []
            for f in figs:
                base_name = f["src"].rsplit("/", 1)[-1]
                if not f["alt"] or f["alt"] == base_name or re.fullmatch(r"[0-9a-f]{16,}\.\w+", f["alt"]):
                    problems.append(f"{page}: figure {base_name} has no alt text (alt={f['alt']!r})")
                if not f["linked"] and page.startswith("notebooks/"):
                    problems.append(f"{page}: figure {base_name} does not link its full-size image")
                if f["renderedPt"] < min_pt - 0.05:
                    small_text.append(f"{page}: {base_name} ({f['inches']:.1f} in wide): "
                                      f"{min_pt:g}-pt text renders at {f['renderedPt']:.1f} pt")
            report["figures"][page] = figs
            name = page.replace("/", "__").removesuffix(".html")
            _shot(browser, shots / f"{name}.png", DESKTOP, min(int(info["height"]), 16000) if full_page else None)
            report["pages"][page] = {"seconds": round(time.time() - t0, 2), "mathjax": info["mathjax"],
                                     "title": info["title"]}
            print(f"  {page}: {info['mathjax']}, {time.time() - t0:.1f} s", flush=True)

        # the phone
        browser.call("Emulation.setDeviceMetricsOverride", width=PHONE, height=844, deviceScaleFactor=1, mobile=True)
        for page in pages:
            if _load(browser, base, page, problems, " (390 px)") is None:
                continue
            lay = browser.evaluate(_PHONE_JS)
            report["phone"][page] = lay
            if lay["scrollWidth"] > lay["W"] + 1:
                problems.append(f"{page} (390 px): the page scrolls sideways ({lay['scrollWidth']} px wide)")
            for w in lay["wide"]:
                problems.append(f"{page} (390 px): wider than the screen: {w}")
            _shot(browser, shots / f"{page.replace('/', '__').removesuffix('.html')}--phone.png", PHONE)
        print(f"  phone ({PHONE} px): {len(report['phone'])} pages", flush=True)

        # dark mode, as the reader's system prefers it
        browser.call("Emulation.setDeviceMetricsOverride", width=DESKTOP, height=900, deviceScaleFactor=1, mobile=False)
        browser.call("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": "dark"}])
        for page in pages:
            if _load(browser, base, page, problems, " (dark)") is None:
                continue
            dark = browser.evaluate(_DARK_JS)
            report["dark"][page] = dark
            if dark["theme"] != "dark":
                problems.append(f"{page} (dark): the system prefers dark, the page is {dark['theme']!r}")
            for b in dark["bad"]:
                problems.append(f"{page} (dark): claims table text below 4.5:1 contrast: {b}")
            if dark["tables"]:
                browser.evaluate("document.querySelector('table.nqf-claims').scrollIntoView()")
                browser.pump(0.3)
            _shot(browser, shots / f"{page.replace('/', '__').removesuffix('.html')}--dark.png", DESKTOP)
        print(f"  dark mode: {len(report['dark'])} pages", flush=True)
    finally:
        browser.close()
        server.shutdown()
    if small_text:
        print(f"check_site: figure text below {min_pt:g} pt as rendered at {DESKTOP} px "
              f"({len(small_text)} figure(s) wider than the column):", flush=True)
        for line in small_text:
            print(f"  ~ {line}", flush=True)
        if strict_figures:
            problems += small_text
    report["small_figure_text"] = small_text
    (out / "report.json").write_text(json.dumps({**report, "problems": problems}, indent=1))
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", default=str(ROOT / "_build" / "html-quick"))
    ap.add_argument("--out", default=str(ROOT / "_build" / "site-check"))
    ap.add_argument("--full-page", action="store_true", help="screenshots of whole pages, not the first screen")
    ap.add_argument("--no-browser", action="store_true", help="static checks only")
    ap.add_argument("--strict-figures", action=argparse.BooleanOptionalAction, default=True,
                    help="fail when figure text renders below the style's smallest size (the default; "
                         "--no-strict-figures only lists such figures)")
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
        problems += check_browser(site, out, full_page=args.full_page, strict_figures=args.strict_figures)
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
