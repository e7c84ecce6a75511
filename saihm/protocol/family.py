"""What a protocol family module is made of: the :class:`Binding` row and the small parsers and
adapters the families share.

A family module (:mod:`~saihm.protocol.memory`, :mod:`~saihm.protocol.sharing`,
:mod:`~saihm.protocol.governance`) holds, for each binding method of one operator part, its
params parser, its renderer and its :class:`Binding` row, and lists the rows in ``ROWS``;
:mod:`saihm.protocol.binding` gathers the families' rows into ``BINDINGS`` (docs/internals.md
"Adding an operation").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from saihm.errors import ErrorCode, MalformedInput, TooLarge
from saihm.events.models import METADATA_MAX_BYTES, dump_metadata
from saihm.events.operations import Method
from saihm.protocol import params as P

if TYPE_CHECKING:
    from saihm.config import Config
    from saihm.operator import Operator
    from saihm.protocol.render import RecallItems
    from saihm.store import Access

__all__ = ["Binding", "id_param", "metadata_param", "no_params", "plain"]

A = TypeVar("A")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Binding(Generic[A, R]):
    """One method of the binding: ``parse`` checks the params object (every member known,
    each of its type; raising :class:`MalformedInput` with the protocol's code) into the
    operation's arguments, ``invoke`` runs the operation with an :class:`Access`, ``render``
    turns its typed result into the protocol's JSON value, given the operator's recall
    rendering cache (:class:`RecallItems`)."""

    method: Method
    parse: Callable[[dict[str, Any], Config], A]
    invoke: Callable[[Operator, Access, A], R]
    render: Callable[[R, RecallItems], object]


def plain(render: Callable[[R], object]) -> Callable[[R, RecallItems], object]:
    """A renderer that needs no cache."""
    return lambda result, _items: render(result)


def id_param(name: str, code: str = ErrorCode.BAD_REQUEST) -> Callable[..., bytes]:
    """The parser of a params object holding one 32-byte hex id, ``name`` (refused with
    ``code``)."""

    def parse(params: dict[str, Any], config: Config) -> bytes:
        p = P.check_params(params, {name}, {name})
        return P.id32(p.get(name), code=code, what=name)

    return parse


def no_params(params: dict[str, Any], config: Config) -> None:
    """The parser of an empty params object."""
    P.check_params(params, set())


def metadata_param(p: Mapping[str, Any]) -> str | None:
    """The extension param ``metadata``: a JSON object kept beside the content (absent or
    null: none), as its one compact text form; over 1 MiB is 413 ``too_large``."""
    value = p.get("metadata")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedInput("metadata must be a JSON object")
    try:
        text = dump_metadata(value)
        size = len(text.encode("utf-8"))
    except (ValueError, RecursionError) as err:  # a lone surrogate, NaN or too deep
        raise MalformedInput("metadata is not valid JSON text") from err
    if size > METADATA_MAX_BYTES:
        raise TooLarge(f"metadata is over {METADATA_MAX_BYTES} bytes")
    return text
