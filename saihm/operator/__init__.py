"""The SAIHM operations and their rules over the store (saihm-protocol, custodial profile).

:class:`Operator` is the composition of four parts over one :class:`ToolContext` (the store,
the policy, the clock, holder keys and the write path):

- ``operator.memory`` (:class:`MemoryTools`): remember, remember_sealed, record, recall,
  forget, forget_session, status;
- ``operator.sharing`` (:class:`SharingTools`): share, revoke_share, respond,
  contract_in_scope;
- ``operator.governance`` (:class:`GovernanceTools`): propose, vote, governance_form;
- ``operator.admin`` (:class:`AdminTools`): the person's create_holder, grant,
  revoke_session, ungrant.

Callers name the part: ``operator.memory.remember(access, ...)``. Each operation acts for an
:class:`Access` that :meth:`Store.authenticate` (a bearer token) or :meth:`Store.person_access`
(the person, in process) issued, takes bytes ids and ints and returns a typed result; the JSON
binding that parses the protocol's params and renders these results is
:mod:`saihm.protocol` (docs/internals.md "Adding an operation"), which this package never
imports. The package exports every name of its modules' ``__all__`` (:data:`PARTS`).
"""

from __future__ import annotations

from saihm.config import Config
from saihm.operator import admin, context, governance, memory, sharing
from saihm.operator.admin import *  # noqa: F403 (the part's __all__; see PARTS)
from saihm.operator.admin import AdminTools
from saihm.operator.context import *  # noqa: F403
from saihm.operator.context import ToolContext
from saihm.operator.governance import *  # noqa: F403
from saihm.operator.governance import GovernanceTools
from saihm.operator.memory import *  # noqa: F403
from saihm.operator.memory import MemoryTools
from saihm.operator.sharing import *  # noqa: F403
from saihm.operator.sharing import SharingTools
from saihm.store import Store

#: The modules of the operator: the context and the four parts. The package exports each
#: one's ``__all__`` (its part class, its result types, its constants), so a result type
#: defined beside its operation and named in that module's ``__all__`` needs no edit here.
PARTS = (context, memory, sharing, governance, admin)

__all__ = ["PARTS", "Operator"]
__all__ += context.__all__
__all__ += memory.__all__
__all__ += sharing.__all__
__all__ += governance.__all__
__all__ += admin.__all__


class Operator:
    """The operations of one store: the protocol's eight tools, the extension methods of
    DESIGN.md and the person's admin actions, as four parts sharing one context.

    Every operation of ``memory``, ``sharing`` and ``governance`` takes an :class:`Access`
    from :meth:`Store.authenticate`; in-process callers (the Memory Provider, agent code) call
    them directly, the HTTP binding after parsing. No part inherits from another or reads
    another's private state; ``memory`` is given ``sharing`` and ``governance`` because
    saihm_status reports on contracts and proposals.
    """

    def __init__(self, store: Store, config: Config | None = None) -> None:
        self.context = ToolContext.over(store, config)
        self.sharing = SharingTools(self.context)
        self.governance = GovernanceTools(self.context)
        self.memory = MemoryTools(self.context, self.sharing, self.governance)
        self.admin = AdminTools(self.context)

    @property
    def store(self) -> Store:
        """The store every part reads and commits through."""
        return self.context.store

    @property
    def config(self) -> Config:
        """The operator's policy (the store's own unless given)."""
        return self.context.config
