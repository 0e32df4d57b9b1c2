"""The console's files as the HTTP transport serves them: without a token, behind the Host
check, with a Content-Security-Policy that allows no inline script or style, and only the
files the package ships. The page's own code is checked for the constructs that would turn
data into markup."""

from __future__ import annotations

import html.parser
import re

import aiohttp
import pytest

from queen_http import HttpTransport
from queen_http.console import CSP, console_files
from queen_http.testing import http_settings
from queen_timers.testing.fixtures import started_broker

SECRET = "console-test-secret-that-is-long-enough-0123456789"


def _directives(csp: str) -> dict[str, list[str]]:
    out = {}
    for part in csp.split(";"):
        name, *values = part.split()
        out[name] = values
    return out


async def test_the_console_is_served_with_its_security_headers(http):
    async with http.get("/console/", allow_redirects=False) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/html")
        page = await r.text()
        headers = r.headers
    assert "queen-timers console" in page
    csp = _directives(headers["Content-Security-Policy"])
    assert csp["default-src"] == ["'none'"]
    assert csp["script-src"] == ["'self'"] and csp["style-src"] == ["'self'"]
    assert csp["connect-src"] == ["'self'"] and csp["frame-ancestors"] == ["'none'"]
    assert "unsafe-inline" not in headers["Content-Security-Policy"]
    assert "unsafe-eval" not in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    for name, (_, kind) in console_files().items():
        async with http.get(f"/console/{name}") as r:
            assert r.status == 200, name
            assert r.headers["Content-Type"].split(";")[0] == kind
            assert r.headers["Content-Security-Policy"] == CSP
    async with http.get("/console/app.js") as r:
        assert r.headers["Content-Type"].startswith("text/javascript")


async def test_bare_path_redirects_and_unknown_files_are_404(http):
    async with http.get("/console", allow_redirects=False) as r:
        assert r.status == 308 and r.headers["Location"] == "/console/"
    for path in (
        "/console/nope.js",
        "/console/../app.py",
        "/console/%2e%2e/app.py",
        "/console/views",
    ):
        async with http.get(path, allow_redirects=False) as r:
            assert r.status == 404, path
            assert (await r.json())["error"] == "not_found"


async def test_the_files_need_no_token_but_the_data_does(db_url):
    async with started_broker(db_url, jwt_secret=SECRET) as q:
        t = HttpTransport(http_settings())
        await t.start(q)
        try:
            async with aiohttp.ClientSession(t.url) as s:
                async with s.get("/console/app.js") as r:
                    assert r.status == 200
                async with s.get("/api/v1/system/kv-timers") as r:
                    assert r.status == 401
        finally:
            await t.stop()


async def test_the_files_obey_the_host_check(http_transport):
    async with aiohttp.ClientSession(http_transport.url) as s:
        async with s.get("/console/", headers={"Host": f"evil.example:{http_transport.port}"}) as r:
            assert r.status == 403
            assert (await r.json())["reason"] == "host_not_allowed"


class _Markup(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inline: list[str] = []

    def handle_starttag(self, tag, attrs):
        names = {k for k, _ in attrs}
        if tag == "script" and "src" not in names:
            self.inline.append("<script> without src")
        if tag == "style":
            self.inline.append("<style>")
        self.inline += [f"{tag} {k}=" for k in names if k == "style" or k.startswith("on")]


def test_the_page_has_no_inline_script_or_style():
    files = console_files()
    parser = _Markup()
    parser.feed(files["index.html"][0].decode())
    assert parser.inline == []


# What would put a string into the DOM as markup, or run a string as code.
_MARKUP_SINKS = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
    r"setAttribute\(\s*[\"']on|\.style\s*=|setAttribute\(\s*[\"']style"
)


@pytest.mark.parametrize("name", sorted(n for n in console_files() if n.endswith(".js")))
def test_no_script_turns_data_into_markup(name):
    text = console_files()[name][0].decode()
    assert _MARKUP_SINKS.findall(text) == []
