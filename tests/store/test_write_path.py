"""The write path's shape (issue 24, Build 1): what one remember reads, which changes share a
batch, and when a change is answered.

Behaviour only, never timing: how often the KEK state file is read for one remember; the order
of a batch's commit, its post-commit work and its acknowledgement; which writers a batch waits
for (an hour-long window makes "waits" and "does not wait" unmistakable); and that a batch
leaves the projections a rebuild makes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from saihm.events import Operation
from saihm.events.signing import sign_receipt
from saihm.keyring import Keyring, kekdir
from saihm.projections import LeafView
from saihm.projections.grants import revocation_subject
from saihm.store import Change, Store
from saihm.store.commit import BATCH_WINDOW, COMMIT_FOLLOWING_WINDOW
from tests.support.world import Holder, World


def _state_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the KEK state file's reads from disk (each fresh read, or a re-read after the
    file changed), with the generation each found in force."""
    reads: list[int] = []
    read_all = kekdir._read_all

    def counting(fd: int, size: int) -> bytes:
        raw = read_all(fd, size)
        reads.append(json.loads(raw)["current"])
        return raw

    monkeypatch.setattr(kekdir, "_read_all", counting)
    return reads


def test_one_remember_reads_the_kek_state_once(world: World, monkeypatch: pytest.MonkeyPatch):
    """The state file is read afresh once, inside the write transaction, for the wrap; the
    cell's kekVersion and the cache's generation come from the checked copy."""
    holder = world.holder()
    world.call(holder, "saihm_remember", content="warm up")
    reads = _state_reads(monkeypatch)
    result = world.call(holder, "saihm_remember", content="one more")
    assert reads == [1]
    assert result["kekVersion"] == 1  # type: ignore[index]


def test_a_batch_reads_the_kek_state_once_for_all_its_wraps(
    world: World, monkeypatch: pytest.MonkeyPatch
):
    """Three remembers in one batch wrap three DEKs under the generation the transaction read
    once, afresh, inside it (Keyring.current_kek); each cell opens with its DEK."""
    holders = [world.holder() for _ in range(3)]
    for holder in holders:
        world.call(holder, "saihm_remember", content="warm up")
    store = world.store
    store.commits.window = store.commits.signing_ttl = 3600.0
    sizes = _batch_sizes(store)
    all_signed = threading.Barrier(len(holders), timeout=WAIT)
    commit = store.commits.commit

    def commit_once_all_signed(change: Change) -> Change:
        all_signed.wait()
        return commit(change)

    monkeypatch.setattr(store.commits, "commit", commit_once_all_signed)
    reads = _state_reads(monkeypatch)
    answers: list[Any] = []

    def remember(holder: Holder) -> None:
        answers.append(world.call(holder, "saihm_remember", content="in a batch"))

    _in_threads(remember, holders)
    assert sizes == [3]
    assert reads == [1]
    assert [a["kekVersion"] for a in answers] == [1, 1, 1]
    monkeypatch.undo()
    for holder in holders:
        contents = [c["plaintext"] for c in world.call(holder, "saihm_recall")]
        assert sorted(contents) == ["in a batch", "warm up"]


def test_the_checked_copy_follows_another_process_rotation(world: World):
    """A rotation through another KekDirectory (another process's) replaces the state file;
    the next remember here labels its cell with the new generation and wraps under it."""
    holder = world.holder()
    world.call(holder, "saihm_remember", content="before")
    store = world.store
    assert store.kek_dir.current_version == 1
    other = kekdir.KekDirectory(store.kek_dir.path)
    Keyring(store.storage, other).rotate()
    assert store.kek_dir.current_version == 2
    result = world.call(holder, "saihm_remember", content="after")
    assert result["kekVersion"] == 2  # type: ignore[index]
    with store.read_txn() as txn:
        assert store.keyring.versions_in_use(txn) == {2: 3}


WAIT = 30.0  # seconds an event may take on a loaded machine; a pass never waits this long


