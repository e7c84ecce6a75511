"""saihm_recall builds its read request once (issue 36): the operator turns the recall window
the edge parsed into one :class:`ReadRequest` that carries the very window object into the
store's read path, with nothing unpacked into keyword arguments and packed again."""

from __future__ import annotations

import pytest

from saihm.operator import RecallWindow
from saihm.protocol.window import parse_window
from saihm.store import Page, ReadRequest
from saihm.store.read.reader import CheckedReader
from tests.support.world import World


def test_recall_passes_the_parsed_window_through_unchanged(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = world.holder()
    world.call(alice, "saihm_remember", content="the boat is blue")
    world.call(alice, "saihm_remember", content="the kettle is red")
    access = world.store.authenticate(alice.token)
    window = parse_window({"limit": 1, "kinds": ["memory"]}, queried=True)
    seen: list[ReadRequest] = []
    real = CheckedReader.read_page

    def read_page(self: CheckedReader, request: ReadRequest) -> Page:
        seen.append(request)
        return real(self, request)

    monkeypatch.setattr(CheckedReader, "read_page", read_page)
    recalled = world.operator.memory.recall(access, "boat", window)
    (request,) = seen
    assert request.window is window and recalled.window is window
    assert request.access is access and request.q.text == "boat"
    assert (request.limit, request.start, request.cell_ids) == (1, None, None)
    assert [c.payload.content for c in recalled.page.cells] == ["the boat is blue"]


def test_the_window_narrows_on_the_request() -> None:
    """The window's namespaces and kinds become the request's filter on the decrypted label;
    without either there is none (the holder-wide path's fast case)."""
    from saihm.events import SealedPayload
    from tests.support.world import hand_made_access

    access = hand_made_access(bytes(32), bytes(32))
    assert ReadRequest(access).narrow is None
    narrow = ReadRequest(access, window=RecallWindow(kinds=frozenset({"said"}))).narrow
    assert narrow is not None
    said = SealedPayload(content="x", session_id=bytes(32), namespace="n", kind="said")
    note = SealedPayload(content="x", session_id=bytes(32), namespace="n", kind="memory")
    assert narrow(said) and not narrow(note)
