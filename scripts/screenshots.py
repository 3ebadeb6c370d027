"""Take the docs' pictures of the dashboard: docs/images/overview.png and workflows.png.

Seeds a fresh SQLite database the way the browser tests do (tests/browser/overview_seed.py:
genuine runs plus a week of backdated ones), serves the dashboard over it, and photographs
the pages in the same headless Chromium the tests drive (selenium, /usr/bin/chromium and
/usr/bin/chromedriver, or $DURABLE_CHROMIUM and $DURABLE_CHROMEDRIVER).

    python scripts/screenshots.py [--out docs/images] [--width 1366] [--dark]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import overview_seed  # noqa: E402
from tests.browser.conftest import CHROMEDRIVER, CHROMIUM, Page  # noqa: E402

#: page -> (fragment, a JavaScript condition true once it has drawn)
PAGES = {
    "overview": ("#/", "document.querySelectorAll('#ov-hours a.bar').length > 0"),
    "workflows": ("#/workflows", "document.querySelectorAll('#workflows-body tr').length > 0"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--width", type=int, default=1366)
    parser.add_argument("--dark", action="store_true", help="emulate a system in dark mode")
    args = parser.parse_args()

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    scheme = "dark" if args.dark else "light"
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
    )
    try:
        with (
            tempfile.TemporaryDirectory() as directory,
            overview_seed.served(Path(directory)) as board,
        ):
            page = Page(driver, board)
            page.login()
            for name, (fragment, ready) in PAGES.items():
                driver.set_window_size(args.width, 900)
                page.open(fragment)
                page.wait_js(ready, f"the {name} page to draw")
                height = page.js("return document.documentElement.scrollHeight")
                chrome = page.js("return window.outerHeight - window.innerHeight")
                driver.set_window_size(args.width, min(height, 2400) + chrome)
                path = args.out / f"{name}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(path))
                print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
