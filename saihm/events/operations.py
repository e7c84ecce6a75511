"""The operation registry's data: every receipt operation and every binding method, as tables.

This is the pure part of the one operation registry (docs/internals.md "Adding an operation"):
what the public log, the projections, replay and the MCP surface check need to know about an
operation, with no code that performs it. The binding part (params, the operation callable, the
renderer) is :data:`saihm.protocol.BINDINGS`, one row per :data:`METHODS` entry; a test
fails when the two tables disagree. Importable by ``saihm.audit`` (it imports nothing above
``saihm.events``).

- :class:`Operation`: the receipt operations, saihm-protocol "Wire formats" (operation) and
  saihm's extensions (KEY, ACCEPT, DECLINE, GRANT, UNGRANT; docs/formats.md).
- :data:`OPERATIONS`: per receipt operation, its effects: its key prefix in the
  ``by_operation`` index (:func:`saihm.projections.apply`), whether ``/log/v1/receipts?operation=``
  accepts its name, whether ``saihm replay`` writes it to ``events.jsonl``, whether it carries a
  private body, which projections apply it, and what it does to its subject (:class:`Effect`,
  which the cell cache and the fsck read). :data:`BY_NAME` is the same table keyed by the
  name a stored leaf carries.
- :data:`METHODS`: per binding method (``POST /`` ``method``), the receipt operation it logs,
  whether it is one of the protocol's eight MCP tools (saihm-protocol "Tool surface (MCP
  binding)") and whether it is a governance tool (refused when governance is off).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from types import MappingProxyType

__all__ = [
    "BY_NAME",
    "METHODS",
    "OPERATIONS",
    "PROTOCOL_TOOLS",
    "Effect",
    "Method",
    "Operation",
    "OperationSpec",
    "public_log_names",
    "replay_events",
]


class Operation(StrEnum):
    """Receipt operations: the protocol's nine and saihm's extension operations."""

    KEY = "KEY"
    REMEMBER = "REMEMBER"
    RECALL = "RECALL"
    STATUS = "STATUS"
    FORGET = "FORGET"
    SHARE = "SHARE"
    REVOKE = "REVOKE"
    PROPOSE = "PROPOSE"
    VOTE = "VOTE"
    ACCEPT = "ACCEPT"
    DECLINE = "DECLINE"
    GRANT = "GRANT"
    UNGRANT = "UNGRANT"


class Effect(Enum):
    """What a leaf of an operation does to the thing its subjectId names.

    The cell cache (``saihm.store.read.cache``) and the fsck (``saihm.offline.fsck``) act on the
    effect, never on the operation's name: a new operation with an existing effect needs no
    edit there.
    """

    #: A read (RECALL, STATUS): the leaf is its only trace.
    NONE = "none"
    #: Files the holder's public key (the leaf's detail).
    KEYS_HOLDER = "keys holder"
    #: Writes the cell: the holder's cached candidates gain it.
    WRITES_CELL = "writes cell"
    #: Erases the cell: the cache drops it everywhere.
    ERASES_CELL = "erases cell"
    #: Files a contract: the cache drops the cells it covers.
    OPENS_CONTRACT = "opens contract"
    #: Changes a contract (revoked, accepted, declined): the cache drops the cells it covers.
    UPDATES_CONTRACT = "updates contract"
    #: Files a governance proposal.
    OPENS_PROPOSAL = "opens proposal"
    #: Counts a vote on a proposal.
    UPDATES_PROPOSAL = "updates proposal"
    #: Grants a session to the holder.
    GRANTS_SESSION = "grants session"
    #: Ends a grant: the cache drops the holder's index.
    ENDS_GRANT = "ends grant"


@dataclass(frozen=True, slots=True)
class OperationSpec:
    """What the log, the projections, the store and replay know about one receipt operation.

    ``projection_key`` prefixes the operation's entries in the ``by_operation`` index (the
    name and a NUL, so no name is a prefix of another's keys); ``public_log`` says whether
    ``GET /log/v1/receipts?operation=NAME`` accepts it; ``replay_event`` whether
    ``saihm replay`` writes its receipts to ``events.jsonl`` as well as ``receipts.jsonl``;
    ``body`` whether the store keeps a private body under its subjectId (a rebuild reads it);
    ``projections`` the projections (``saihm.projections.REGISTRY`` names) whose handler for
    it runs, besides the receipt indexes every leaf enters; ``effect`` what it does to its
    subject (:class:`Effect`).
    """

    operation: Operation
    effect: Effect = Effect.NONE
    projections: tuple[str, ...] = ()
    body: bool = False
    public_log: bool = True
    replay_event: bool = False

    @property
    def projection_key(self) -> bytes:
        """The ``by_operation`` key prefix: the ASCII name and a NUL byte."""
        return self.operation.value.encode("ascii") + b"\x00"


@dataclass(frozen=True, slots=True)
class Method:
    """One method of the binding (``POST /``): its name, the receipt it logs, its kind."""

    name: str
    operation: Operation
    protocol_tool: bool = False
    governance: bool = False


def _table(*specs: OperationSpec) -> Mapping[Operation, OperationSpec]:
    table = {s.operation: s for s in specs}
    if set(table) != set(Operation) or len(table) != len(specs):
        raise AssertionError("OPERATIONS must name every Operation once")
    return MappingProxyType(table)


OPERATIONS: Mapping[Operation, OperationSpec] = _table(
    OperationSpec(Operation.KEY, Effect.KEYS_HOLDER, ("holders",)),
    OperationSpec(Operation.REMEMBER, Effect.WRITES_CELL, ("cells",), body=True),
    OperationSpec(Operation.RECALL),
    OperationSpec(Operation.STATUS),
    OperationSpec(Operation.FORGET, Effect.ERASES_CELL, ("cells",)),
    OperationSpec(
        Operation.SHARE, Effect.OPENS_CONTRACT, ("contracts",), body=True, replay_event=True
    ),
    OperationSpec(Operation.REVOKE, Effect.UPDATES_CONTRACT, ("contracts",), replay_event=True),
    OperationSpec(Operation.PROPOSE, Effect.OPENS_PROPOSAL, ("governance",)),
    OperationSpec(Operation.VOTE, Effect.UPDATES_PROPOSAL, ("governance",)),
    OperationSpec(Operation.ACCEPT, Effect.UPDATES_CONTRACT, ("contracts",), replay_event=True),
    OperationSpec(Operation.DECLINE, Effect.UPDATES_CONTRACT, ("contracts",), replay_event=True),
    OperationSpec(Operation.GRANT, Effect.GRANTS_SESSION, ("grants",), replay_event=True),
    OperationSpec(Operation.UNGRANT, Effect.ENDS_GRANT, ("grants",), replay_event=True),
)

#: :data:`OPERATIONS` keyed by the name a stored leaf carries (an unknown name is absent).
BY_NAME: Mapping[str, OperationSpec] = MappingProxyType(
    {op.value: spec for op, spec in OPERATIONS.items()}
)

METHODS: Mapping[str, Method] = MappingProxyType(
    {
        m.name: m
        for m in (
            Method("saihm_remember", Operation.REMEMBER, protocol_tool=True),
            Method("saihm_recall", Operation.RECALL, protocol_tool=True),
            Method("saihm_forget", Operation.FORGET, protocol_tool=True),
            Method("saihm_status", Operation.STATUS, protocol_tool=True),
            Method("saihm_share", Operation.SHARE, protocol_tool=True),
            Method("saihm_revoke_share", Operation.REVOKE, protocol_tool=True),
            Method(
                "saihm_governance_propose", Operation.PROPOSE, protocol_tool=True, governance=True
            ),
            Method("saihm_governance_vote", Operation.VOTE, protocol_tool=True, governance=True),
            Method("saihm_accept_contract", Operation.ACCEPT),
            Method("saihm_decline_contract", Operation.DECLINE),
            Method("saihm_record", Operation.REMEMBER),
            Method("saihm_forget_session", Operation.FORGET),
        )
    }
)

#: The protocol's eight tools, in the protocol's order (the MCP surface).
PROTOCOL_TOOLS: tuple[str, ...] = tuple(m.name for m in METHODS.values() if m.protocol_tool)


def public_log_names() -> frozenset[str]:
    """The operation names ``/log/v1/receipts?operation=`` accepts."""
    return frozenset(s.operation.value for s in OPERATIONS.values() if s.public_log)


def replay_events() -> frozenset[Operation]:
    """The operations ``saihm replay`` also writes to ``events.jsonl``."""
    return frozenset(s.operation for s in OPERATIONS.values() if s.replay_event)
