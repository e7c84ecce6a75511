"""``saihm publish --to s3://...`` against a local S3 emulator (moto's server, on 127.0.0.1).

The emulator is moto's ``ThreadedMotoServer`` (the test extra); the publisher is the real
``saihm publish`` subprocess configured only by boto3's usual ``AWS_*`` variables; the reader is
``saihm mirror`` over plain HTTP GETs of the bucket, as a CDN in front of it would be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from saihm.audit.mirror import mirror, verify_log
from saihm.audit.publish import tile_paths
from tests.support.optional import require_module

from .conftest import GROWN
from .test_mirror import remember

moto_server = require_module("moto.server", "test")
boto3 = require_module("boto3", "s3")


@pytest.fixture
def s3(monkeypatch):
    from tests.support.serve import free_port

    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3")
    client.create_bucket(Bucket="logs")
    # What an operator does for a CDN: anyone may read the objects, only it may write.
    public = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": "arn:aws:s3:::logs/*",
            }
        ],
    }
    client.put_bucket_policy(Bucket="logs", Policy=json.dumps(public))
    try:
        yield client, env["AWS_ENDPOINT_URL"]
    finally:
        server.stop()


def publish(world, to: str) -> subprocess.CompletedProcess:
    saihm = str(Path(sys.executable).parent / "saihm")
    return subprocess.run(
        [saihm, "publish", "--data", str(world.data), "--to", to],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )


def test_publish_to_s3_then_mirror_and_verify_from_the_bucket(big, s3, tmp_path) -> None:
    client, endpoint = s3
    done = publish(big, "s3://logs/saihm/log")
    assert done.returncode == 0, done.stderr
    keys = {o["Key"] for o in client.list_objects_v2(Bucket="logs")["Contents"]}
    size = 12 + GROWN
    assert keys == {f"saihm/log/{p}" for p in (*tile_paths(size), "checkpoint", "v1/keys")}
    full = client.head_object(Bucket="logs", Key="saihm/log/tile/entries/000")
    assert full["CacheControl"] == "public, max-age=31536000, immutable"
    url = f"{endpoint}/logs/saihm/log"
    outcome = mirror(url, tmp_path / "m")
    assert outcome.ok and outcome.size == size, (outcome.alarms, outcome.report.failures)
    assert verify_log(url).ok
    # Incremental: the full objects stay, only what grew is put.
    op = big.operator()
    try:
        remember(op, big, 200)
    finally:
        op.store.close()
    again = publish(big, "s3://logs/saihm/log")
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert result["previousSize"] == size and result["size"] == size + 200
    after = client.head_object(Bucket="logs", Key="saihm/log/tile/entries/000")
    assert after["LastModified"] == full["LastModified"] and after["ETag"] == full["ETag"]
    assert mirror(url, tmp_path / "m").new_entries == 200


def test_publish_to_s3_refuses_a_rollback_and_a_bad_url(big, world, s3) -> None:
    assert publish(big, "s3://logs/x").returncode == 0
    refused = publish(world, "s3://logs/x")
    assert refused.returncode == 1 and "roll the publication back" in refused.stderr
    bad = publish(big, "s3://")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