def test_post_commit_work_precedes_the_answer_and_does_not_hold_the_next_batch(world: World):
    """A batch's post-commit work runs before its change is acknowledged (and a recall right
    after sees the new cell), while the next batch already commits; the post-commit work of
    the two batches never runs at the same time, and runs in commit order."""
    store = world.store
    a, b = world.holder(), world.holder()
    world.call(a, "saihm_remember", content="warm up")
    first_blocked, release, b_committing = (threading.Event() for _ in range(3))
    events: list[str] = []
    running = [0]
    seen_running: list[int] = []  # how many were running at each entry (a failure is logged)

    def blocking_callback() -> None:
        running[0] += 1
        seen_running.append(running[0])
        try:
            if not first_blocked.is_set():
                first_blocked.set()
                assert release.wait(WAIT)
            events.append(f"after_commit {threading.current_thread().name}")
        finally:
            running[0] -= 1

    def fault(step: str) -> None:
        if step == "before_commit" and threading.current_thread().name == "b":
            b_committing.set()

    store.commits.after_commit.append(blocking_callback)
    store.env.fault_hook = fault
    results: dict[str, bool] = {}

    def remember(name: str, holder: Holder) -> None:
        cell = world.call(holder, "saihm_remember", content=f"from {name}")
        events.append(f"answered {name}")
        # Read-your-writes: the first recall after the answer finds the new cell.
        recalled = world.call(holder, "saihm_recall")
        results[name] = cell["cellId"] in [item["cellId"] for item in recalled]  # type: ignore

    size = store.size()
    ta = threading.Thread(target=remember, args=("a", a), name="a")
    ta.start()
    assert first_blocked.wait(WAIT)
    assert "answered a" not in events  # a's change committed, but its post-commit work runs
    assert store.size() == size + 1
    tb = threading.Thread(target=remember, args=("b", b), name="b")
    tb.start()
    try:
        assert b_committing.wait(WAIT), "the next batch could not start its transaction"
    finally:
        release.set()
        ta.join(WAIT)
        tb.join(WAIT)
    # Each answer follows its own batch's post-commit work (later entries are the recalls').
    assert events[0] == "after_commit a" and "answered a" in events
    assert events.index("after_commit b") < events.index("answered b")
    assert store.size() == size + 4  # two REMEMBER and two RECALL receipts
    assert results == {"a": True, "b": True}
    assert set(seen_running) == {1}


def _recall_receipt(world: World, holder: Holder) -> Change:
    """A change logging one RECALL receipt of ``holder``, signed with its custodied key (which
    announces the change to the group commit, as every operation's signing does)."""
    key = world.store.holder_key(holder.holder_id)
    receipt = sign_receipt(
        key, subject_id=holder.holder_id, operation=Operation.RECALL, timestamp=int(world.clock())
    )
    return Change(receipts=[receipt])


def _in_threads(target: Callable[..., None], args: Iterable[Any], star: bool = False) -> None:
    """Run ``target`` once per item of ``args`` (unpacked when ``star``), each in its own
    thread, and wait for them all (each at most :data:`WAIT`)."""
    threads = [threading.Thread(target=target, args=tuple(a) if star else (a,)) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)


def _batch_sizes(store: Store) -> list[int]:
    """Record the size of every batch that commits from now on."""
    sizes: list[int] = []
    write_batch = store.commits._write_batch

    def recording(batch: list[Change]) -> None:
        sizes.append(len(batch))
        write_batch(batch)

    store.commits._write_batch = recording  # type: ignore[method-assign]
    return sizes


def test_a_lone_writer_never_waits_for_company(world: World):
    """With no other writer signing, a commit does not wait, however long the window: here
    an hour, while the test allows the commit far less."""
    holder = world.holder()
    store = world.store
    store.commits.window = store.commits.signing_ttl = 3600.0
    sizes = _batch_sizes(store)
    done = threading.Event()

    def remember() -> None:
        world.call(holder, "saihm_remember", content="alone")
        done.set()

    threading.Thread(target=remember, daemon=True).start()
    assert done.wait(WAIT)
    assert sizes == [1]


