"""The public, unauthenticated, read-only log API (DESIGN.md "HTTP", paths and shapes pinned).

Every query parameter is checked before the store is asked: a parameter that is not a
canonical non-negative decimal integer (or a 64-hex id, or an operation name), an unknown
parameter, or an impossible range (``start >= end``, ``index >= size``, ``first > second``)
answers 400 ``{"error": "bad_request"}``; a range or size the tree does not have yet answers
404 ``{"error": "not_found"}``.

Cache headers let a CDN serve what cannot change: full tiles, full entry bundles, entries below
the latest checkpoint, receipts by id and proofs for a fixed size are ``immutable``; the
checkpoint, partial tiles and lists that grow live for one second.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import cbor2
from aiohttp import web

from saihm.errors import MalformedInput, NotFound
from saihm.events.operations import public_log_names
from saihm.http.common import OPERATOR, json_response, run_sync
from saihm.http.forms import b64, receipt_entry, verifier_key_json

__all__ = [
    "IMMUTABLE",
    "MAX_ENTRIES",
    "SHORT",
    "SUBMITTER",
    "Submitter",
    "accepts_gzip",
    "add_log_routes",
]


class Submitter(Protocol):
    """What the log API runs beside the server when the operator has witnesses.

    The composition hands the concrete one in (``saihm serve`` builds
    :class:`saihm.witness.submit.Submitter` with :func:`saihm.witness.submit.for_config`), so
    the HTTP package imports nothing of the witness, whose server borrows its listen helpers.
    """

    async def run(self) -> None: ...

    def stop(self) -> None: ...

    def snapshot(self) -> dict[str, dict[str, Any]]: ...


#: The running witness submitter, when one was handed in (its ``snapshot()`` is the
#: per-witness health: last success, last error, cosigned size).
SUBMITTER: web.AppKey[Submitter] = web.AppKey("saihm.witness_submitter")

IMMUTABLE = "public, max-age=31536000, immutable"
SHORT = "public, max-age=1"
KEYS = "public, max-age=300"
#: Most entries one ``/log/v1/entries`` call returns.
MAX_ENTRIES = 1000
#: Most receipts one ``/log/v1/receipts`` page returns.
MAX_PAGE = 1000
DEFAULT_PAGE = 100

_UINT = re.compile(r"0|[1-9][0-9]{0,19}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
#: The operation names ``?operation=`` accepts (the operation registry, saihm.events.operations).
_OPERATIONS = public_log_names()


def _only(request: web.Request, allowed: set[str]) -> None:
    names = [name for name, _ in request.query.items()]
    if len(names) != len(set(names)) or set(names) - allowed:
        raise MalformedInput("unknown or repeated query parameter")


def _uint(request: web.Request, name: str, default: int | None = None) -> int:
    """A canonical decimal integer 0..2^63-1 (no sign, no leading zero, no spaces)."""
    raw = request.query.get(name)
    if raw is None:
        if default is None:
            raise MalformedInput(f"missing query parameter {name}")
        return default
    if not _UINT.fullmatch(raw) or int(raw) >= 1 << 63:
        raise MalformedInput(f"{name} must be a non-negative decimal integer")
    return int(raw)


def _store(request: web.Request) -> Any:
    """The operator's store (its type is not imported at runtime)."""
    return request.app[OPERATOR].store


def checkpoint_size(note: bytes) -> int:
    """The tree size on the second line of a C2SP tlog-checkpoint note."""
    lines = note.split(b"\n", 2)
    if len(lines) < 3 or not _UINT.fullmatch(lines[1].decode("ascii", "replace")):
        raise MalformedInput("stored checkpoint has no size line")
    return int(lines[1])


async def get_checkpoint(request: web.Request) -> web.Response:
    """``GET /log/checkpoint``: the signed note for the current tree size (text/plain), with
    every witness cosignature collected for it so far appended as note signature lines
    (c2sp.org/tlog-cosignature; docs/formats.md §2).

    A checkpoint is signed on demand when the log grew since the last one, so a reader never
    waits a checkpoint interval to prove a receipt it has just been given; that is at most
    one signature per write batch. Such a fresh checkpoint carries no cosignature until the
    witnesses answer; ``?witnessed=1`` asks instead for the newest checkpoint that carries at
    least one (404 ``not_found`` if there is none).
    """
    # Other query parameters are ignored here, as they always were on this path (tlog clients
    # and caches may add their own); only ``witnessed`` means something.
    store = _store(request)
    if "witnessed" in request.query:
        if request.query.getall("witnessed") != ["1"]:
            raise MalformedInput("witnessed must be given once, as 1")
        note = await run_sync(request, store.latest_witnessed_checkpoint)
        if note is None:
            raise NotFound("no witnessed checkpoint yet")
    else:
        note = await run_sync(request, store.checkpoint_now)
    return web.Response(
        body=note, content_type="text/plain", charset="utf-8", headers={"Cache-Control": SHORT}
    )


