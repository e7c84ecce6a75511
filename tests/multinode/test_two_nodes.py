"""Several nodes, one log (issue 16; docs/scaling.md "Several nodes, one log").

Two real ``saihm serve --store URL`` processes share one PostgreSQL database and one data
directory (as nodes on a shared volume would). Each signs locally and commits through the
database, whose one-writer lock makes leaf indexes dense and unique; a node killed with
SIGKILL mid-traffic loses no acknowledged write; the other node's caches follow what this
node commits; ``saihm verify --data DIR --store URL`` accepts the one log they wrote.

These need PostgreSQL (``SAIHM_TEST_POSTGRES``, started by ``.ci/postgres.sh``); they skip
without it locally and fail without it under ``CI=true``.
"""

from __future__ import annotations

import functools
import itertools
import json
import signal
import subprocess
import threading
from pathlib import Path

from tests.support.cli import run_saihm
from tests.support.serve import checkpoint, fetch, holder_create, post, serving, until

DEADLINE = 120.0  # seconds any bounded wait below may take on a loaded runner


_until = functools.partial(until, seconds=DEADLINE)


def _saihm(*argv: str) -> subprocess.CompletedProcess[str]:
    return run_saihm(*argv, timeout=300)


def _entries(url: str, size: int) -> list[dict]:
    out: list[dict] = []
    for start in range(0, size, 1000):
        status, raw = fetch(url + f"log/v1/entries?start={start}&end={min(size, start + 1000)}")
        assert status == 200, raw
        out += json.loads(raw)["entries"]
    return out


def test_two_nodes_write_one_log_and_a_killed_node_loses_no_acknowledged_write(
    tmp_path: Path, postgres_location: str
) -> None:
    url = postgres_location
    data = tmp_path / "data"
    env = {"SAIHM_STORE": url}
    acked: list[tuple[int, str, str, str]] = []  # (writer, cellId, receiptId, content)
    errors_after_kill: list[int] = []
    through_b: list[bool] = []  # beside each acknowledged write: whether node B answered it
    lock = threading.Lock()
    stop = threading.Event()
    with serving(tmp_path, "--data", str(data), env=env, name="a") as (_, url_a):
        with serving(tmp_path, "--data", str(data), env=env, name="b") as (node_b, url_b):
            holders = [holder_create(data, "--store", url) for _ in range(4)]
            killed = threading.Event()

            def writer(i: int) -> None:
                # Even writers use node A; odd ones node B until it dies, then node A.
                n = 0
                while not stop.is_set():
                    node = url_b if i % 2 and not killed.is_set() else url_a
                    content = f"writer {i} note {n}"
                    n += 1
                    try:
                        status, body = post(
                            node, holders[i]["token"], "saihm_remember", {"content": content}
                        )
                    except OSError:
                        # No answer: not acknowledged (it may or may not have committed).
                        errors_after_kill.append(i)
                        continue
                    if status == 200:
                        with lock:
                            acked.append((i, body["cellId"], body["receiptId"], content))
                            through_b.append(node == url_b)

            threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
            for t in threads:
                t.start()
            try:
                _until(lambda: len(acked) >= 40, "40 acknowledged writes through both nodes")
                node_b.send_signal(signal.SIGKILL)
                node_b.wait(timeout=30)
                killed.set()
                with lock:
                    at_kill = len(acked)
                _until(lambda: len(acked) >= at_kill + 30, "writes through the surviving node")
            finally:
                stop.set()
                for t in threads:
                    t.join(timeout=60)
        assert node_b.returncode == -signal.SIGKILL
        writers_seen = {i for i, *_ in acked}
        assert writers_seen == {0, 1, 2, 3}, "every writer had writes acknowledged"
        assert any(through_b[:at_kill]) and not all(through_b[:at_kill]), "both nodes wrote"

        # Every acknowledged write is readable through the surviving node, exactly as written.
        for i, holder in enumerate(holders):
            status, cells = post(url_a, holder["token"], "saihm_recall", {"limit": 100_000})
            assert status == 200, cells
            held = {c["cellId"]: c["plaintext"] for c in cells}
            mine = [(cell, content) for w, cell, _, content in acked if w == i]
            assert mine and all(held.get(cell) == content for cell, content in mine)

        # One log: every acknowledged receipt at exactly one index, indexes dense and unique.
        _until(lambda: checkpoint(url_a).size >= len(acked), "a checkpoint covering the writes")
        size = checkpoint(url_a).size
        entries = _entries(url_a, size)
        assert [e["index"] for e in entries] == list(range(size)), "no leaf missing"
        assert len({e["leaf"] for e in entries}) == size, "no leaf duplicated"
        indexes = []
        for *_, receipt_id, _ in acked:
            status, raw = fetch(url_a + f"log/v1/receipts/{receipt_id}")
            assert status == 200, raw
            indexes.append(json.loads(raw)["index"])
        assert len(set(indexes)) == len(acked) and max(indexes) < size

    done = _saihm("verify", "--data", str(data), "--store", url, "--no-progress", "--json")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["ok"] is True