def test_a_batch_waits_for_writers_that_are_signing(world: World):
    """Two writers that have both begun (announced) before either queues share one batch,
    whichever queues first: the first committer waits for the other within the window."""
    a, b = world.holder(), world.holder()
    store = world.store
    store.commits.window = store.commits.signing_ttl = 3600.0
    sizes = _batch_sizes(store)
    both_signing = threading.Barrier(2, timeout=WAIT)
    indexes: dict[str, list[int]] = {}

    def write(name: str, holder: Holder) -> None:
        change = _recall_receipt(world, holder)
        both_signing.wait()
        indexes[name] = store.commit(change).indexes

    _in_threads(write, (("a", a), ("b", b)), star=True)
    assert sizes == [2]
    assert sorted(indexes["a"] + indexes["b"]) == [world.store.size() - 2, world.store.size() - 1]


def test_a_batch_leaves_the_projections_a_rebuild_makes(world: World, tmp_path: Path):
    """A batch of three changes (two RECALLs around a session revocation) writes the applied
    count, with the revocation count it carries, once for the batch: the projections are
    byte-identical to a rebuild's, and the revocation is counted once."""
    a, b = world.holder(), world.holder()
    store = world.store
    store.commits.window = store.commits.signing_ttl = 3600.0
    now = int(world.clock())
    subject = revocation_subject(a.holder_id, a.session_id)

    def signed(holder: Holder, subject_id: bytes, operation: Operation) -> Change:
        key = store.holder_keys.get(holder.holder_id)  # not announcing: the writers do
        receipt = sign_receipt(key, subject_id=subject_id, operation=operation, timestamp=now)
        return Change(receipts=[receipt])

    changes = [
        signed(a, a.holder_id, Operation.RECALL),
        signed(a, subject, Operation.UNGRANT),
        signed(b, b.holder_id, Operation.RECALL),
    ]
    with store.read_txn() as txn:
        before = store.projections.meta.revocations(txn)
    assert before is not None
    sizes = _batch_sizes(store)
    all_signing = threading.Barrier(len(changes), timeout=WAIT)

    def write(change: Change) -> None:
        store.commits.announce()
        all_signing.wait()
        store.commit(change)

    _in_threads(write, changes)
    assert sizes == [3]
    with store.read_txn() as txn:
        after = store.projections.meta.revocations(txn)
        assert store.projections.grants.revocation(txn, subject) is not None
        assert store.projections.applied(txn) == store.size()
    assert after is not None
    assert (after.applied, after.count) == (store.size(), before.count + 1)
    report = store.rebuild_into(tmp_path / "rebuilt")
    assert report["identical"], report["difference"]


def test_only_an_expensive_commit_lets_a_batch_wait_as_long_as_a_commit(world: World):
    """The wait for signing writers follows the recent commit time on a storage whose commit
    is expensive (PostgreSQL: one lock for every node, a WAL flush), bounded by its limit;
    on LMDB it stays the fixed window."""
    commits = world.store.commits
    commits.commit_seconds = 3600.0
    if world.store.storage.kind == "postgresql":
        limit = COMMIT_FOLLOWING_WINDOW["postgresql"]
        assert BATCH_WINDOW < limit <= 0.05
        assert commits.gather_window() == limit
        commits.commit_seconds = limit / 2
        assert commits.gather_window() == limit / 2
    else:
        assert commits.gather_window() == BATCH_WINDOW
    commits.commit_seconds = 0.0
    assert commits.gather_window() == BATCH_WINDOW


def test_the_commit_time_estimate_follows_the_commits(world: World):
    """Each batch's write transaction time moves the estimate a quarter of the way to it,
    the first is taken as it is; a batch waits up to the estimate, never longer than the
    limit."""
    commits = world.store.commits
    commits.commit_seconds = 0.0
    commits._learn_commit_time(0.004)
    assert commits.commit_seconds == 0.004
    commits._learn_commit_time(0.008)
    assert commits.commit_seconds == pytest.approx(0.005)
    commits.window, commits.follow_limit = 0.0, 0.002
    assert commits.gather_window() == 0.002
    world.call(world.holder(), "saihm_remember", content="measured")
    assert commits.commit_seconds > 0.0