async def get_tile(request: web.Request) -> web.Response:
    """``GET /log/tile/<L>/<N>[.p/<W>]`` and ``GET /log/tile/entries/<N>[.p/<W>]`` (C2SP
    tlog-tiles), byte-exact, ``application/octet-stream``."""
    from saihm.translog.tiles import parse_tile_path

    _only(request, set())
    tile = parse_tile_path("tile/" + request.match_info["path"])
    width = tile.width  # None for a full tile, 1..255 for a partial one
    store = _store(request)
    headers = {"Cache-Control": IMMUTABLE if width is None else SHORT}
    if tile.level is None:
        data = await run_sync(request, store.entry_bundle, tile.index, width)
        # tlog-tiles: "Entry bundles SHOULD be compressed at the HTTP layer". gzip with a fixed
        # mtime, so a bundle always compresses to the same bytes a cache can keep.
        headers["Vary"] = "Accept-Encoding"
        if accepts_gzip(request.headers.get("Accept-Encoding", "")):
            data = await run_sync(request, _gzip, data)
            headers["Content-Encoding"] = "gzip"
    else:
        data = await run_sync(request, store.tile, tile.level, tile.index, width)
    return web.Response(body=data, content_type="application/octet-stream", headers=headers)


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)


def accepts_gzip(header: str) -> bool:
    """Whether an ``Accept-Encoding`` value accepts gzip (RFC 9110 §12.5.3: q=0 refuses it)."""
    for item in header.lower().split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip() in ("gzip", "x-gzip", "*"):
            q = params.strip()
            if not q.startswith("q="):
                return True
            try:
                return float(q[2:]) > 0
            except ValueError:
                return False
    return False


async def get_entries(request: web.Request) -> web.Response:
    """``GET /log/v1/entries?start=S&end=E``: ``{"entries": [{"index", "leaf": base64}]}``,
    end exclusive, at most 1000 entries."""
    _only(request, {"start", "end"})
    start, end = _uint(request, "start"), _uint(request, "end")
    if not start < end:
        raise MalformedInput("need start < end")
    if end - start > MAX_ENTRIES:
        raise MalformedInput(f"at most {MAX_ENTRIES} entries per call")
    store = _store(request)
    size = await run_sync(request, store.size)
    if end > size:
        raise NotFound("the tree does not have these entries yet")
    leaves = await run_sync(request, store.leaves, start, end)
    note = await run_sync(request, store.latest_checkpoint)
    cache = IMMUTABLE if end <= checkpoint_size(note) else SHORT
    entries = [{"index": start + i, "leaf": b64(leaf)} for i, leaf in enumerate(leaves)]
    return json_response({"entries": entries}, cache=cache)


async def get_inclusion(request: web.Request) -> web.Response:
    """``GET /log/v1/proof/inclusion?index=I&size=N``: ``{"index", "size", "proof": [hex]}``
    (RFC 9162 §2.1.3.1)."""
    _only(request, {"index", "size"})
    index, size = _uint(request, "index"), _uint(request, "size")
    if not index < size:
        raise MalformedInput("need index < size")
    store = _store(request)
    if size > await run_sync(request, store.size):
        raise NotFound("the tree is not that large yet")
    proof = await run_sync(request, store.inclusion_proof, index, size)
    body = {"index": index, "size": size, "proof": [h.hex() for h in proof]}
    return json_response(body, cache=IMMUTABLE)


