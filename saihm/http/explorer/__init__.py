"""``GET /explorer/``: the public log explorer (DESIGN.md "Pinned additions").

A read-only page of static HTML, CSS and JavaScript shipped in the package. Its script reads
only the public log API (``/log/...``) and ``/governance``, and checks in the browser what a
browser can check: Merkle inclusion (RFC 9162 §2.1.3.2) and consistency (§2.1.4.2) with
WebCrypto SHA-256, and the checkpoint's Ed25519 signature lines (c2sp.org/signed-note) where the
browser's WebCrypto has Ed25519. The server fills in the latest checkpoint so the page says
something without JavaScript, and the operations the public log lists (the operation
registry's ``OPERATIONS`` whose ``public_log`` is set, in its order) as the options the script
reads; nothing it inserts is unescaped.

The same files can be copied beside a static tlog-tiles tree (``copy_static``), where the
script reads ``../checkpoint`` and the views that need the JSON API say so.
"""

from __future__ import annotations

import base64
import html
import shutil
from importlib import resources
from pathlib import Path

from aiohttp import web

from saihm.events.operations import OPERATIONS
from saihm.http.common import OPERATOR, run_sync

__all__ = [
    "FILES",
    "add_explorer_routes",
    "copy_static",
    "operation_options",
    "render_checkpoint",
    "render_index",
    "static_files",
]

#: Every file the page is made of, with its media type; nothing else is served from here.
FILES = {
    "index.html": "text/html",
    "explorer.css": "text/css",
    "explorer.js": "text/javascript",
    "merkle.js": "text/javascript",
    "note.js": "text/javascript",
    "views.js": "text/javascript",
}
#: The marker in index.html the server replaces with the rendered checkpoint.
MARKER = "<!--saihm:checkpoint-->"
#: The marker in index.html the server replaces with the operations' options.
OPERATIONS_MARKER = "<!--saihm:operations-->"
STATIC_NOTE = (
    "<p>This is a static copy of the explorer. Its script reads <code>../checkpoint</code> "
    "and the tiles beside it.</p>"
)
#: No inline script or style, nothing fetched from anywhere but this origin, no framing.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
CACHE = "public, max-age=60"


def _read(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


def render_checkpoint(note: bytes) -> str:
    """The checkpoint note as escaped HTML: origin, size, root and one row per signature line.

    What a reader sees without JavaScript; nothing here is verified (the script does that).
    A note that does not parse is shown as text only.
    """
    text = note.decode("utf-8", "replace")
    body, _, sigs = text.partition("\n\n")
    lines = body.split("\n")
    if len(lines) < 3:
        return f"<pre>{html.escape(text)}</pre>"
    origin, size, root = lines[0], lines[1], lines[2]
    try:
        root_hex = base64.b64decode(root, validate=True).hex()
    except ValueError:
        root_hex = "(not base64)"
    rows = []
    for line in sigs.split("\n"):
        if not line:
            continue
        _, _, rest = line.partition(" ")
        name, _, blob = rest.partition(" ")
        try:
            key_id = base64.b64decode(blob, validate=True)[:4].hex()
        except ValueError:
            key_id = "(not base64)"
        rows.append(f"<li>{html.escape(name)} key ID <code>{html.escape(key_id)}</code></li>")
    return (
        '<dl class="facts">'
        f"<dt>Origin</dt><dd>{html.escape(origin)}</dd>"
        f"<dt>Tree size</dt><dd>{html.escape(size)}</dd>"
        f'<dt>Root hash</dt><dd><code class="hash">{html.escape(root_hex)}</code></dd>'
        "</dl>"
        f"<p>Signature lines (checked by the script, not by this server-rendered text):</p>"
        f"<ul>{''.join(rows)}</ul>"
        f"<details><summary>The signed note</summary><pre>{html.escape(text)}</pre></details>"
    )


def operation_options() -> str:
    """One ``<option>`` per operation the public log lists, in the registry's order: the
    explorer's menu and the script's list of operations (its chart, its listing)."""
    names = [s.operation.value for s in OPERATIONS.values() if s.public_log]
    return "".join(f"<option>{html.escape(name)}</option>" for name in names)


def render_index(note: bytes | None) -> str:
    """index.html with the checkpoint rendered in (``None``: the static copy's note) and the
    operations' options."""
    page = _read("index.html").decode("utf-8")
    page = page.replace(OPERATIONS_MARKER, operation_options(), 1)
    return page.replace(MARKER, STATIC_NOTE if note is None else render_checkpoint(note), 1)


def _headers() -> dict[str, str]:
    return {
        "Cache-Control": CACHE,
        "Content-Security-Policy": CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }


async def index(request: web.Request) -> web.Response:
    """``GET /explorer/``: the page, with the latest checkpoint rendered for readers without
    JavaScript."""
    note = await run_sync(request, request.app[OPERATOR].store.checkpoint_now)
    headers = _headers() | {"Cache-Control": "no-store"}
    return web.Response(
        text=render_index(note), content_type="text/html", charset="utf-8", headers=headers
    )


async def static_file(request: web.Request) -> web.Response:
    """``GET /explorer/<file>``: one of :data:`FILES`; any other name is 404 ``not_found``."""
    name = request.match_info["name"]
    if name not in FILES or name == "index.html":
        raise web.HTTPNotFound()
    return web.Response(
        body=_read(name), content_type=FILES[name], charset="utf-8", headers=_headers()
    )


async def redirect(request: web.Request) -> web.Response:
    """``GET /explorer``: to ``/explorer/``, so the page's relative links resolve."""
    raise web.HTTPMovedPermanently("/explorer/")


def add_explorer_routes(app: web.Application) -> None:
    """Register ``/explorer``, ``/explorer/`` and the page's static files."""
    app.router.add_get("/explorer", redirect)
    app.router.add_get("/explorer/", index)
    app.router.add_get("/explorer/{name}", static_file)


def static_files() -> dict[str, bytes]:
    """The page's files for a static copy, by name: index.html carries the static note in place
    of a server-rendered checkpoint."""
    return {
        name: render_index(None).encode("utf-8") if name == "index.html" else _read(name)
        for name in FILES
    }


def copy_static(out: Path) -> Path:
    """Write the page's files to ``out/explorer/`` (beside a published tiles tree); returns
    that directory. index.html gets the static note in place of a server-rendered checkpoint.
    """
    target = Path(out) / "explorer"
    target.mkdir(parents=True, exist_ok=True)
    for name, data in static_files().items():
        tmp = target / (name + ".tmp")
        tmp.write_bytes(data)
        shutil.move(str(tmp), str(target / name))
    return target
