"""LangGraph long-term memory over a SAIHM operator (``pip install 'saihm[langgraph]'``).

:class:`SaihmStore` is a ``langgraph.store.base.BaseStore``: ``batch``/``abatch`` run
LangGraph's four operations against the operator through :mod:`saihm.client`, so it holds an
endpoint and an ``Authorization`` value (a secret, hidden from ``repr``), never a key.

- A namespace tuple is the SAIHM namespace ``"lg:" + ".".join(labels)`` (at most 253
  characters of joined labels; labels LangGraph allows: non-empty, no "." or NUL); an item is
  one memory cell in it (:mod:`saihm.integrations._storedoc` has the document).
- An item's cell holds the value's text as its content (what recall ranks and the person's
  page and MCP show: ``{"text": "likes pizza"}`` is "likes pizza"; a value of several fields
  is one ``field: value`` line each) and the key, the value itself and the times as its
  ``metadata`` (kept beside the text, never ranked), so ``get`` returns the value exactly.
- ``PutOp`` of a new key is ``saihm_remember``. ``PutOp`` of an existing key supersedes it:
  one ``saihm_remember`` with ``supersedes`` = the current cell, which the operator forgets in
  the same change (a REMEMBER and a FORGET receipt, or neither: a refused write, e.g. a value
  over the operator's request bound, leaves the old value in place); recall then names the
  replaced cell (``RecalledCell.supersedes``). ``created_at`` is kept, ``updated_at`` moves
  forward. Older cells of the key that racing writers left are forgotten after it. ``PutOp``
  with ``value=None`` is ``saihm_forget``.
- ``GetOp`` returns the current ``Item`` or None; ``SearchOp`` the items under a namespace
  prefix that meet ``filter`` (LangGraph's operators ``$eq $ne $gt $gte $lt $lte``), most
  recently updated first, or, with ``query``, in the operator's recall ranking (the score in
  ``SearchItem.score``; only items the query matches); then ``offset``/``limit``.
  ``ListNamespacesOp`` lists the namespaces holding items, with prefix/suffix conditions
  (``"*"`` matches one label), ``max_depth``, ``limit`` and ``offset``, sorted.
- In one batch every read sees the store as it was before the batch; then the puts run in
  order, the last one per (namespace, key) winning. A batch is not one transaction: each put
  is its own logged operation, and an error stops the batch after the puts before it.
- What the store sees is what the token sees: a session token, one session; a grant from
  ``saihm grant --sessions all`` (docs/integrations.md, "Continuity"), every session of the
  holder, and with ``--namespaces`` only those (``lg:...``) namespaces. Cells shared by
  another holder are never read as items.
- ``index`` and ``ttl`` are not supported (``supports_ttl`` is False); every item is in the
  operator's ranking by its text (the value's text; not the key or the field names of a
  one-field value).

Errors from the operator are :class:`saihm.client.ClientError` (never carrying the
credential); a namespace LangGraph forbids is ``InvalidNamespaceError``, a bad value or filter
``TypeError``/``ValueError``, each raised before anything is sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from saihm.integrations import require

require("langgraph.store.base", "langgraph")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from pydantic import SecretStr  # noqa: E402

from saihm.client import AsyncClient, Client, ClientError, RecalledCell  # noqa: E402
from saihm.integrations import _storedoc as doc  # noqa: E402
from saihm.integrations.identity import resolve_auth  # noqa: E402

__all__ = ["SaihmStore"]

_MAX_NAMES = 64  # the operator's bound on recall's ``namespaces`` (docs/retrieval.md)
_Key = tuple[tuple[str, ...], str]


@dataclass(frozen=True, slots=True)
class _Recall:
    """One saihm_recall the batch needs: all memory, some namespaces, or a ranked query."""

    query: str | None = None
    namespaces: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class _Write:
    """One put of the batch, after deduplication: the new content (None: delete)."""

    key: _Key
    encoded: str
    value: dict[str, Any] | None


@dataclass
class _Plan:
    """What a batch reads (recalls) and writes, checked before anything is sent."""

    ops: list[Op]
    snapshot: _Recall | None
    ranked: dict[str, _Recall] = field(default_factory=dict)
    writes: list[_Write] = field(default_factory=list)


def _encode(namespace: tuple[str, ...]) -> str:
    try:
        return doc.encode_namespace(namespace)
    except doc.InvalidLabel as err:
        raise InvalidNamespaceError(f"{err}: {namespace!r}") from err


def _labels(namespace: tuple[str, ...]) -> tuple[str, ...]:
    try:
        return doc.check_labels(namespace)
    except doc.InvalidLabel as err:
        raise InvalidNamespaceError(f"{err}: {namespace!r}") from err


def _plan(ops: Iterable[Op]) -> _Plan:
    """Check every op and decide the recalls; raises before any call (module docstring)."""
    ops = list(ops)
    exact: set[str] = set()
    whole = False
    ranked: dict[str, _Recall] = {}
    puts: dict[_Key, _Write] = {}
    for op in ops:
        if isinstance(op, GetOp):
            if op.namespace:
                exact.add(_encode(op.namespace))
        elif isinstance(op, PutOp):
            if op.ttl is not None:
                raise NotImplementedError("SaihmStore does not support ttl")
            encoded = _encode(op.namespace)
            value = None if op.value is None else dict(op.value)
            if value is not None:
                doc.item_metadata(op.key, value, 0, 0)  # JSON-checks the value now
            key = (tuple(op.namespace), op.key)
            puts.pop(key, None)  # the last put of a key wins, in its own place
            puts[key] = _Write(key, encoded, value)
            exact.add(encoded)
        elif isinstance(op, SearchOp):
            _labels(op.namespace_prefix)
            doc.check_filter(op.filter)
            if op.limit < 0 or op.offset < 0:
                raise ValueError("limit and offset must not be negative")
            if op.query and op.query.split():
                ranked[op.query] = _Recall(query=op.query)
            else:
                whole = True
        elif isinstance(op, ListNamespacesOp):
            for condition in op.match_conditions or ():
                _labels(tuple(p for p in condition.path if p != "*"))
                if condition.match_type not in ("prefix", "suffix"):
                    raise ValueError(f"unsupported match type {condition.match_type!r}")
            if op.max_depth is not None and op.max_depth < 1:
                raise ValueError("max_depth must be positive")
            whole = True
        else:
            raise ValueError(f"unknown store operation {type(op).__name__}")
    snapshot = None
    if whole:
        snapshot = _Recall()
    elif exact:
        snapshot = _Recall(namespaces=tuple(sorted(exact)))
    return _Plan(ops, snapshot, ranked, list(puts.values()))


def _recall_calls(recall: _Recall) -> list[dict[str, Any]]:
    """Keyword arguments of the client calls one :class:`_Recall` takes (chunks of 64)."""
    if recall.namespaces is None:
        return [{"query": recall.query, "kinds": ["memory"]}]
    names = list(recall.namespaces)
    return [
        {"namespaces": names[i : i + _MAX_NAMES], "kinds": ["memory"]}
        for i in range(0, len(names), _MAX_NAMES)
    ]


def _items(cells: Iterable[RecalledCell]) -> list[tuple[doc.StoredItem, float | None]]:
    found = []
    for cell in cells:
        item = doc.parse_item(
            cell.cell_id,
            cell.namespace,
            cell.kind,
            cell.shared_by_other_holder,
            cell.plaintext,
            cell.metadata,
        )
        if item is not None:
            found.append((item, None if cell.score is None else float(cell.score)))
    return found


def _item(stored: doc.StoredItem) -> Item:
    return Item(
        value=stored.value,
        key=stored.key,
        namespace=stored.namespace,
        created_at=doc.to_datetime(stored.created_at),
        updated_at=doc.to_datetime(stored.updated_at),
    )


def _search_item(stored: doc.StoredItem, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=stored.namespace,
        key=stored.key,
        value=stored.value,
        created_at=doc.to_datetime(stored.created_at),
        updated_at=doc.to_datetime(stored.updated_at),
        score=score,
    )


def _under(namespace: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    return namespace[: len(prefix)] == tuple(prefix)


class _State:
    """The store as the batch's recalls saw it, answering the batch's reads."""

    def __init__(self, snapshot: list[RecalledCell], ranked: dict[str, list[RecalledCell]]):
        self.groups = doc.current(item for item, _ in _items(snapshot))
        self.ranked = {query: _items(cells) for query, cells in ranked.items()}

    def live(self) -> list[doc.StoredItem]:
        return [cells[0] for cells in self.groups.values()]

    def cells_of(self, key: _Key) -> list[doc.StoredItem]:
        return self.groups.get(key, [])

    def answer(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            cells = self.cells_of((tuple(op.namespace), op.key))
            return _item(cells[0]) if cells else None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        return None

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        found: list[tuple[doc.StoredItem, float | None]]
        if op.query and op.query.split():
            # The operator's ranking, kept; only each key's current cell counts.
            stale = {c.cell_id for cells in self.groups.values() for c in cells[1:]}
            found = _dedupe([f for f in self.ranked[op.query] if f[0].cell_id not in stale])
        else:
            ordered = sorted(
                self.live(), key=lambda s: (-s.updated_at, s.namespace, s.key, s.cell_id)
            )
            found = [(s, None) for s in ordered]
        kept = [
            (s, score)
            for s, score in found
            if _under(s.namespace, prefix) and doc.matches_filter(s.value, op.filter)
        ]
        return [_search_item(s, score) for s, score in kept[op.offset : op.offset + op.limit]]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        names = {s.namespace for s in self.live()}
        for condition in op.match_conditions or ():
            names = {n for n in names if doc.matches_path(condition.match_type, condition.path, n)}
        if op.max_depth is not None:
            names = {n[: op.max_depth] for n in names}
        return sorted(names)[op.offset : op.offset + op.limit]


def _dedupe(
    found: list[tuple[doc.StoredItem, float | None]],
) -> list[tuple[doc.StoredItem, float | None]]:
    """Keep each key's current cell only (two racing writers may leave two)."""
    best: dict[_Key, doc.StoredItem] = {}
    for item, _ in found:
        key = (item.namespace, item.key)
        if key not in best or item.order > best[key].order:
            best[key] = item
    keep = {item.cell_id for item in best.values()}
    return [(item, score) for item, score in found if item.cell_id in keep]