async def get_consistency(request: web.Request) -> web.Response:
    """``GET /log/v1/proof/consistency?first=M&second=N``: ``{"first", "second",
    "proof": [hex]}`` (RFC 9162 §2.1.4.1; needs ``0 < first <= second``)."""
    _only(request, {"first", "second"})
    first, second = _uint(request, "first"), _uint(request, "second")
    if not 0 < first <= second:
        raise MalformedInput("need 0 < first <= second")
    store = _store(request)
    if second > await run_sync(request, store.size):
        raise NotFound("the tree is not that large yet")
    proof = await run_sync(request, store.consistency_proof, first, second)
    body = {"first": first, "second": second, "proof": [h.hex() for h in proof]}
    return json_response(body, cache=IMMUTABLE)


async def get_receipt(request: web.Request) -> web.Response:
    """``GET /log/v1/receipts/{receiptId}``: ``{"index", "receipt", "cbor"}`` or 404
    ``receipt_not_found``."""
    _only(request, set())
    receipt_id = request.match_info["receipt_id"]
    if not _HEX64.fullmatch(receipt_id):
        raise MalformedInput("receiptId must be 64 lowercase hexadecimal characters")
    index, leaf = await run_sync(request, _store(request).receipt, bytes.fromhex(receipt_id))
    return json_response(receipt_entry(index, leaf), cache=IMMUTABLE)


#: Most receipts one ``/log/v1/receipts`` call examines when it filters beyond its index (a
#: page may then be short, or empty, with a ``next`` cursor to go on from).
MAX_SCAN = 10_000
_LIST_PARAMS = {"subjectId", "holderId", "operation", "since", "until", "cursor", "limit"}


@dataclass(frozen=True)
class ReceiptQuery:
    """The filters of one ``/log/v1/receipts`` call, all of which a receipt must match."""

    subject_id: bytes | None = None
    holder_id: bytes | None = None
    operation: str | None = None
    since: int | None = None
    until: int | None = None

    def index(self) -> tuple[str, bytes] | None:
        """The projection index to walk: the most selective filter that has one."""
        if self.subject_id is not None:
            return "subjectId", self.subject_id
        if self.holder_id is not None:
            return "holderId", self.holder_id
        if self.operation is not None:
            return "operation", self.operation.encode("ascii")
        return None

    def matches(self, leaf: bytes) -> bool:
        """Whether the receipt stored as ``leaf`` passes every filter (receipt keys, §3)."""
        m = cbor2.loads(leaf)
        ts = m.get(6)
        return (
            (self.subject_id is None or m.get(2) == self.subject_id)
            and (self.holder_id is None or m.get(4) == self.holder_id)
            and (self.operation is None or m.get(3) == self.operation)
            and (self.since is None or (isinstance(ts, int) and ts >= self.since))
            and (self.until is None or (isinstance(ts, int) and ts < self.until))
        )


def _optional_uint(request: web.Request, name: str) -> int | None:
    return _uint(request, name) if name in request.query else None


def receipt_query(request: web.Request) -> ReceiptQuery:
    """The checked filters of a receipts list call; ``MalformedInput`` (400) for a bad one."""
    _only(request, _LIST_PARAMS)
    ids: dict[str, bytes | None] = {}
    for name in ("subjectId", "holderId"):
        raw = request.query.get(name)
        if raw is not None and not _HEX64.fullmatch(raw):
            raise MalformedInput(f"{name} must be 64 lowercase hexadecimal characters")
        ids[name] = None if raw is None else bytes.fromhex(raw)
    operation = request.query.get("operation")
    if operation is not None and operation not in _OPERATIONS:
        raise MalformedInput("unknown operation")
    since, until = _optional_uint(request, "since"), _optional_uint(request, "until")
    if since is not None and until is not None and not since < until:
        raise MalformedInput("need since < until")
    query = ReceiptQuery(ids["subjectId"], ids["holderId"], operation, since, until)
    if query == ReceiptQuery():
        raise MalformedInput("give at least one of subjectId, holderId, operation, since, until")
    return query


