"""The memory viewer's page at /ui: a few static files shipped in the package (api/viewer/).

No data and no secret is ever put into these files: the page fetches everything from the JSON
API with the key the user types, so every action is checked by the same rules as any client's.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

router = APIRouter(include_in_schema=False)

FILES = {
    "index.html": "text/html; charset=utf-8",
    "viewer.js": "text/javascript; charset=utf-8",
    "dom.js": "text/javascript; charset=utf-8",
    "cards.js": "text/javascript; charset=utf-8",
    "chart.js": "text/javascript; charset=utf-8",
    "viewer.css": "text/css; charset=utf-8",
}
# Only the page's own files run or style it; it talks only to this origin; no frames, no forms
# posted elsewhere, no plugins. Scripts are external files: nothing inline is ever allowed.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


@cache
def _asset(name: str) -> bytes:
    return resources.files("api").joinpath("viewer", name).read_bytes()


def _serve(name: str) -> Response:
    return Response(_asset(name), media_type=FILES[name], headers=HEADERS)


@router.get("/ui")
async def page() -> Response:
    return _serve("index.html")


@router.get("/ui/{name}")
async def asset(name: str) -> Response:
    if name not in FILES:
        raise HTTPException(404)  # the one error shape, as for any unknown path
    return _serve(name)
