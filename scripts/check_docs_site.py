#!/usr/bin/env python3
"""Check the built documentation site the way a reader sees it.

    python scripts/check_docs_site.py                 # mkdocs build --strict into site/, then check
    python scripts/check_docs_site.py --site site     # check an existing build
    python scripts/check_docs_site.py --no-shots      # links and anchors only

1. Serves ``site/`` on 127.0.0.1 (an ephemeral port, a thread of this process).
2. Parses every HTML page and checks every internal link: the page exists (over
   HTTP, from the server) and its ``#anchor`` is an ``id`` on that page.
   External links are listed, never fetched (no network).
3. Takes headless Chromium screenshots (Debian: ``apt-get install -y chromium``)
   of the home page, the ``openenv.sync.Env`` API page, the feature matrix
   (icons, no emoji font needed), the quick start and one guide into
   ``docs-shots/`` (git-ignored). ``fc-list`` tells whether an emoji font is
   installed; the run says so, since that is what the matrix must not rely on.

Exit status 1 when a link or an anchor is broken, or a screenshot failed.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

ROOT = Path(__file__).resolve().parents[1]
SHOTS = {
    "home.png": "",
    "api-sync-env.png": "reference/sync/",
    "guide-typed.png": "guides/typed/",
    # the icons are Material's inline SVGs: they must render without any emoji font installed
    "features.png": "features/",
    "quickstart.png": "quickstart/",
}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for key in ("id", "name"):
            if values.get(key) and (key == "id" or tag == "a"):
                self.ids.add(str(values[key]))
        for key in ("href", "src"):
            value = values.get(key)
            if value and not (tag == "link" and values.get("rel") in ("preconnect", "dns-prefetch")):
                self.links.append(value)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def _fetch(url: str) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read(), response.headers.get_content_type()
    except urllib.error.HTTPError as exc:
        return exc.code, b"", ""


def check_links(base: str) -> tuple[list[str], int, int, set[str]]:
    """Crawl from the home page; return (problems, pages, links checked, external links)."""
    problems: list[str] = []
    external: set[str] = set()
    pages: dict[str, _Page] = {}
    queue = [base]
    checked = 0
    pending: list[tuple[str, str, str]] = []  # (from page, target page url, fragment)
    while queue:
        url = queue.pop()
        if url in pages:
            continue
        status, body, ctype = _fetch(url)
        if status != 200:
            problems.append(f"{url}: HTTP {status}")
            pages[url] = _Page()
            continue
        page = _Page()
        if ctype == "text/html":
            page.feed(body.decode("utf-8", "replace"))
        pages[url] = page
        for link in page.links:
            absolute = urljoin(url, link)
            if urlparse(absolute).scheme in ("mailto", "data", "javascript"):
                continue
            if not absolute.startswith(base):
                external.add(absolute)
                continue
            target, fragment = urldefrag(absolute)
            checked += 1
            pending.append((url, target, unquote(fragment)))
            if target not in pages and (target.endswith("/") or target.endswith(".html")):
                queue.append(target)
    for source, target, fragment in pending:
        if target not in pages:
            status, _, _ = _fetch(target)
            if status != 200:
                problems.append(f"{source}: broken link to {target} (HTTP {status})")
            pages[target] = _Page()
            continue
        if fragment and fragment not in pages[target].ids and pages[target].ids:
            problems.append(f"{source}: no anchor #{fragment} on {target}")
    html_pages = sum(1 for page in pages.values() if page.ids)
    return sorted(set(problems)), html_pages, checked, external


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshots(base: str, out: Path, size: str) -> list[str]:
    browser = _chromium()
    if browser is None:
        return ["no chromium found: apt-get install -y chromium"]
    out.mkdir(parents=True, exist_ok=True)
    problems = []
    fonts = shutil.which("fc-list")
    if fonts:
        listed = subprocess.run([fonts], capture_output=True, text=True, timeout=60).stdout
        emoji = [line for line in listed.splitlines() if "emoji" in line.lower()]
        print(f"emoji fonts installed: {len(emoji)}" + (" (the icons must not need one)" if not emoji else ""))
    for name, path in SHOTS.items():
        target = out / name
        target.unlink(missing_ok=True)
        command = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={out / '.chromium-profile'}",
            f"--window-size={size}",
            f"--screenshot={target}",
            base + path,
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if not target.exists():
            problems.append(f"screenshot {name} failed (exit {result.returncode}): {result.stderr[-500:]}")
        else:
            print(f"screenshot: {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
    shutil.rmtree(out / ".chromium-profile", ignore_errors=True)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, help="an existing build (default: build into site/ first)")
    parser.add_argument("--shots", type=Path, default=ROOT / "docs-shots", help="screenshot folder")
    parser.add_argument("--no-shots", action="store_true", help="skip the screenshots")
    parser.add_argument("--window-size", default="1280,1600", help="browser window, WIDTH,HEIGHT")
    args = parser.parse_args(argv)

    site = args.site
    if site is None:
        site = ROOT / "site"
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
        subprocess.run(build, check=True, cwd=ROOT, env=env)
    if not (site / "index.html").exists():
        print(f"error: {site} has no index.html", file=sys.stderr)
        return 1

    server, base = _serve(site)
    try:
        problems, pages, checked, external = check_links(base)
        print(f"{pages} pages, {checked} internal links and anchors checked; {len(external)} external not fetched")
        if not args.no_shots:
            problems += screenshots(base, args.shots, args.window_size)
    finally:
        server.shutdown()
        server.server_close()
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
