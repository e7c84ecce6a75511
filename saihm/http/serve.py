"""``saihm serve``: run the operator over HTTPS (or plain HTTP on the loopback only).

The parent process checks the arguments, creates what a fresh directory needs
(:func:`saihm.compose.initialise`), binds the listening socket once and prints where everything
lives. With ``--workers 1`` it then serves itself; with ``N > 1`` it forks N workers that share
the bound socket (the kernel spreads connections among them) and supervises them. Each worker
opens its own :class:`~saihm.store.Store` after the fork: LMDB is multi-process safe, an
environment opened before a fork is not. SIGTERM or SIGINT stops the workers cleanly; closing
the store signs a final checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shlex
import shutil
import signal
import socket
import ssl
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from saihm.errors import MalformedInput, SaihmError
from saihm.http.listen import LOOPBACK, bind, tls_context

if TYPE_CHECKING:
    from saihm.config import Config
    from saihm.http.log_api import Submitter
    from saihm.operator import Operator

__all__ = ["LOOPBACK", "ServeOptions", "bind", "main", "tls_context"]

log = logging.getLogger("saihm.http")


@dataclass(frozen=True)
class ServeOptions:
    """What ``saihm serve`` was asked for (saihm.commands.serve parses it).

    ``config`` builds the operator's Config from the options; it is called again after a new
    data directory is created, to read the origin the directory recorded. ``policy`` holds the
    options checked against :data:`POLICY_RANGES`, ``limits`` the rate-limit and
    pending-proposal options (saihm.http.limits.SERVE_FIELDS); None means not given.
    ``submitter`` builds each worker's witness submitter over its operator (None: no
    witnesses); the command line passes :func:`saihm.witness.submit.for_config`.
    """

    data: str
    config: Callable[[], Config]
    store: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    tls_cert: str | None = None
    tls_key: str | None = None
    max_body: int = 1 << 20
    policy: Mapping[str, float | int | None] = field(default_factory=dict)
    limits: Mapping[str, float | int | None] = field(default_factory=dict)
    submitter: Callable[[Operator], Submitter | None] = lambda operator: None


def _check(args: ServeOptions) -> bool:
    """Validate the serve arguments; return True when TLS is on. Raises MalformedInput."""
    tls = bool(args.tls_cert or args.tls_key)
    if tls and not (args.tls_cert and args.tls_key):
        raise MalformedInput("give both --tls-cert and --tls-key")
    if not tls and args.host not in LOOPBACK:
        raise MalformedInput(
            f"refusing plain http on {args.host}: give --tls-cert and --tls-key, "
            "or listen on 127.0.0.1, localhost or ::1"
        )
    if not 0 <= args.port <= 65535:
        raise MalformedInput("--port must be 0..65535")
    if args.workers < 1:
        raise MalformedInput("--workers must be at least 1")
    if args.max_body < 1:
        raise MalformedInput("--max-body must be positive")
    _check_policy(args)
    return tls


#: The serve policy options and the values each accepts (a zero checkpoint interval would spin).
POLICY_RANGES = {
    "checkpoint_interval": (0.001, 86_400.0),
    "kek_rotation_hours": (0, 168),
    "voting_window": (1, 10 * 365 * 86_400),
    "temporary_default_ttl": (1, 86_400),
    "service_window_ms": (0, 3_600_000),
    # The LMDB map (docs/operations.md "Storage limits"): at least 1 MiB, at most 2^48 bytes.
    "map_size": (1 << 20, 1 << 48),
    "map_size_max": (1 << 20, 1 << 48),
    "min_free_disk": (0, 1 << 60),
    "recall_cache_mb": (0, 1 << 20),
}


def _check_policy(args: ServeOptions) -> None:
    for name, (low, high) in POLICY_RANGES.items():
        value = args.policy.get(name)
        if value is not None and not low <= value <= high:
            option = "--" + name.replace("_", "-")
            raise MalformedInput(f"{option} must be {low}..{high}, not {value}")


def _saihm_command() -> str:
    """How the person who started this server can run ``saihm``: by name when it is on PATH
    (an activated venv), else by the path of the script beside this interpreter."""
    beside = Path(sys.executable).parent / "saihm"
    on_path = shutil.which("saihm")
    if on_path is not None and Path(on_path).resolve() == beside.resolve():
        return "saihm"
    return shlex.quote(str(beside)) if beside.exists() else "saihm"


def _announce(args: ServeOptions, config: Config, url: str, created: bool) -> None:
    from saihm.retrieval.bundled import describe_model

    data = shlex.quote(args.data)
    if config.store is not None:
        # The URL may hold a password: the hint names the variable, never the value.
        data += ' --store "$SAIHM_STORE"'
    first = "created" if created else "using"
    print(
        f"saihm: {first} data directory {config.data_dir}\n"
        f"saihm: KEK directory {config.kek_dir} (keep it on another volume in production)\n"
        f"saihm: authority {config.authority_dir} (signs capability tokens; the server reads "
        f"only {config.authority_public_key_file})\n"
        f"saihm: log keys {config.log_keys_dir}; log origin {config.origin}\n"
        f"saihm: store {_store_shown(config)}\n"
        f"saihm: semantic stage {describe_model(config.embedding_model)}\n"
        f"saihm: serving {url} with {args.workers} worker(s); public log at {url}log/checkpoint,"
        f" governance at {url}governance\n"
        f"saihm: your own page at {url}me/, the log explorer at {url}explorer/\n"
        "saihm: first call (in another terminal):\n"
        f"  TOKEN=$({_saihm_command()} holder create --data {data} | python3 -c "
        "'import json,sys; print(json.load(sys.stdin)[\"token\"])')\n"
        f'  curl -s {url} -H "Authorization: Bearer $TOKEN" '
        '-d \'{"method":"saihm_status","params":{}}\'',
        flush=True,
    )


def _check_store(config: Config) -> None:
    """Open a PostgreSQL store once before anything is created or announced, so a bad or
    unreachable URL is one line and an exit (its message carries no password)."""
    if config.store is None:
        return
    from saihm.storage import open_storage
    from saihm.storage.url import refuse_other_store
    from saihm.store import STORAGE_NAMES

    refuse_other_store(config.data_dir, config.store)  # before it creates any table there
    open_storage(config.store, STORAGE_NAMES).close()


def _store_shown(config: Config) -> str:
    """Where the log and private state are, without a password."""
    from saihm.storage.url import redact

    if config.store is None:
        return f"LMDB in {config.lmdb_dir}"
    return f"{redact(config.store)} (PostgreSQL; {config.data_dir} holds node-local files only)"


async def _serve(
    config: Config, sock: socket.socket, context: ssl.SSLContext | None, args: ServeOptions
) -> None:
    from saihm.compose import open_operator
    from saihm.http.app import create_app
    from saihm.http.guard import serve_until_signalled

    operator = open_operator(config)
    try:
        # The guarded runner answers parser refusals with JSON and logs no header value.
        app = create_app(
            operator, client_max_size=args.max_body, submitter=args.submitter(operator)
        )
        await serve_until_signalled(app, sock, context)
    finally:
        operator.store.close()


def _worker(
    config: Config, sock: socket.socket, context: ssl.SSLContext | None, args: ServeOptions
) -> int:
    try:
        asyncio.run(_serve(config, sock, context, args))
    except SaihmError as err:
        from saihm.storage.hint import with_store
        from saihm.storage.url import scrub

        message = with_store(scrub(str(err), config.store), config.store)
        print(f"saihm: error: {message}", file=sys.stderr, flush=True)
        return 2
    return 0


def _supervise(
    config: Config, sock: socket.socket, context: ssl.SSLContext | None, args: ServeOptions
) -> int:
    """Fork ``args.workers`` workers on ``sock``; forward SIGTERM/SIGINT; reap them all.

    Exits non-zero if a worker fails other than by being stopped.
    """
    children: list[int] = []
    for _ in range(args.workers):
        pid = os.fork()
        if pid == 0:  # the worker: open LMDB only now, after the fork
            code = 1
            try:
                code = _worker(config, sock, context, args)
            except BaseException as err:
                log.error("worker failed: %s", type(err).__name__)
            finally:
                os._exit(code)
        children.append(pid)
    sock.close()
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    status = 0
    remaining = set(children)
    while remaining:
        try:
            pid, wait_status = os.wait()
        except ChildProcessError:
            break
        remaining.discard(pid)
        if os.waitstatus_to_exitcode(wait_status) != 0 and not stopping:
            status = 1
            stop(signal.SIGTERM, None)
    return status


def main(args: ServeOptions) -> int:
    """Run ``saihm serve``; returns the exit status (0 after a clean SIGTERM/SIGINT)."""
    from saihm.compose import initialise
    from saihm.http.limits import with_serve_limits
    from saihm.logs import configure_logging

    configure_logging(sys.stderr)
    try:
        tls = _check(args)
        context = (
            tls_context(args.tls_cert, args.tls_key)
            if tls and args.tls_cert and args.tls_key
            else None
        )
        if context is not None:
            _log_key_exchange(context)
        config = with_serve_limits(args.config(), args.limits)
        _check_store(config)
        if config.embedding_model is not None:
            from saihm.retrieval.embed import check_semantic

            check_semantic(config.embedding_model)
        created = not config.authority_public_key_file.exists()
        if created:
            initialise(config)
            config = args.config()  # now with the origin the new directory recorded
        sock = bind(args.host, args.port)
    except SaihmError as err:
        from saihm.storage.hint import with_store
        from saihm.storage.url import scrub

        store = args.store
        raise SaihmError(with_store(scrub(str(err), store), store)) from err
    except OSError as err:
        raise SaihmError(f"cannot listen on {args.host}:{args.port}: {err.strerror}") from err
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    url = f"{'https' if tls else 'http'}://{shown}:{port}/"
    _announce(args, config, url, created)
    if args.workers == 1:
        try:
            return _worker(config, sock, context, args)
        finally:
            sock.close()
    with _shared_metrics_dir():
        return _supervise(config, sock, context, args)


def _log_key_exchange(context: ssl.SSLContext) -> None:
    """Log the TLS key exchange this server negotiates (saihm-protocol: it SHOULD include a
    post-quantum or hybrid group; docs/operations.md "TLS" says how to get one)."""
    from saihm.http.tlsinfo import key_exchange

    found = key_exchange(context)
    log.info(json.dumps({"event": "tls_key_exchange", **found}))
    if found["postQuantum"] is False:
        log.warning(
            "TLS key exchange has no post-quantum or hybrid group with %s; use OpenSSL >= 3.5 "
            "or a TLS-terminating proxy that offers X25519MLKEM768 (docs/operations.md)",
            found["openssl"],
        )


@contextlib.contextmanager
def _shared_metrics_dir() -> Iterator[None]:
    """With several workers, their request metrics are summed through prometheus-client's
    multiprocess mode: a directory named by ``PROMETHEUS_MULTIPROC_DIR`` before the workers
    import prometheus-client. One the operator set is kept; one made here is removed at exit."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        yield
        return
    path = tempfile.mkdtemp(prefix="saihm-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    try:
        yield
    finally:
        del os.environ["PROMETHEUS_MULTIPROC_DIR"]
        shutil.rmtree(path, ignore_errors=True)
