"""GET /governance: the governance form the protocol requires, as JSON and as escaped HTML."""

from __future__ import annotations


async def test_governance_as_json(client, operator):
    async with client.get("/governance", headers={"Accept": "application/json"}) as resp:
        assert resp.status == 200 and resp.content_type == "application/json"
        assert await resp.json() == operator.governance.governance_form()


async def test_governance_as_html_lists_every_rule(client, operator):
    async with client.get("/governance", headers={"Accept": "text/html"}) as resp:
        assert resp.status == 200 and resp.content_type == "text/html"
        page = await resp.text()
    for key in operator.governance.governance_form():
        assert f"<dt>{key}</dt>" in page


async def test_governance_html_escapes_everything(client, operator, monkeypatch):
    form = {"<b>key</b>": "<script>alert(1)</script>", "scopes": {"a&b": ["<i>x</i>"]}}
    monkeypatch.setattr(operator.governance, "governance_form", lambda: form)
    async with client.get("/governance") as resp:
        page = await resp.text()
    assert "<script>" not in page and "<b>" not in page and "<i>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "a&amp;b" in page
