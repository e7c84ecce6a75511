"""``saihm.offline.fsck.differences``: the merge walk that compares live projections with a rebuild
(docs/operations.md "What `verify --data` checks", check 2) reports exactly the keys a naive
set comparison finds, each with the right reason, in key order per database."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from saihm.offline.fsck import differences
from saihm.projections import Projections

NAMES = Projections.DB_NAMES
EXTRA = "not in a rebuild from the log"
MISSING = "missing (a rebuild from the log has it)"
DIFFERS = "value differs from a rebuild from the log"


class _Tables:
    """Stands in for :class:`Projections`: ``items`` yields one database's pairs in key order."""

    def __init__(self, content: dict[bytes, dict[bytes, bytes]]) -> None:
        self.content = content

    def items(self, txn: object, name: bytes) -> Iterator[tuple[bytes, bytes]]:
        yield from sorted(self.content.get(name, {}).items())


def _naive(
    live: dict[bytes, dict[bytes, bytes]], fresh: dict[bytes, dict[bytes, bytes]]
) -> list[tuple[bytes, bytes, str]]:
    out = []
    for name in NAMES:
        a, b = live.get(name, {}), fresh.get(name, {})
        for key in sorted(a.keys() | b.keys()):
            if key not in b:
                out.append((name, key, EXTRA))
            elif key not in a:
                out.append((name, key, MISSING))
            elif a[key] != b[key]:
                out.append((name, key, DIFFERS))
    return out


_keys = st.binary(min_size=0, max_size=3)
_values = st.binary(min_size=0, max_size=2)
_db = st.dictionaries(_keys, _values, max_size=8)
_content = st.dictionaries(st.sampled_from(NAMES), _db, max_size=len(NAMES))


@given(live=_content, fresh=_content)
def test_differences_match_a_naive_comparison(live, fresh) -> None:
    got = differences(_Tables(live), None, _Tables(fresh), None)
    assert got == _naive(live, fresh)


@given(content=_content)
def test_identical_projections_have_no_differences(content) -> None:
    assert differences(_Tables(content), None, _Tables(dict(content)), None) == []


def test_each_reason_once() -> None:
    name = NAMES[0]
    live = {name: {b"a": b"1", b"b": b"2", b"d": b"4"}}
    fresh = {name: {b"b": b"2", b"c": b"3", b"d": b"5"}}
    assert differences(_Tables(live), None, _Tables(fresh), None) == [
        (name, b"a", EXTRA),
        (name, b"c", MISSING),
        (name, b"d", DIFFERS),
    ]
