"""The error-root check shared by the packages that promise it (issue 12, "One error root").

A public function of the core, called with valid arguments of which any may be replaced by a
hostile value, may raise only a ``SaihmError``: never ``ValueError``, pydantic's
``ValidationError``, ``TypeError``, ``KeyError``, ``IndexError``, a cbor2 error,
``struct.error`` or ``binascii.Error``. :func:`hostile_values` is the strategy of hostile
values, :func:`with_hostile_arguments` replaces a drawn non-empty set of the arguments, and
:func:`call_allowing_saihm_errors` is the call whose only permitted exception is the root.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

from saihm.errors import SaihmError

__all__ = ["call_allowing_saihm_errors", "hostile_values", "with_hostile_arguments"]


def hostile_values(*specials: object) -> st.SearchStrategy[Any]:
    """Wrong types, huge and negative integers, NaN, junk bytes and text, containers, None,
    and the package's own ``specials`` (lengths and values near its limits)."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True),
        st.text(max_size=24),
        st.binary(max_size=48),
        st.builds(bytearray, st.binary(max_size=8)),
        st.lists(st.one_of(st.integers(), st.binary(max_size=33), st.text(max_size=4)), max_size=4),
        st.dictionaries(st.integers(0, 9), st.integers(), max_size=3),
        st.tuples(st.integers()),
        st.sampled_from(list(specials)),
    )


def with_hostile_arguments(
    data: st.DataObject,
    hostile: st.SearchStrategy[Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """Copies of ``args`` and ``kwargs`` in which a drawn non-empty set of them (positions and
    keywords) is replaced by values drawn from ``hostile``."""
    args, kwargs = list(args), dict(kwargs or {})
    slots: list[int | str] = [*range(len(args)), *kwargs]
    which = data.draw(st.sets(st.sampled_from(slots), min_size=1), label="replaced")
    for slot in which:
        value = data.draw(hostile, label=f"arg {slot}")
        if isinstance(slot, int):
            args[slot] = value
        else:
            kwargs[slot] = value
    return args, kwargs


def call_allowing_saihm_errors(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any] | None = None
) -> None:
    """Call ``fn``; a ``SaihmError`` is an allowed answer, any other exception fails the test."""
    with contextlib.suppress(SaihmError):
        fn(*args, **(kwargs or {}))
