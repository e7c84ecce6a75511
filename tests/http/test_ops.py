"""Health, readiness and metrics on the serving port (DESIGN.md "Pinned additions")."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from saihm.http.ops import REASONS, not_ready_reason
from saihm.protocol import call as binding_call


async def get(client, url):
    async with client.get(url) as resp:
        return resp.status, resp.headers, await resp.read()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample of an exposition, keyed by (name, sorted labels)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


async def test_healthz_answers_200_while_the_process_runs(client) -> None:
    status, headers, body = await get(client, "/healthz")
    assert status == 200 and body == b'{"status":"ok"}'
    assert headers["Cache-Control"] == "no-store"


async def test_readyz_is_200_when_the_store_answers_and_the_jobs_keep_up(client) -> None:
    status, _, body = await get(client, "/readyz")
    assert (status, body) == (200, b'{"status":"ready"}')


async def test_readyz_is_503_with_a_reason_when_the_checkpointer_has_stopped(
    client, operator
) -> None:
    assert operator.store.background is not None
    operator.store.background.stop(timeout=10)
    status, headers, body = await get(client, "/readyz")
    assert status == 503
    assert body == b'{"status":"not_ready","reason":"checkpointer_stopped"}'
    assert headers["Content-Type"].startswith("application/json")


def test_a_checkpoint_lagging_past_its_bound_is_not_ready(tmp_path, make_holder) -> None:
    from saihm.compose import initialise, open_operator
    from saihm.config import Config

    config = Config.for_data(tmp_path / "slow", checkpoint_interval=3600.0)
    authority = initialise(config)
    operator = open_operator(config)
    try:
        store = operator.store
        holder = make_holder(operator, authority)
        store.checkpoint_now()
        assert not_ready_reason(store) is None
        binding_call(
            operator, holder.token, "saihm_remember", {"content": "waits for a checkpoint"}
        )
        with store.storage.read() as txn:
            assert store.public_log.latest_stored(txn)[0] < store.size()
        # Entries are uncovered; only once they have waited past the bound is it not ready.
        assert not_ready_reason(store) is None
        store.public_log.last_signed = store.clock() - 10 * 3600 - 1
        assert not_ready_reason(store) == "checkpoint_stale"
        store.checkpoint_now()
        assert not_ready_reason(store) is None
    finally:
        operator.store.close()


def test_an_overdue_kek_rotation_is_not_ready(operator) -> None:
    store = operator.store
    assert not_ready_reason(store) is None
    current = store.kek_dir.path / f"kek-{store.kek_dir.current_version:08x}"
    old = time.time() - 25 * 3600 - 3600  # the 24 h schedule, its grace, and more
    os.utime(current, (old, old))
    assert not_ready_reason(store) == "kek_rotation_overdue"
    store.rotate_kek()
    assert not_ready_reason(store) is None


def test_every_not_ready_reason_is_documented() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    for reason in REASONS:
        assert f"`{reason}`" in text, reason


async def test_metrics_count_requests_by_method_and_status(client, holder, call) -> None:
    await call(client, holder, "saihm_status")
    await call(client, None, "saihm_status")  # 401
    await get(client, "/log/v1/receipts/zz")  # 400
    status, headers, body = await get(client, "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=")
    got = samples(body.decode())
    count = got[("saihm_http_requests_total", (("method", "POST"), ("status", "200")))]
    assert count == 1
    assert got[("saihm_http_requests_total", (("method", "POST"), ("status", "401")))] == 1
    assert got[("saihm_http_requests_total", (("method", "GET"), ("status", "400")))] == 1
    buckets = [k for k in got if k[0] == "saihm_http_request_duration_seconds_count"]
    assert buckets


async def test_metrics_report_log_size_checkpoint_and_kek(client, holder, call, operator) -> None:
    for i in range(3):
        await call(client, holder, "saihm_remember", {"content": f"m{i}"})
    operator.store.checkpoint_now()
    _, _, body = await get(client, "/metrics")
    got = samples(body.decode())
    size = operator.store.size()
    assert got[("saihm_log_entries", ())] == size
    assert got[("saihm_checkpoint_entries", ())] == size
    assert got[("saihm_checkpoint_lag_entries", ())] == 0
    assert got[("saihm_checkpoint_age_seconds", ())] == 0
    assert got[("saihm_kek_generation", ())] == operator.store.kek_dir.current_version
    assert 0 <= got[("saihm_kek_age_seconds", ())] < 3600
    assert got[("saihm_store_up", ())] == 1
    assert ("saihm_cache_entries", (("cache", "holder_keys"),)) in got


async def test_no_metric_label_holds_an_id_token_path_or_content(client, holder, call) -> None:
    secret = "the secret plaintext"
    _, cell = await call(client, holder, "saihm_remember", {"content": secret})
    await get(client, f"/log/v1/receipts?subjectId={cell['cellId']}")
    async with client.get("/" + "a" * 64, headers={"X-Evil": holder.token}) as resp:
        assert resp.status in (404, 405)
    async with client.request("FROBNICATE", "/") as resp:
        assert resp.status >= 400
    _, _, body = await get(client, "/metrics")
    text = body.decode()
    for needle in (secret, holder.token[:20], cell["cellId"], holder.holder_id.hex(), "a" * 64):
        assert needle not in text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            assert set(sample.labels) <= {"method", "status", "cache", "version", "le"}
            if "method" in sample.labels:
                assert sample.labels["method"] in {"GET", "POST", "HEAD", "other"}
            if "status" in sample.labels:
                assert re.fullmatch(r"[1-5]\d\d", sample.labels["status"])


def test_a_background_job_failing_in_a_row_is_not_ready(tmp_path) -> None:
    """A job that keeps failing (here the checkpoint signer) makes /readyz say so, and the
    next success makes it ready again (issue 11 "Failure paths": last success recorded)."""
    from saihm.compose import initialise, open_operator
    from saihm.config import Config
    from saihm.http.ops import JOB_FAILURES

    config = Config.for_data(tmp_path / "failing", checkpoint_interval=3600.0)
    initialise(config)
    operator = open_operator(config)
    store = operator.store
    try:
        for count in range(1, JOB_FAILURES + 1):
            assert not_ready_reason(store) is None  # fewer failures than the bound
            store.jobs.failed("checkpoint", OSError(28, "No space left on device"), 1.0)
            assert store.job_health()["checkpoint"]["consecutive_failures"] == count
        assert not_ready_reason(store) == "background_job_failing"
        store.jobs.succeeded("checkpoint")
        assert not_ready_reason(store) is None
    finally:
        store.close()
