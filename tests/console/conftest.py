"""The console's browser tests share one headless chromium per module and a fresh page
per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.support.browser import chromium

# How long a page may take to show what the brokers say: a few samples, then a refresh.
SHOWN_WITHIN_MS = 15_000


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context


@pytest.fixture
def page(browser: BrowserContext) -> Iterator[Page]:
    page = browser.new_page()
    expect.set_options(timeout=SHOWN_WITHIN_MS)
    yield page
    page.close()
