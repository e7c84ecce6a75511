"""``saihm publish --to s3://BUCKET/PREFIX``: the tlog-tiles tree in an S3-compatible object store.

The same ``Target`` as ``publish.TileDir`` (docs/formats.md §7), written with boto3, the AWS SDK
(the optional extra ``saihm[s3]``). Keys are ``PREFIX/checkpoint``, ``PREFIX/tile/...``,
``PREFIX/v1/keys``, so a bucket (or a CDN in front of it) serves the log at
``https://HOST/BUCKET/PREFIX`` like any static server. The client is configured the way boto3
always is (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``, and
``AWS_ENDPOINT_URL`` for a store other than AWS); saihm reads none of it itself.

Rules as for a directory: a full tile or bundle that exists is compared, never overwritten; the
checkpoint is put last; each object carries ``Cache-Control`` (``immutable`` for full tiles and
bundles, ``max-age=1`` for the checkpoint and partial ones) and its ``Content-Type``. A single
object put is atomic in S3, so readers see the old checkpoint or the new one. There is no lock
across publishers: run one ``saihm publish`` per bucket prefix at a time (e.g. one cron job).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from saihm.audit.publish import checkpoint_of, partial_paths
from saihm.errors import Conflict, MalformedInput, Unavailable
from saihm.translog import Checkpoint

if TYPE_CHECKING:
    from types_boto3_s3 import S3Client

__all__ = ["S3Tiles"]

IMMUTABLE = "public, max-age=31536000, immutable"
SHORT = "public, max-age=1"


class S3Tiles:
    """A tlog-tiles tree under ``s3://bucket/prefix`` (see the module docstring)."""

    def __init__(self, url: str, *, client: S3Client | None = None) -> None:
        if not url.startswith("s3://") or not url[5:].split("/", 1)[0]:
            raise MalformedInput(f"not an s3://BUCKET[/PREFIX] URL: {url}")
        bucket, _, prefix = url[5:].partition("/")
        self.name, self.bucket = url, bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        if client is None:
            try:
                import boto3
            except ImportError as err:
                raise Unavailable("publishing to S3 needs boto3: pip install 'saihm[s3]'") from err
            client = boto3.client("s3")
        self._s3 = client

    @contextmanager
    def lock(self) -> Iterator[None]:
        """No lock across publishers in an object store (see the module docstring)."""
        yield

    def _get(self, path: str) -> bytes | None:
        try:
            answer = self._s3.get_object(Bucket=self.bucket, Key=self.prefix + path)
        except self._s3.exceptions.NoSuchKey:
            return None
        except Exception as err:  # botocore's ClientError and connection errors
            raise Unavailable(f"{self.name}/{path}: {_reason(err)}") from err
        return answer["Body"].read()

    def _put(self, path: str, data: bytes, cache: str, content_type: str) -> None:
        try:
            self._s3.put_object(
                Bucket=self.bucket,
                Key=self.prefix + path,
                Body=data,
                CacheControl=cache,
                ContentType=content_type,
            )
        except Exception as err:
            raise Unavailable(f"{self.name}/{path}: {_reason(err)}") from err

    def current(self) -> Checkpoint | None:
        note = self._get("checkpoint")
        return None if note is None else checkpoint_of(note)

    def write(self, path: str, data: bytes, *, immutable: bool) -> bool:
        if immutable:
            there = self._get(path)
            if there is not None:
                if there != data:
                    raise Conflict(f"{self.name}/{path} exists with other content")
                return False
        self._put(path, data, IMMUTABLE if immutable else SHORT, "application/octet-stream")
        return True

    def write_keys(self, origin: str, verifier_keys: Iterable[str]) -> None:
        body = {"origin": origin, "checkpointKeys": [{"vkey": k} for k in verifier_keys]}
        self._put("v1/keys", json.dumps(body, indent=1).encode() + b"\n", SHORT, "application/json")

    def write_checkpoint(self, note: bytes) -> None:
        self._put("checkpoint", note, SHORT, "text/plain; charset=utf-8")

    def prune_partials(self, keep_sizes: Iterable[int]) -> int:
        keep = {self.prefix + p for size in keep_sizes for p in partial_paths(size)}
        removed = 0
        try:
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix + "tile/"
            )
            for page in pages:
                for item in page.get("Contents", []):
                    key = item["Key"]
                    if ".p/" in key and key not in keep:
                        self._s3.delete_object(Bucket=self.bucket, Key=key)
                        removed += 1
        except Exception as err:
            raise Unavailable(f"{self.name}: cannot prune partial tiles: {_reason(err)}") from err
        return removed


def _reason(err: BaseException) -> str:
    """A one-line reason from a botocore error, never its request details."""
    response = getattr(err, "response", None)
    if isinstance(response, dict) and "Error" in response:
        return str(response["Error"].get("Code", "error"))
    return type(err).__name__
