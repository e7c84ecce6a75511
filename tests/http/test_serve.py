"""End to end: the real ``saihm serve`` as a subprocess (TLS, workers, signals, the README)."""

from __future__ import annotations

import json
import re
import signal
import ssl
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.serve import (  # noqa: F401
    READY_SECONDS,
    ROOT,
    SAIHM,
    checkpoint,
    fetch,
    free_port,
    holder_create,
    post,
    serving,
)

# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [["--host", "0.0.0.0"], ["--host", "192.0.2.1"], ["--tls-cert", "x.pem"], ["--workers", "0"]],
)
def test_serve_refuses_bad_arguments_with_one_line(tmp_path, extra):
    """Plain http only on the loopback; TLS needs both files; nothing is created first."""
    done = subprocess.run(
        [SAIHM, "serve", "--data", str(tmp_path / "data"), "--port", str(free_port()), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()


def test_tls_context_accepts_tls_1_2_and_later_only(tmp_path):
    import trustme

    from saihm.http.serve import tls_context

    ca = trustme.CA()
    cert = ca.issue_cert("localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "both.pem"))
    context = tls_context(str(tmp_path / "both.pem"), str(tmp_path / "both.pem"))
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


# -- TLS, a fresh directory, SIGTERM ------------------------------------------------------------


def test_fresh_directory_over_tls_then_sigterm_signs_a_final_checkpoint(tmp_path):
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    client = ssl.create_default_context()
    ca.configure_trust(client)
    data = tmp_path / "data"
    args = ("--data", str(data), "--tls-cert", "cert.pem", "--tls-key", "key.pem")
    with serving(tmp_path, *args, "--max-body", "4096", context=client, scheme="https") as (
        proc,
        url,
    ):
        printed = (tmp_path / "serve.out").read_text()
        for where in (str(data), str(tmp_path / "kek"), str(tmp_path / "authority")):
            assert where in printed
        assert "saihm holder create" in printed and url in printed
        with pytest.raises(OSError):  # plain http to the TLS port gets no HTTP answer
            fetch(url.replace("https", "http") + "log/checkpoint", timeout=10)
        holder = holder_create(data)
        status, result = post(url, holder["token"], "saihm_remember", {"content": "x"}, client)
        assert status == 200 and len(result["cellId"]) == 64
        status, result = post(
            url, holder["token"], "saihm_remember", {"content": "y" * 5000}, client
        )
        assert (status, result) == (413, {"error": "too_large"})
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    from saihm.compose import open_operator
    from saihm.config import Config

    operator = open_operator(Config.for_data(data), checkpointer=False)
    try:
        sizes = [size for size, _ in operator.store.checkpoints()]
        assert sizes[-1] == operator.store.size()
    finally:
        operator.store.close()


# -- the README quickstart ---------------------------------------------------------------------


def readme_block(tag: str) -> str:
    blocks = re.findall(r"```sh " + tag + r"\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) == 1, f"README.md needs exactly one ```sh {tag} block"
    return blocks[0]


def test_readme_keeps_the_two_setup_commands_first_and_make_run_serves_saihm_data():
    readme = (ROOT / "README.md").read_text()
    first = re.search(r"```sh\n(.*?)```", readme, re.S)
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert commands == ["make run", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert "DATA ?= ./saihm-data" in makefile
    assert "$(BIN)/saihm serve --data $(DATA)" in makefile


def test_readme_quickstart_runs_as_written(tmp_path):
    script = readme_block("quickstart")
    assert script.count("http://127.0.0.1:8080") == 1
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    with serving(tmp_path, "--data", "./saihm-data") as (_, url):
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script.replace("http://127.0.0.1:8080", url[:-1])],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert "The user prefers green tea." in out
        assert "-----BEGIN" not in out and "Traceback" not in out
        erasures = json.loads(out.strip().splitlines()[-1])
        (cell_id,) = erasures["cellIds"]
        assert f'"cellId":"{cell_id}"' in out and '"success":true' in out
        receipts = json.loads(out.strip().splitlines()[-2])["receipts"]
        assert [r["receipt"]["operation"] for r in receipts] == ["REMEMBER", "FORGET"]
        assert '"proof":[' in out


# -- two workers, one log ----------------------------------------------------------------------


def test_two_workers_write_one_consistent_log(tmp_path):
    from saihm.translog import verify_consistency

    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data), "--workers", "2") as (proc, url):
        holders = [holder_create(data) for _ in range(2)]
        first = checkpoint(url)
        jobs = [(h["token"], f"note {i}") for i in range(30) for h in holders]
        with ThreadPoolExecutor(16) as pool:
            results = list(
                pool.map(lambda job: post(url, job[0], "saihm_remember", {"content": job[1]}), jobs)
            )
        assert all(status == 200 for status, _ in results)
        second = checkpoint(url)
        assert second.size >= first.size + len(jobs)
        _, raw = fetch(url + f"log/v1/proof/consistency?first={first.size}&second={second.size}")
        proof = [bytes.fromhex(h) for h in json.loads(raw)["proof"]]
        verify_consistency(first.size, second.size, proof, first.root_hash, second.root_hash)
        for _, result in results:
            _, raw = fetch(url + f"log/v1/receipts?subjectId={result['cellId']}")
            (entry,) = json.loads(raw)["receipts"]
            assert entry["receipt"]["operation"] == "REMEMBER" and entry["index"] < second.size
        for holder in holders:
            status, cells = post(url, holder["token"], "saihm_recall", {})
            assert status == 200 and len(cells) == 30
        # Which worker accepts a connection is the kernel's choice; top up with concurrent
        # writes (bounded) until both have answered one, instead of hoping one batch did.
        for round_ in range(20):
            if len(_binding_pids(tmp_path / "serve.err")) == 2:
                break
            with ThreadPoolExecutor(16) as pool:
                extra = [(holders[0]["token"], f"extra {round_} {i}") for i in range(16)]
                list(
                    pool.map(lambda j: post(url, j[0], "saihm_remember", {"content": j[1]}), extra)
                )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert len(_binding_pids(tmp_path / "serve.err")) == 2


def _binding_pids(access_log: Path) -> set[int]:
    """The worker pids that answered ``POST /`` according to the JSON access log."""
    lines = [json.loads(x) for x in access_log.read_text().splitlines() if x.startswith("{")]
    return {line["pid"] for line in lines if line.get("path") == "/"}


def test_the_banner_names_the_persons_page_and_the_explorer_and_both_answer(tmp_path):
    """Issue #32 item 9: a newcomer could not find ``/me/`` or ``/explorer/`` from the serve
    banner. Both URLs are printed, and each serves its HTML page."""
    with serving(tmp_path, "--data", str(tmp_path / "data")) as (_, url):
        printed = (tmp_path / "serve.out").read_text()
        for page in ("me/", "explorer/"):
            assert re.search(rf"(?m)^saihm: .*{re.escape(url + page)}(,|\s|$)", printed), printed
            status, body = fetch(url + page)
            assert status == 200 and body.lstrip().lower().startswith(b"<!doctype html")
