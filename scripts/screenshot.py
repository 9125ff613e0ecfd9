"""Takes the dashboard screenshot the README and docs/concepts.md show (docs/img/dashboard.png).

    .venv/bin/python scripts/screenshot.py --storage sqlite:///prism_search.db   # the quickstart README command 1 ran
    .venv/bin/python scripts/screenshot.py [--out docs/img/dashboard.png] [--trials 30]   # a synthetic study

With `--storage`, the stored study `--study` (default: quickstart) is photographed as it is: the README's picture
is of the quickstart a reader runs. Without it, a quickstart-shaped study is built in a temporary SQLite file
without training (`tests.search.synthetic`: the attrs the driver writes, learning curves, pruned and failed trials,
a known loss law). The real dashboard serves it on a free loopback port, and Debian's /usr/bin/chromium
(scripts/install_browser.sh), driven by Playwright, photographs the study page at 1200x900. Nothing is downloaded;
the server and the browser stop when it is done.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import sync_playwright

from search.config import load_config
from search.dashboard import make_server_for
from tests.search.synthetic import synthetic_study

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]
VIEWPORT = {"width": 1200, "height": 900}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "dashboard.png")
    parser.add_argument("--trials", type=int, default=30, help="finished trials of the synthetic study")
    parser.add_argument("--storage", help="photograph a stored study instead of a synthetic one (SQLAlchemy URL)")
    parser.add_argument("--study", default="quickstart", help="with --storage: the study's name")
    args = parser.parse_args()
    if not CHROMIUM.exists():
        sys.exit(f"error: {CHROMIUM} is missing (fix: bash scripts/install_browser.sh)")
    if args.storage:
        _serve_and_photograph(args.storage, args.study, args.out)
    else:
        config = load_config(ROOT / "studies" / "quickstart.toml").model_copy(update={"n_trials": args.trials})
        with tempfile.TemporaryDirectory() as folder:
            url = f"sqlite:///{Path(folder) / 'dashboard.db'}"
            synthetic_study(config, url, args.trials, audit=True)
            _serve_and_photograph(url, config.name, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e3:.0f} kB)")


def _serve_and_photograph(url: str, name: str, out: Path) -> None:
    server = make_server_for(url, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _photograph(f"http://127.0.0.1:{server.server_port}/study/{name}", out)
    finally:
        server.shutdown()
        server.server_close()


def _photograph(page_url: str, out: Path) -> None:
    """The top of the page once every figure has drawn; a page error fails the run rather than the picture."""
    errors: list[str] = []
    out.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_url)
            page.wait_for_load_state("networkidle")
            page.wait_for_selector("#fig-history .scatterlayer .point")
            page.screenshot(path=str(out))
        finally:
            browser.close()
    if errors:
        sys.exit(f"error: the dashboard page reported errors: {errors}")


if __name__ == "__main__":
    main()
