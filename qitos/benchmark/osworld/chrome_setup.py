"""Scoring side: the `chrome_open_tabs` setup step as upstream's SetupController runs it: connect to the VM's Chrome over the
DevTools protocol (Playwright `connect_over_cdp` at the VM's chromium port), open each URL as a new tab of the
existing browser context and close the default tab after the first. A page that does not load in 60 s keeps its
tab, as upstream. Connecting is retried (15 attempts, 5 s apart) while Chrome starts."""

from __future__ import annotations

import time
from collections.abc import Callable

from qitos.benchmark.osworld.errors import ControllerError
from qitos.benchmark.osworld.upstream_env import VMAddress


def open_tabs(address: VMAddress, urls: list[str], *, attempts: int = 15, wait: float = 5.0,
              sleep: Callable[[float], None] = time.sleep) -> None:
    from playwright.sync_api import sync_playwright

    endpoint = f"http://{address.ip}:{address.chromium_port}"
    error: Exception | None = None
    for attempt in range(attempts):
        if attempt:
            sleep(wait)
        with sync_playwright() as playwright:
            try:
                browser = playwright.chromium.connect_over_cdp(endpoint)
            except Exception as exc:  # noqa: BLE001 - Chrome may still be starting: retry
                error = exc
                continue
            context = browser.contexts[0]
            for index, url in enumerate(urls):
                page = context.new_page()
                try:
                    page.goto(url, timeout=60000)
                except Exception:  # noqa: BLE001, S110 - upstream keeps a tab whose page did not load
                    pass
                if index == 0:
                    context.pages[0].close()
            return
    raise ControllerError(f"chrome_open_tabs: no Chrome DevTools at {endpoint} after {attempts} attempts: {error}")
