"""The protocol's JSON edge, shared by HTTP, the benchmarks and tests.

Parameter parsing (:mod:`~saihm.protocol.params`), the recall window
(:mod:`~saihm.protocol.window`), the recall element and the edge's recall rendering cache
(:mod:`~saihm.protocol.render`), one family module per operator part holding its methods'
params parsers, renderers and binding rows together (:mod:`~saihm.protocol.memory`,
:mod:`~saihm.protocol.sharing`, :mod:`~saihm.protocol.governance`, made of
:mod:`~saihm.protocol.family`'s parts), and the binding table gathered from them with
:func:`call` (:mod:`~saihm.protocol.binding`). It sits above :mod:`saihm.operator` (which
never imports it) and below the transports: :mod:`saihm.http` only reads bodies and writes
responses.
"""

from __future__ import annotations

from saihm.protocol.binding import BINDINGS, RECALL_PARAMS, Binding, call, parse_call, recall_items
from saihm.protocol.render import RecallAnswer, RecallItem, RecallItems

__all__ = [
    "BINDINGS",
    "RECALL_PARAMS",
    "Binding",
    "RecallAnswer",
    "RecallItem",
    "RecallItems",
    "call",
    "parse_call",
    "recall_items",
]
