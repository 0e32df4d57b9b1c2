"""The operator console: static files under /console/, served without a token.

The files hold no data: the page calls the broker's own JSON routes with the bearer token the
operator types in, so it can never do more than that token may. Serving them needs no token,
but every answer passes the same Host check as the API (the middleware runs it before any
handler), and only the files shipped in the package are served: the names are read once at
startup, so no request path ever reaches the file system.

Every answer carries a Content-Security-Policy that allows scripts, styles and requests from
this origin only, with no inline script or style: a timer key that holds markup can never run,
even if a view rendered it by mistake.
"""

from __future__ import annotations

import importlib.resources
import mimetypes
from importlib.resources.abc import Traversable

from aiohttp import web

__all__ = ["CONSOLE_PATH", "CSP", "add_console_routes", "console_files"]

CONSOLE_PATH = "/console/"
_PACKAGE_DIR = "console_static"

# 'self' alone for scripts, styles and fetches; nothing inline, no framing, no forms posting
# elsewhere, no <base> rewriting the origin of relative URLs.
CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # A new broker version ships new files under the same names: revalidate every time.
    "Cache-Control": "no-cache",
}
_TYPES = {
    ".js": "text/javascript",
    ".css": "text/css",
    ".html": "text/html",
    ".svg": "image/svg+xml",
}


def console_files() -> dict[str, tuple[bytes, str]]:
    """Every shipped file by its path under /console/: (bytes, content type)."""
    root = importlib.resources.files("queen_http").joinpath(_PACKAGE_DIR)
    files: dict[str, tuple[bytes, str]] = {}

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            name = prefix + child.name
            if child.is_dir():
                walk(child, name + "/")
            elif not child.name.startswith("."):
                ext = "." + child.name.rpartition(".")[2]
                kind = _TYPES.get(ext) or mimetypes.guess_type(child.name)[0]
                files[name] = (child.read_bytes(), kind or "application/octet-stream")

    walk(root, "")
    return files


def add_console_routes(app: web.Application) -> None:
    files = console_files()

    async def index_redirect(request: web.Request) -> web.StreamResponse:
        raise web.HTTPPermanentRedirect(CONSOLE_PATH, headers=SECURITY_HEADERS)

    async def static(request: web.Request) -> web.StreamResponse:
        name = request.match_info["path"] or "index.html"
        found = files.get(name)
        if found is None:
            raise web.HTTPNotFound()
        body, kind = found
        charset = "utf-8" if kind.startswith("text/") or kind.endswith("+xml") else None
        return web.Response(body=body, content_type=kind, charset=charset, headers=SECURITY_HEADERS)

    app.router.add_route("GET", CONSOLE_PATH.rstrip("/"), index_redirect)
    app.router.add_route("GET", CONSOLE_PATH + "{path:.*}", static)