def find_receipts(
    store: Any, query: ReceiptQuery, cursor: int, limit: int
) -> tuple[list[tuple[int, bytes]], int | None]:
    """Up to ``limit`` receipts matching ``query`` from leaf ``cursor``, and the cursor to go
    on from (None at the end). Walks the query's index (or the leaves, for a time range
    alone), examining at most ``MAX_SCAN`` receipts."""
    by = query.index()
    filters = (query.subject_id, query.holder_id, query.operation, query.since, query.until)
    only_index = sum(f is not None for f in filters) == 1
    if by is not None and only_index:
        found: list[tuple[int, bytes]]
        found, after = store.receipts(by[0], by[1], cursor, limit)
        return found, after
    found, scanned = [], 0
    while scanned < MAX_SCAN:
        chunk = min(MAX_PAGE, MAX_SCAN - scanned)
        if by is not None:
            batch, after = store.receipts(by[0], by[1], cursor, chunk)
        else:
            size = store.size()
            end = min(size, cursor + chunk)
            batch = list(zip(range(cursor, end), store.leaves(cursor, end), strict=True))
            after = end if end < size else None
        for index, leaf in batch:
            scanned += 1
            if query.matches(leaf):
                found.append((index, leaf))
                if len(found) == limit:
                    return found, index + 1
        if after is None:
            return found, None
        cursor = after
    return found, cursor


async def list_receipts(request: web.Request) -> web.Response:
    """``GET /log/v1/receipts?[subjectId=][&holderId=][&operation=][&since=][&until=]
    [&cursor=C][&limit=L]``: ``{"receipts": [...], "next": cursor or null}``, in log order.

    Every filter given must hold (at least one is needed); ``since``/``until`` are Unix
    seconds, ``until`` exclusive. One call returns at most ``limit`` receipts and, when it
    filters beyond one index, examines at most ``MAX_SCAN``: a page may be short with a
    ``next`` to go on from; ``next`` null means the log has no more.
    """
    query = receipt_query(request)
    cursor = _uint(request, "cursor", 0)
    limit = _uint(request, "limit", DEFAULT_PAGE)
    if not 0 < limit <= MAX_PAGE:
        raise MalformedInput(f"limit must be 1..{MAX_PAGE}")
    found, after = await run_sync(request, find_receipts, _store(request), query, cursor, limit)
    body = {"receipts": [receipt_entry(i, leaf) for i, leaf in found], "next": after}
    return json_response(body, cache=SHORT)


async def get_erasures(request: web.Request) -> web.Response:
    """``GET /log/v1/erasures``: ``{"cellIds": [hex], "treeSize": N}``."""
    _only(request, set())
    cell_ids, tree_size = await run_sync(request, _store(request).erasures)
    body = {"cellIds": [c.hex() for c in cell_ids], "treeSize": tree_size}
    return json_response(body, cache=SHORT)


async def get_keys(request: web.Request) -> web.Response:
    """``GET /log/v1/keys``: the checkpoint verifier keys and the capability authority's key.

    ``{"origin", "checkpointKeys": [{"vkey", "name", "keyId", "type", "algorithm"}],
    "authority": {"algorithm": "ML-DSA-65", "encoding": "base64", "publicKey"}}``.
    """
    _only(request, set())
    operator = request.app[OPERATOR]
    store = operator.store
    body = {
        "origin": store.origin,
        "checkpointKeys": [verifier_key_json(k) for k in store.log_keys.verifier_keys()],
        "authority": {
            "algorithm": "ML-DSA-65",
            "encoding": "base64",
            "publicKey": b64(store.authority_public_key),
        },
    }
    return json_response(body, cache=KEYS)


async def _witnessing(app: web.Application) -> AsyncIterator[None]:
    """Run the witness submitter handed to :func:`add_log_routes` beside the server."""
    submitter = app[SUBMITTER]
    task = asyncio.create_task(submitter.run())
    yield
    # A request in flight to a slow witness is abandoned: shutting down never waits on one.
    submitter.stop()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def add_log_routes(app: web.Application, submitter: Submitter | None = None) -> None:
    """Register every ``/log/...`` route, and run ``submitter`` (the operator's witness
    submitter, if it has witnesses) for as long as the app runs."""
    if submitter is not None:
        app[SUBMITTER] = submitter
        app.cleanup_ctx.append(_witnessing)
    app.router.add_get("/log/checkpoint", get_checkpoint)
    app.router.add_get("/log/tile/{path:.+}", get_tile)
    app.router.add_get("/log/v1/entries", get_entries)
    app.router.add_get("/log/v1/proof/inclusion", get_inclusion)
    app.router.add_get("/log/v1/proof/consistency", get_consistency)
    app.router.add_get("/log/v1/receipts", list_receipts)
    app.router.add_get("/log/v1/receipts/{receipt_id}", get_receipt)
    app.router.add_get("/log/v1/erasures", get_erasures)
    app.router.add_get("/log/v1/keys", get_keys)