def _content(write: _Write, old: list[doc.StoredItem]) -> tuple[str, dict[str, Any]]:
    """The new cell's text and metadata: ``created_at`` kept from the current cell,
    ``updated_at`` now, and always later than the current cell's (so an update is visible as
    one)."""
    assert write.value is not None
    now = doc.now_micros()
    created = old[0].created_at if old else now
    updated = max(now, old[0].updated_at + 1) if old else now
    metadata = doc.item_metadata(write.key[1], write.value, min(created, updated), updated)
    return doc.value_text(write.key[1], write.value), metadata


def _remember_args(write: _Write, old: list[doc.StoredItem]) -> tuple[str, dict[str, Any]]:
    text, metadata = _content(write, old)
    kwargs: dict[str, Any] = {"namespace": write.encoded, "metadata": metadata}
    if old:
        kwargs["supersedes"] = old[0].cell_id
    return text, kwargs


def _replaced_meanwhile(err: ClientError) -> bool:
    """Another writer erased the cell this put supersedes after the batch read it."""
    return err.code == "erased"


class SaihmStore(BaseStore):
    """A LangGraph ``BaseStore`` kept in a SAIHM operator (see the module).

    ``SaihmStore(endpoint, auth_header, *, ca_file=None, tls_pin_sha256=None, timeout=30)``;
    ``auth_header`` is the whole ``Authorization`` value, ``"Bearer <token>"``. Use it as a
    context manager, or call :meth:`close`, to stop the sync client's thread.
    """

    supports_ttl = False

    def __init__(
        self,
        endpoint: str,
        auth_header: str | None = None,
        *,
        ca_file: str | None = None,
        tls_pin_sha256: str | None = None,
        timeout: float = 30.0,
        **identity: Any,
    ) -> None:
        """``auth_header`` (a token's ``Authorization`` value), or ``admin=`` (a
        :class:`saihm.client.Admin`) with ``session_id=`` and ``holder_id=`` or ``user_id=``:
        the session's token then comes from the authority service
        (:mod:`saihm.integrations.identity`)."""
        auth = resolve_auth(auth_header, identity)
        auth_header = auth
        self._endpoint = endpoint
        self._auth = SecretStr(auth_header)
        self._kwargs: dict[str, Any] = {
            "ca_file": ca_file,
            "tls_pin_sha256": tls_pin_sha256,
            "timeout": timeout,
        }
        # Checks the endpoint and credential now; connects only on the first call.
        self._client = Client(endpoint, auth_header, **self._kwargs)
        self._holder_id: str | None = None

    def __repr__(self) -> str:
        return f"SaihmStore({self._client.endpoint_for_display!r})"

    def close(self) -> None:
        """Close the sync client (its connections and thread); idempotent."""
        self._client.close()

    def __enter__(self) -> SaihmStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` (module docstring); results in the order of ``ops``."""
        plan = _plan(ops)
        client = self._client
        snapshot = self._read(plan.snapshot, client)
        ranked = {q: client.recall(**_recall_calls(r)[0]) for q, r in plan.ranked.items()}
        state = _State(snapshot, ranked)
        results = [state.answer(op) for op in plan.ops]
        for write in plan.writes:
            old = state.cells_of(write.key)
            if write.value is not None:
                text, kwargs = _remember_args(write, old)
                try:
                    client.remember(text, **kwargs)
                except ClientError as err:
                    if "supersedes" not in kwargs or not _replaced_meanwhile(err):
                        raise
                    client.remember(text, namespace=write.encoded, metadata=kwargs["metadata"])
                old = old[1:]
            for cell in old:
                client.forget(cell.cell_id)
        return results

    def _read(self, recall: _Recall | None, client: Client) -> list[RecalledCell]:
        if recall is None:
            return []
        return [cell for kw in _recall_calls(recall) for cell in client.recall(**kw)]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` over :class:`saihm.client.AsyncClient` (same rules as :meth:`batch`)."""
        plan = _plan(ops)
        auth = self._auth.get_secret_value()
        async with AsyncClient(self._endpoint, auth, **self._kwargs) as client:
            client.holder_id = self._holder_id or self._client.holder_id
            snapshot: list[RecalledCell] = []
            if plan.snapshot is not None:
                for kw in _recall_calls(plan.snapshot):
                    snapshot.extend(await client.recall(**kw))
            ranked = {}
            for query, recall in plan.ranked.items():
                ranked[query] = await client.recall(**_recall_calls(recall)[0])
            self._holder_id = client.holder_id
            state = _State(snapshot, ranked)
            results = [state.answer(op) for op in plan.ops]
            for write in plan.writes:
                old = state.cells_of(write.key)
                if write.value is not None:
                    text, kwargs = _remember_args(write, old)
                    try:
                        await client.remember(text, **kwargs)
                    except ClientError as err:
                        if "supersedes" not in kwargs or not _replaced_meanwhile(err):
                            raise
                        await client.remember(
                            text, namespace=write.encoded, metadata=kwargs["metadata"]
                        )
                    old = old[1:]
                for cell in old:
                    await client.forget(cell.cell_id)
        return results
