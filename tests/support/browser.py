"""A real headless browser for the console's tests: Debian's chromium, driven by playwright.

playwright (the Python package, from PyPI) drives the chromium that
`apt-get install chromium` puts at /usr/bin/chromium; playwright's own browser
builds are never downloaded. A machine without chromium fails these tests, with
the command that installs it: a console nobody looked at is not tested.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

CHROMIUM = os.environ.get("HERDLESS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # tests run as root in CI, where chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Screenshots of each page a test looked at, for a person to look at too.
ARTIFACTS = Path(__file__).parents[1] / "artifacts"


def require_chromium() -> str:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        found = shutil.which("chromium")
        pytest.fail(
            f"chromium is not installed at {CHROMIUM}"
            + (f" (there is one at {found}: set HERDLESS_CHROMIUM)" if found else "")
            + ": apt-get install -y chromium",
            pytrace=False,
        )
    return CHROMIUM


@contextmanager
def chromium(user_data_dir: Path, **options: Any) -> Iterator[BrowserContext]:
    """A headless chromium with a fresh profile in `user_data_dir`; `options` go to
    playwright's launch_persistent_context (e.g. ignore_https_errors)."""
    executable = require_chromium()
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(user_data_dir),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
            **options,
        )
        try:
            yield context
        finally:
            context.close()


def screenshot(page: Page, name: str) -> Path:
    """The whole page as `tests/artifacts/<name>.png`."""
    path = ARTIFACTS / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    return path


def wait_answering(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Return once the console at `url` answers; fail with its log if it exits or stays
    silent for 30 s."""
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, f"the console exited:\n{log.read_text()}"
        try:
            with urllib.request.urlopen(f"{url}/brokers", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"the console did not answer:\n{log.read_text()}"
        time.sleep(0.1)
