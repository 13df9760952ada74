"""Debian's Chromium driven by Playwright, for the browser tests (playwright cannot download browsers here)."""

import os
from collections.abc import Iterator
from contextlib import contextmanager

CHROMIUM = "/usr/bin/chromium"
# Headless as root, and no background traffic: this machine's network is closed, and a test asserts that a page
# loads nothing from another host.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@contextmanager
def chromium() -> Iterator:
    """A headless Chromium for the block. Playwright's sync API keeps an asyncio loop on this thread; the test's ORM
    calls are still plain synchronous code, so Django's async-safety guard is lifted while the browser is up."""
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            try:
                yield browser
            finally:
                browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@contextmanager
def contexts_closed(browser) -> Iterator:
    """A module's one browser lent to one test: every context (cookies, storage, pages) the test opened is closed
    after it, so the next test starts as in a browser of its own, without paying for another Chromium."""
    try:
        yield browser
    finally:
        for context in list(browser.contexts):
            context.close()
