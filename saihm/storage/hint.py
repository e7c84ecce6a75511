"""The ``--store`` of a printed "run this command" hint, for an operator whose store is in
PostgreSQL (docs/scaling.md "Running the commands on a PostgreSQL store").

A hint such as ``run `saihm rebuild --data DIR --replace``` is wrong as written when the log and
the private state live in PostgreSQL: without ``--store`` the command refuses the data directory
(saihm/storage/url.py, ``refuse_migrated``). Where the code knows the store is PostgreSQL, the hint
gets ``--store "$SAIHM_STORE"``: the variable every command reads, never the URL, which may hold
a password (DESIGN.md "Pinned additions for the second round": ``--store``, ``SAIHM_STORE``).
"""

from __future__ import annotations

import re

from saihm.storage import is_url

__all__ = ["STORE_ARG", "with_store"]

#: What a hint adds after ``--data DIR``: the variable, never the URL (it may hold a password).
STORE_ARG = '--store "$SAIHM_STORE"'

# A backquoted saihm command with a --data argument and no --store of its own.
_COMMAND = re.compile(r"`saihm [^`]*`")
_DATA = re.compile(r"(--data \S+?)(?=[\s`])")


def _add(match: re.Match[str]) -> str:
    command = match.group(0)
    if "--store" in command:
        return command
    return _DATA.sub(lambda m: f"{m.group(1)} {STORE_ARG}", command, count=1)


def with_store(text: str, store: str | None) -> str:
    """``text`` with ``--store "$SAIHM_STORE"`` after the ``--data DIR`` of every backquoted
    ``saihm`` command in it that names no ``--store``, when ``store`` (the operator's
    ``--store`` URL) is a ``postgresql://`` URL; ``text`` unchanged for an LMDB store
    (``store`` None, or not such a URL). The URL itself never appears in the result."""
    if store is None or not is_url(store):
        return text
    return _COMMAND.sub(_add, text)