def test_a_nodes_recall_cache_follows_what_the_other_node_commits(
    tmp_path: Path, postgres_location: str
) -> None:
    """A cell forgotten through node B is never served again by node A, which had it cached;
    a cell remembered through B is recalled through A at once."""
    url = postgres_location
    data = tmp_path / "data"
    env = {"SAIHM_STORE": url}
    with (
        serving(tmp_path, "--data", str(data), env=env, name="a") as (_, url_a),
        serving(tmp_path, "--data", str(data), env=env, name="b") as (_, url_b),
    ):
        holder = holder_create(data, "--store", url)
        token = holder["token"]
        ids = [
            post(url_a, token, "saihm_remember", {"content": f"tea fact {i}"})[1]["cellId"]
            for i in range(3)
        ]
        status, cells = post(url_a, token, "saihm_recall", {"query": "tea"})
        assert status == 200 and {c["cellId"] for c in cells} == set(ids)  # now cached on A
        status, answer = post(url_b, token, "saihm_forget", {"id": ids[0]})
        assert status == 200, answer
        status, added = post(url_b, token, "saihm_remember", {"content": "tea fact new"})
        assert status == 200
        status, cells = post(url_a, token, "saihm_recall", {"query": "tea"})
        assert status == 200
        assert {c["cellId"] for c in cells} == {*ids[1:], added["cellId"]}
        status, erasures = fetch(url_a + "log/v1/erasures")
        assert ids[0] in json.loads(erasures)["cellIds"]


def test_both_nodes_publish_checkpoints_of_one_log(tmp_path: Path, postgres_location: str) -> None:
    """Each node signs checkpoints; the checkpoints either node serves agree on the root at
    every size and are consistent with each other (checked with the log's proofs)."""
    from saihm.translog import verify_consistency

    url = postgres_location
    data = tmp_path / "data"
    env = {"SAIHM_STORE": url}
    with (
        serving(
            tmp_path, "--data", str(data), "--checkpoint-interval", "0.2", env=env, name="a"
        ) as (_, url_a),
        serving(
            tmp_path, "--data", str(data), "--checkpoint-interval", "0.2", env=env, name="b"
        ) as (_, url_b),
    ):
        holder = holder_create(data, "--store", url)
        seen = []
        for i in range(20):
            node = (url_a, url_b)[i % 2]
            assert post(node, holder["token"], "saihm_remember", {"content": f"n{i}"})[0] == 200
            seen.append(checkpoint((url_b, url_a)[i % 2]))
        by_size: dict[int, bytes] = {}
        for cp in seen:
            assert by_size.setdefault(cp.size, cp.root_hash) == cp.root_hash
        ordered = sorted(by_size.items())
        for (m, root_m), (n, root_n) in itertools.pairwise(ordered):
            _, raw = fetch(url_a + f"log/v1/proof/consistency?first={m}&second={n}")
            proof = [bytes.fromhex(h) for h in json.loads(raw)["proof"]]
            verify_consistency(m, n, proof, root_m, root_n)
    done = _saihm("verify", "--data", str(data), "--store", url, "--no-progress")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