def test_a_batch_waits_for_signing_writers_up_to_the_commit_time(world: World):
    """With the fixed window off, a committer still waits for a writer that is signing while
    its recent commits took longer than that writer needs (here an hour, on any driver):
    the two changes share one batch."""
    a, b = world.holder(), world.holder()
    store = world.store
    store.commits.window = 0.0
    store.commits.signing_ttl = store.commits.follow_limit = 3600.0
    store.commits.commit_seconds = 3600.0
    store.commits._learn_commit_time = lambda seconds: None  # type: ignore[method-assign]
    sizes = _batch_sizes(store)
    both_signing = threading.Barrier(2, timeout=WAIT)

    def write(holder: Holder) -> None:
        change = _recall_receipt(world, holder)
        both_signing.wait()
        store.commit(change)

    _in_threads(write, (a, b))
    assert sizes == [2]


def test_a_lone_writer_never_waits_however_long_commits_take(world: World):
    """With no other writer signing, the commit-time wait is not taken either."""
    holder = world.holder()
    store = world.store
    store.commits.window = 0.0
    store.commits.signing_ttl = store.commits.follow_limit = 3600.0
    store.commits.commit_seconds = 3600.0
    store.commits._learn_commit_time = lambda seconds: None  # type: ignore[method-assign]
    sizes = _batch_sizes(store)
    done = threading.Event()

    def remember() -> None:
        world.call(holder, "saihm_remember", content="alone")
        done.set()

    threading.Thread(target=remember, daemon=True).start()
    assert done.wait(WAIT)
    assert sizes == [1]


def test_the_post_commit_sync_takes_the_batch_leaves_without_reading_the_log(
    world: World, monkeypatch: pytest.MonkeyPatch
):
    """After a commit, the cache takes the leaves the batch appended as they are: the log is
    not read back for them; the holder's cell list gains the new cell, which the next
    holder-wide read opens and serves."""
    holder = world.holder()
    wide = world.grant_token(holder.holder_id)
    first = world.call(holder, "saihm_remember", content="warm up")["cellId"]  # type: ignore[index]
    world.call(wide, "saihm_recall")  # the kept list now holds the holder's cells
    store = world.store
    read_back: list[tuple[int, int]] = []
    leaves = store.env.tree.leaves

    def counting(txn: Any, start: int, end: int) -> Any:
        read_back.append((start, end))
        return leaves(txn, start, end)

    monkeypatch.setattr(store.env.tree, "leaves", counting)
    cell = world.call(holder, "saihm_remember", content="one more")["cellId"]  # type: ignore[index]
    assert read_back == []
    index = store.reader.cache.holder_index(holder.holder_id)
    assert index is not None and index.cells is not None
    assert [k.hex() for k in index.cells] == [first, cell]
    assert bytes.fromhex(cell) in index.missing  # to be opened and verified by the next read
    assert store.reader.cache._synced == store.size()
    answer = world.call(wide, "saihm_recall")
    assert [item["cellId"] for item in answer] == [first, cell]  # type: ignore[attr-defined]


def test_the_cache_follows_only_leaves_that_come_next(world: World):
    """``CellCache.follow`` takes leaves only when they start where the cache's last sync
    ended, under the generation it has, and there is at least one; otherwise it changes
    nothing and says so, and the caller reads the log instead."""
    holder = world.holder()
    world.call(holder, "saihm_remember", content="one")
    store = world.store
    cache = store.reader.cache
    size = store.size()
    with store.read_txn() as txn:
        view = LeafView.from_leaf(store.env.tree.leaf(txn, size - 1))
    kek = store.kek_dir.current_version
    assert cache._synced == size
    assert cache.follow(size + 1, [view], kek) is False  # a gap: leaves between are unseen
    assert cache.follow(size - 1, [view], kek) is False  # already applied
    assert cache.follow(size, [], kek) is False
    assert cache.follow(size, [view], kek + 1) is False  # another generation: clear first
    assert cache._synced == size
    assert cache.follow(size, [view], kek) is True
    assert cache._synced == size + 1
