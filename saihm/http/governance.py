"""``GET /governance``: the governance form the protocol requires an operator to publish.

saihm-protocol "Governance": eligibility to propose and to vote, the vote-weight function, the
threshold, the voting window and the permitted scopes with their parameters. Served as JSON to
``Accept: application/json`` and otherwise as an HTML page in which every value is escaped.
"""

from __future__ import annotations

import html
from typing import Any

from aiohttp import web

from saihm.http.common import OPERATOR, json_response

__all__ = ["governance", "render_html", "wants_json"]

CACHE = "public, max-age=60"


def wants_json(accept: str) -> bool:
    """True when the Accept header asks for JSON rather than HTML (first match wins)."""
    for part in accept.split(","):
        media = part.split(";", 1)[0].strip().lower()
        if media in ("application/json", "application/*"):
            return True
        if media in ("text/html", "text/*", "*/*"):
            return False
    return False


def _render(value: object) -> str:
    if isinstance(value, dict):
        rows = "".join(
            f"<dt>{html.escape(str(k))}</dt><dd>{_render(v)}</dd>" for k, v in value.items()
        )
        return f"<dl>{rows}</dl>"
    if isinstance(value, list | tuple):
        return "<ul>" + "".join(f"<li>{_render(v)}</li>" for v in value) + "</ul>"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return html.escape(str(value))


def render_html(form: dict[str, Any]) -> str:
    """A self-contained HTML page of the form; keys and values are HTML-escaped."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>saihm governance</title></head><body>"
        "<h1>Governance</h1><p>The rules this operator applies to proposals and votes "
        "(saihm_governance_propose, saihm_governance_vote).</p>"
        f"{_render(form)}</body></html>\n"
    )


async def governance(request: web.Request) -> web.Response:
    """The governance form as JSON or HTML, chosen by the Accept header."""
    form = request.app[OPERATOR].governance.governance_form()
    if wants_json(request.headers.get("Accept", "")):
        return json_response(form, cache=CACHE)
    return web.Response(
        text=render_html(form),
        content_type="text/html",
        charset="utf-8",
        headers={"Cache-Control": CACHE, "Content-Security-Policy": "default-src 'none'"},
    )
