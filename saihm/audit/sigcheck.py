"""ML-DSA-65 signature checks of receipts and cells, optionally across worker processes.

DESIGN.md ("Cryptography") says ML-DSA verification holds the GIL; measured with
``cryptography`` 51 it does not (a Python loop beside a verifying thread kept 0.97 of its speed
alone). Parallelism uses processes all the same: the decoding and checks around each signature
are Python, which does hold it (and, measured 2026-12-07 with ``cryptography`` 50.0.2 on the
loaded 2-core machine, two verifying threads ran no faster than one: the GIL is handed over at
every call). ``SignaturePool`` keeps its processes for a whole run and checks one bundle's
signatures while the caller decodes the next (the mirror engine, saihm.audit.sync).
Each job is ``(index, public_key, message, signature, context)``; a check returns the indexes
whose signature does not verify. ``second`` re-verifies each signature with pqcrypto, an
independent ML-DSA implementation, so a bug in one library cannot hide itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor

from saihm.mldsa import InvalidSignature, mldsa65_verify

__all__ = ["Job", "SignaturePool", "check_signatures"]

Job = tuple[int, bytes, bytes, bytes, bytes]
_CHUNK = 256


def _check_chunk(jobs: Sequence[Job], second: bool) -> list[tuple[int, str]]:
    bad: list[tuple[int, str]] = []
    verify2: Callable[..., object] | None = None
    if second:
        from pqcrypto.sign.ml_dsa_65 import verify as pq_verify

        verify2 = pq_verify
    for index, public_key, message, signature, context in jobs:
        try:
            mldsa65_verify(public_key, signature, message, context)
        except InvalidSignature:
            bad.append((index, "ML-DSA-65 signature does not verify"))
            continue
        if verify2 is not None:
            try:
                verify2(public_key, message, signature, context=context)
            except Exception:  # pqcrypto raises its own InvalidSignatureError
                bad.append((index, "signature rejected by the second implementation (pqcrypto)"))
    return bad


def _chunks(jobs: Sequence[Job]) -> Iterator[Sequence[Job]]:
    for start in range(0, len(jobs), _CHUNK):
        yield jobs[start : start + _CHUNK]


def check_signatures(
    jobs: Sequence[Job],
    *,
    workers: int = 1,
    second: bool = False,
    progress: Callable[[int], None] | None = None,
) -> list[tuple[int, str]]:
    """Verify every job; return ``(index, reason)`` for each failure, sorted by index."""
    bad: list[tuple[int, str]] = []
    if workers <= 1 or len(jobs) <= _CHUNK:
        for chunk in _chunks(jobs):
            bad.extend(_check_chunk(chunk, second))
            if progress:
                progress(len(chunk))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [(len(c), pool.submit(_check_chunk, c, second)) for c in _chunks(jobs)]
            for n, future in futures:
                bad.extend(future.result())
                if progress:
                    progress(n)
    return sorted(bad)


def _shared_keys(jobs: Sequence[Job]) -> list[Job]:
    """``jobs`` with equal public keys as one object, so a chunk sent to a worker carries each
    holder's key once (pickle writes an object it has seen as a reference): a third less to
    send when the keys come from an on-disk map, a new object per read."""
    keys: dict[bytes, bytes] = {}
    return [(i, keys.setdefault(pk, pk), m, sig, ctx) for i, pk, m, sig, ctx in jobs]


class SignaturePool:
    """Signature checks handed over as they are found and run meanwhile, by ``workers``
    processes that live as long as the pool: the caller goes on decoding the next leaves while
    the signatures of the previous ones are checked (``check_signatures`` with workers runs
    only after every job of a batch is known, and starts its processes each time).

    With ``workers <= 1`` nothing runs in the background: ``results`` checks every job handed
    over, in this process, as ``check_signatures`` does.
    """

    def __init__(self, workers: int) -> None:
        self._pool = ProcessPoolExecutor(max_workers=workers) if workers > 1 else None
        self._futures: list[Future[list[tuple[int, str]]]] = []
        self._jobs: list[Job] = []

    def submit(self, jobs: Sequence[Job]) -> None:
        """Hand over ``jobs`` (checked now in the background, or by ``results``)."""
        if self._pool is None:
            self._jobs.extend(jobs)
            return
        for chunk in _chunks(_shared_keys(jobs)):
            self._futures.append(self._pool.submit(_check_chunk, chunk, False))

    def results(self) -> list[tuple[int, str]]:
        """``(index, reason)`` for every job handed over since the last call that does not
        verify, sorted by index; waits for the checks still running."""
        bad = check_signatures(self._jobs)
        for future in self._futures:
            bad.extend(future.result())
        self._jobs, self._futures = [], []
        return sorted(bad)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)

    def __enter__(self) -> SignaturePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
