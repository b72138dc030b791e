"""A real headless Chromium (Debian's chromium + chromium-driver), driven with Selenium.

Nothing is downloaded: the driver and the browser are the distribution's. A browser that
cannot start is an error, so a test that needs it fails; it never skips.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

# Without the background-networking flags Chromium keeps calling Google's hosts, which this
# machine's closed network refuses; a fresh profile per browser keeps tests independent.
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
)  # fmt: skip


@contextmanager
def chromium(profile: Path, *, width: int = 1280, height: int = 900) -> Iterator[webdriver.Chrome]:
    # Found on the PATH, where scripts/test-tools.sh (run by `make test`) looks for them.
    browser, driver_binary = shutil.which("chromium"), shutil.which("chromedriver")
    if browser is None or driver_binary is None:
        raise RuntimeError(
            "chromium or chromedriver is missing: `make test` installs them "
            "(apt-get install chromium chromium-driver)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    driver = webdriver.Chrome(options=options, service=Service(driver_binary))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
