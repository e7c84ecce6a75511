"""End to end: ``saihm serve`` configured by a TOML file and SAIHM_* variables, answering
/healthz, /readyz and /metrics on its own port, and logging JSON lines with timestamps."""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
from concurrent.futures import ThreadPoolExecutor

from prometheus_client.parser import text_string_to_metric_families

from tests.support.serve import SAIHM, fetch, free_port, holder_create, post, serving

TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _receipts(url: str, operation: str) -> list:
    _, raw = fetch(url + f"log/v1/receipts?operation={operation}")
    return json.loads(raw)["receipts"]


def _requests_total(url: str) -> dict[tuple[str, str], float]:
    status, body = fetch(url + "metrics")
    assert status == 200
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            if s.name == "saihm_http_requests_total":
                out[(s.labels["method"], s.labels["status"])] = s.value
    return out


def test_a_config_file_and_the_environment_set_the_operators_policy(tmp_path, monkeypatch):
    """governance off and no RECALL receipts from the file; STATUS receipts off from the
    environment; --data from the environment alone."""
    data = tmp_path / "data"
    (tmp_path / "saihm.toml").write_text(
        "governance = false\nrecall-receipts = false\ncheckpoint-interval = 0.5\nworkers = 1\n"
    )
    monkeypatch.setenv("SAIHM_DATA", str(data))
    monkeypatch.setenv("SAIHM_STATUS_RECEIPTS", "off")
    with serving(tmp_path, "--config", "saihm.toml") as (_, url):
        holder = holder_create(data)
        status, result = post(url, holder["token"], "saihm_recall", {"query": "x"})
        assert (status, result) == (200, [])
        status, result = post(url, holder["token"], "saihm_status", {})
        assert status == 200
        propose = {"scope": "protocol_upgrade"}
        status, result = post(url, holder["token"], "saihm_governance_propose", propose)
        assert status >= 400 and result == {"error": "governance_disabled"}
        _, form = fetch(url + "governance", headers={"Accept": "application/json"})
        assert json.loads(form)["enabled"] is False
        assert _receipts(url, "RECALL") == [] and _receipts(url, "STATUS") == []
        assert len(_receipts(url, "KEY")) == 1  # the log is live; only the read receipts are off


def test_the_command_line_overrides_the_environment_which_overrides_the_file(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (tmp_path / "saihm.toml").write_text("recall-receipts = false\nstatus-receipts = false\n")
    monkeypatch.setenv("SAIHM_RECALL_RECEIPTS", "true")
    args = ("--data", str(data), "--config", "saihm.toml", "--status-receipts")
    with serving(tmp_path, *args) as (_, url):
        holder = holder_create(data)
        post(url, holder["token"], "saihm_recall", {})
        post(url, holder["token"], "saihm_status", {})
        assert len(_receipts(url, "RECALL")) == 1  # environment beat the file
        assert len(_receipts(url, "STATUS")) == 1  # command line beat the file


def _serve_fails(tmp_path, *args, env=None) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [SAIHM, "serve", "--data", str(tmp_path / "data"), "--port", str(free_port()), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()
    return done


def test_an_unknown_key_or_a_bad_value_is_one_line_naming_it_and_creates_nothing(tmp_path):
    (tmp_path / "typo.toml").write_text("recall_receipts = false\n")
    err = _serve_fails(tmp_path, "--config", "typo.toml").stderr
    assert "unknown key 'recall_receipts'" in err and "'recall-receipts'" in err
    (tmp_path / "bad.toml").write_text('port = "eighty"\n')
    assert "'port'" in _serve_fails(tmp_path, "--config", "bad.toml").stderr
    (tmp_path / "broken.toml").write_text("port = \n")
    assert "not TOML" in _serve_fails(tmp_path, "--config", "broken.toml").stderr
    assert "no such file" in _serve_fails(tmp_path, "--config", "missing.toml").stderr
    assert "$SAIHM_WORKERS" in _serve_fails(tmp_path, env={"SAIHM_WORKERS": "two"}).stderr
    assert "$SAIHM_GOVERNANCE" in _serve_fails(tmp_path, env={"SAIHM_GOVERNANCE": "maybe"}).stderr
    # Values of the right type but outside what the policy allows are refused the same way.
    (tmp_path / "spin.toml").write_text("checkpoint-interval = 0\n")
    assert "--checkpoint-interval must be" in _serve_fails(tmp_path, "--config", "spin.toml").stderr
    env = {"SAIHM_TEMPORARY_DEFAULT_TTL": "0"}
    assert "--temporary-default-ttl must be" in _serve_fails(tmp_path, env=env).stderr
    assert (
        "--kek-rotation-hours must be"
        in _serve_fails(tmp_path, "--kek-rotation-hours", "-1").stderr
    )


def test_health_readiness_and_metrics_answer_on_the_serving_port(tmp_path):
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        assert fetch(url + "healthz") == (200, b'{"status":"ok"}')
        assert fetch(url + "readyz") == (200, b'{"status":"ready"}')
        holder = holder_create(data)
        for i in range(3):
            assert post(url, holder["token"], "saihm_remember", {"content": f"n{i}"})[0] == 200
        assert _requests_total(url)[("POST", "200")] == 3


def test_metrics_sum_the_requests_of_every_worker(tmp_path):
    """With --workers 2 a scrape answered by either worker counts every worker's requests."""
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data), "--workers", "2") as (_, url):
        holder = holder_create(data)
        with ThreadPoolExecutor(8) as pool:
            results = list(
                pool.map(lambda i: post(url, holder["token"], "saihm_status", {})[0], range(40))
            )
        assert results == [200] * 40
        for _ in range(6):  # whichever worker answers the scrape, the sum is the same
            assert _requests_total(url)[("POST", "200")] == 40


def test_every_log_line_is_json_with_a_timestamp_and_no_token(tmp_path):
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data)) as (_, url):
        holder = holder_create(data)
        post(url, holder["token"], "saihm_remember", {"content": "private words"})
        fetch(url + "nowhere")
    lines = (tmp_path / "serve.err").read_text().splitlines()
    assert lines
    for line in lines:
        record = json.loads(line)
        assert TS.fullmatch(record["ts"]) and record["level"] and record["logger"]
        assert holder["token"][:24] not in line and "private words" not in line
    paths = {json.loads(line).get("path") for line in lines}
    assert {"/", "/nowhere"} <= paths


def test_tls_start_up_logs_the_key_exchange_and_the_missing_post_quantum_group(tmp_path):
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    client = ssl.create_default_context()
    ca.configure_trust(client)
    args = ("--data", str(tmp_path / "data"), "--tls-cert", "cert.pem", "--tls-key", "key.pem")
    with serving(tmp_path, *args, context=client, scheme="https") as (_, url):
        assert fetch(url + "healthz", context=client)[0] == 200
    records = [json.loads(x) for x in (tmp_path / "serve.err").read_text().splitlines()]
    (found,) = [r for r in records if r.get("event") == "tls_key_exchange"]
    assert found["openssl"] == ssl.OPENSSL_VERSION and found["tlsVersion"] == "TLSv1.3"
    if ssl.OPENSSL_VERSION_INFO[:2] < (3, 5):
        assert found["postQuantum"] is False
        assert any("post-quantum" in r.get("msg", "") for r in records if r["level"] == "warning")
