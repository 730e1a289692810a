"""Full-page screenshots of a built Jupyter Book site, for the site review issues.

Takes the before/after pictures of the pages an issue is about (committed under
benchmarks/screenshots/), on a desktop (1400 px) and a phone (390 px) screen:

    python benchmarks/site_screenshots.py HTML_DIR OUT_DIR [--pages ch02 ch06 ch07 reproduce]

A page name matches the html file whose name starts with it followed by "_"
(ch02 -> notebooks/ch02_structure_matrices.html) or, failing that, contains it
(reproduce -> book/reproduce.html). Debian's headless Chromium loads it from
file:// with the network off (a dead proxy, no host resolves), in a window
taller than the page; the empty rows between the content and the footer (which the
theme pins to the window's bottom) are then cut out.
Each picture is written as JPEG, <page>-desktop.jpg and <page>-phone.jpg (desktop
scaled to at most 1000 px wide); a page taller than MAX_PART px is cut into
<page>-desktop-1.jpg, -2, ... so that each file stays small (under ~600 KB).
Needs Pillow and numpy (both in the project's .venv).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

Image.MAX_IMAGE_PIXELS = None
SCREENS = {"desktop": 1400, "phone": 390}
MAX_WIDTH = {"desktop": 1000, "phone": 390}  # width of the saved JPEG
HEIGHTS = (16000, 32000, 64000)  # window heights tried until the page ends above the bottom
MAX_PART = 12000  # px of the saved JPEG per file
MAX_BYTES = 600_000
CHROMIUM_FLAGS = ["--headless=new", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
                  "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
                  "--force-device-scale-factor=1", "--virtual-time-budget=20000",
                  "--run-all-compositor-stages-before-draw"]


def find_page(html_dir: Path, name: str) -> Path:
    """The html file of page ``name`` (see the module docstring); raise if there is none."""
    files = sorted(p for p in html_dir.rglob("*.html")
                   if not any(part.startswith("_") for part in p.relative_to(html_dir).parts))
    for hits in ([p for p in files if p.name.startswith(name + "_")], [p for p in files if name in p.name]):
        if hits:
            return hits[0]
    raise SystemExit(f"no page matches {name!r} in {html_dir}")


def blank_run(img: Image.Image) -> tuple[int, int] | None:
    """The rows [a, b) of the blank stretch between the page's content and its footer.

    The theme pins the footer to the bottom of the window, so a window taller than the
    page shows content, then empty rows, then the footer. None when no such stretch ends
    near the bottom (the page is taller than the window)."""
    a = np.asarray(img.convert("RGB"), dtype=np.int16)
    same = np.abs(np.diff(a, axis=0)).max(axis=(1, 2)) <= 8  # same[i]: row i + 1 equals row i
    edges = np.flatnonzero(np.diff(np.r_[0, same.astype(np.int8), 0]))  # starts and ends of the runs
    for start, end in reversed(list(zip(edges[::2], edges[1::2]))):
        if end - start >= 100:  # rows start .. end are all alike
            return (int(start) + 1, int(end) + 1) if end > len(same) - 400 else None
    return None


def shoot(chromium: str, page: Path, width: int, tmp: Path) -> Image.Image:
    """The full page at ``width``, without the empty rows above the footer."""
    for height in HEIGHTS:
        png = tmp / "shot.png"
        png.unlink(missing_ok=True)
        subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'profile'}",
                        f"--window-size={width},{height}", f"--screenshot={png}", page.as_uri()],
                       check=True, capture_output=True, timeout=300)
        img = Image.open(png).convert("RGB")
        run = blank_run(img)
        if run:  # the whole page is in: keep 40 of the blank rows
            a, b = run
            out = Image.new("RGB", (img.width, img.height - (b - a) + 40))
            out.paste(img.crop((0, 0, img.width, a + 40)), (0, 0))
            out.paste(img.crop((0, b, img.width, img.height)), (0, a + 40))
            return out
    print(f"  warning: {page.name} at {width} px is taller than {HEIGHTS[-1]} px; cut there", file=sys.stderr)
    return img


def save(img: Image.Image, stem: Path) -> list[Path]:
    """Write ``img`` as one JPEG, or as parts -1, -2, ... when it is taller than MAX_PART."""
    n = -(-img.height // MAX_PART)
    step = -(-img.height // n)
    out = []
    for i in range(n):
        part = img.crop((0, i * step, img.width, min(img.height, (i + 1) * step)))
        path = stem.with_name(stem.name + (f"-{i + 1}" if n > 1 else "") + ".jpg")
        for quality in (60, 50, 40, 30):
            part.save(path, "JPEG", quality=quality, optimize=True, progressive=True)
            if path.stat().st_size <= MAX_BYTES:
                break
        out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html_dir", type=Path, help="a built site, e.g. _build/html-quick")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--pages", nargs="+", default=["ch02", "ch06", "ch07", "reproduce"])
    args = ap.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("needs Debian's chromium (apt-get install chromium)")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="site-shots-") as tmp:
        for name in args.pages:
            page = find_page(args.html_dir.resolve(), name)
            for screen, width in SCREENS.items():
                img = shoot(chromium, page, width, Path(tmp))
                if img.width > MAX_WIDTH[screen]:
                    img = img.resize((MAX_WIDTH[screen], round(img.height * MAX_WIDTH[screen] / img.width)),
                                     Image.LANCZOS)
                for path in save(img, args.out_dir / f"{name}-{screen}"):
                    print(f"{path}: {Image.open(path).size[0]}x{Image.open(path).size[1]}, "
                          f"{path.stat().st_size / 1e3:.0f} KB  ({page.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
