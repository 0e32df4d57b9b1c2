"""A real Chromium driving the console, for the browser tests and the screenshot script.

Debian's `chromium` and `chromium-driver` (apt-get install chromium chromium-driver; .ci/run
installs them when missing); nothing is downloaded. The broker runs on the caller's event
loop, so every blocking WebDriver call goes through `asyncio.to_thread`: the loop keeps
serving the page's requests while the driver waits.

Waits are explicit DOM conditions with a generous timeout, never fixed sleeps.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

__all__ = ["By", "Console", "find_chromium", "start_driver"]

# Seconds a DOM condition may take: generous, for a loaded 2-core machine.
WAIT_S = 30
# How often a wait looks at the DOM again: each look is a round trip to chromedriver.
POLL_S = 0.05
_BINARIES = ("chromium", "chromium-browser", "google-chrome")
_DRIVERS = ("chromedriver",)


def _which(names: tuple[str, ...], env: str) -> str | None:
    named = os.environ.get(env)
    if named:
        return named if os.access(named, os.X_OK) else None
    for n in names:
        found = shutil.which(n) or (
            f"/usr/bin/{n}" if os.access(f"/usr/bin/{n}", os.X_OK) else None
        )
        if found:
            return found
    return None


def find_chromium() -> tuple[str, str] | None:
    """(browser, driver) paths, or None where either is missing. QUEEN_TEST_CHROMIUM and
    QUEEN_TEST_CHROMEDRIVER name other binaries."""
    browser = _which(_BINARIES, "QUEEN_TEST_CHROMIUM")
    driver = _which(_DRIVERS, "QUEEN_TEST_CHROMEDRIVER")
    return (browser, driver) if browser and driver else None


def start_driver(browser: str, driver: str, width: int = 1280, height: int = 900) -> WebDriver:
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespace for the sandbox
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--lang=en-US",
        f"--window-size={width},{height}",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)


class Console:
    """The console page in one driver, with async helpers around the blocking calls."""

    def __init__(self, driver: WebDriver, base_url: str):
        self.d = driver
        self.base = base_url

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    async def open(self, hash_: str = "#/overview", refresh_s: int = 0) -> None:
        """Load the console afresh (its own sessionStorage per origin: a new port, a new
        tab state). `refresh_s` = 0 turns the live refresh off so the DOM only changes when
        the test acts; a test of the live refresh passes a number of seconds."""
        url = f"{self.base}/console/?refresh={refresh_s}{hash_}"
        await self.run(self.d.get, url)
        await self.wait(lambda d: d.execute_script("return document.readyState") == "complete")

    async def goto(self, hash_: str) -> None:
        await self.run(self.d.execute_script, "window.location.hash = arguments[0]", hash_)

    async def wait(self, cond: Callable[[WebDriver], Any], what: str = "") -> Any:
        def waited() -> Any:
            return WebDriverWait(
                self.d,
                WAIT_S,
                poll_frequency=POLL_S,
                ignored_exceptions=(StaleElementReferenceException,),
            ).until(cond, what)

        return await self.run(waited)

    async def wait_css(self, css: str) -> WebElement:
        def present(d: WebDriver) -> Any:
            found = d.find_elements(By.CSS_SELECTOR, css)
            return found[0] if found and found[0].is_displayed() else False

        return await self.wait(present, f"an element {css!r}")

    async def wait_text(self, css: str, expect: str | Callable[[str], bool]) -> str:
        """The text of the first element matching `css` once it equals (or satisfies) `expect`."""
        check = expect if callable(expect) else (lambda t: t == expect)

        def ready(d: WebDriver) -> Any:
            found = d.find_elements(By.CSS_SELECTOR, css)
            if not found:
                return False
            text = found[0].text
            return text if check(text) else False

        return await self.wait(ready, f"{css!r} to read {expect!r}")

    async def texts(self, css: str) -> list[str]:
        def read() -> list[str]:
            return [e.text for e in self.d.find_elements(By.CSS_SELECTOR, css)]

        return await self.run(read)

    async def click(self, css: str) -> None:
        """Click the first visible, enabled element matching `css`, found afresh on every try
        (a view that redraws replaces its elements)."""

        def clicked(d: WebDriver) -> bool:
            try:
                found = [e for e in d.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]
                if not found or not found[0].is_enabled():
                    return False
                found[0].click()
                return True
            except WebDriverException:
                return False

        await self.wait(clicked, f"{css!r} to be clickable")

    async def type(self, css: str, text: str, *, clear: bool = True) -> None:
        el = await self.wait_css(css)

        def typed() -> None:
            if clear:
                el.clear()
            el.send_keys(text)

        await self.run(typed)

    async def js(self, script: str, *args: Any) -> Any:
        return await self.run(self.d.execute_script, script, *args)

    async def confirm(self, expect_title: str | Callable[[str], bool] | None = None) -> str:
        """Press Confirm in the open confirm dialog; returns its title and text."""
        await self.wait_css("dialog#confirm[open]")
        title = await self.wait_text(
            "#confirm-title", expect_title if expect_title is not None else (lambda t: bool(t))
        )
        text = await self.wait_text("#confirm-text", lambda t: True)
        await self.click("#confirm-ok")
        await self.wait(
            lambda d: not d.find_elements(By.CSS_SELECTOR, "dialog#confirm[open]"),
            "the confirm dialog to close",
        )
        return f"{title}\n{text}"

    async def set_token(self, token: str) -> None:
        await self.type("#token-input", token)
        await self.click("#token-save")
        await self.wait_text("#token-state", "token set for this tab")

    async def console_errors(self) -> list[str]:
        """Browser console entries at SEVERE level (a CSP violation or a script error)."""

        def read() -> list[str]:
            return [e["message"] for e in self.d.get_log("browser") if e["level"] == "SEVERE"]

        return await self.run(read)

    async def screenshot(self, path: str, width: int, height: int = 900) -> None:
        def shoot() -> None:
            self.d.set_window_size(width, height)
            self.d.execute_script("window.scrollTo(0, 0)")
            full = self.d.execute_script(
                "return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)"
            )
            self.d.set_window_size(width, min(max(int(full) + 40, height), 4000))
            self.d.execute_script("window.scrollTo(0, 0)")
            self.d.save_screenshot(path)

        await self.run(shoot)
