"""What every command family shares: the parser class, the data-directory options, the
settling of ``--store`` and ``--data`` before a command runs, and JSON output."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from saihm.commands.helpformat import DefaultsFormatter
from saihm.config import Config

__all__ = [
    "Parser",
    "Run",
    "config_from",
    "data_options",
    "emit",
    "existing_data",
    "hex32",
    "settled",
    "store_option",
    "store_url_option",
]

#: A command's handler: the parsed arguments in, the exit status out.
Run = Callable[[argparse.Namespace], int]
#: A parse that replaces the parser's own (``serve`` merges its settings this way).
ParseHook = Callable[
    [argparse.ArgumentParser, Sequence[str], argparse.Namespace | None],
    tuple[argparse.Namespace, list[str]],
]


class Parser(argparse.ArgumentParser):
    """An argument parser whose help states every option's default and whose usage errors
    are one line (exit 2), like every other error.

    ``one_line_errors=False`` keeps argparse's usage-and-error output (the audit, provider and
    publication commands have always answered so). ``routes`` maps a first word to another
    parser that parses the rest (``saihm grant revoke ...`` beside ``saihm grant --holder``).
    ``parse_hook`` replaces the parse; inside :meth:`direct` (and inside the hook itself) the
    parser parses as argparse does.
    ``help_text`` replaces the generated ``--help`` text.
    """

    def __init__(
        self,
        *args: Any,
        one_line_errors: bool = True,
        routes: Mapping[str, argparse.ArgumentParser] | None = None,
        parse_hook: ParseHook | None = None,
        help_text: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)
        self.one_line_errors = one_line_errors
        self.routes = dict(routes or {})
        self.parse_hook = parse_hook
        self.help_text = help_text
        self._hooked = False

    @contextlib.contextmanager
    def direct(self) -> Iterator[None]:
        """Parse without the hook for the duration (what the hook itself parses with)."""
        hooked, self._hooked = self._hooked, True
        try:
            yield
        finally:
            self._hooked = hooked

    def error(self, message: str) -> NoReturn:
        if not self.one_line_errors:
            super().error(message)
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def format_help(self) -> str:
        return self.help_text if self.help_text is not None else super().format_help()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        argv = list(sys.argv[1:] if args is None else args)
        if argv and argv[0] in self.routes:
            return self.routes[argv[0]].parse_known_args(argv[1:], namespace)
        if self.parse_hook is None or self._hooked:
            return super().parse_known_args(args, namespace)
        with self.direct():
            return self.parse_hook(self, argv, namespace)


def data_options(parser: argparse.ArgumentParser) -> None:
    """``--data DIR`` and where the keys live, and ``--store URL``."""
    parser.add_argument("--data", required=True, metavar="DIR", help="the data directory")
    parser.add_argument(
        "--kek-dir",
        metavar="DIR",
        help="KEK generations (default: DIR/../kek; keep it on another volume in production)",
    )
    parser.add_argument(
        "--authority-dir",
        metavar="DIR",
        help="the capability authority's key (default: DIR/../authority)",
    )
    parser.add_argument(
        "--log-keys-dir",
        metavar="DIR",
        help="the log's checkpoint signing keys (default: DIR/log-keys; keep them off the "
        "data volume in production)",
    )
    store_url_option(parser)


def store_url_option(parser: argparse.ArgumentParser) -> None:
    """``--store URL`` (DESIGN.md "Pinned additions for the second round")."""
    parser.add_argument(
        "--store",
        metavar="URL",
        help="keep the log and private state in this PostgreSQL database "
        "(postgresql://USER@HOST/DB; also $SAIHM_STORE); DIR then holds only node-local "
        "files and may be shared by the nodes of one log (default: LMDB in DIR/lmdb; "
        "docs/scaling.md)",
    )


def config_from(args: argparse.Namespace) -> Config:
    """The Config for a command's --data/--kek-dir/--authority-dir, with every other Config
    field the command has an option of the same name for (the serve policy options)."""
    paths = ("data_dir", "kek_dir", "authority_dir", "log_keys_dir")
    options = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(Config)
        if f.name not in paths and getattr(args, f.name, None) is not None
    }
    return Config.for_data(
        args.data,
        args.kek_dir,
        args.authority_dir,
        getattr(args, "log_keys_dir", None),
        **options,
    )


def store_option(args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    """Settle ``args.store`` for a command that has ``--store``: the option, else
    ``$SAIHM_STORE`` (``serve`` reads it, and its config file, through
    saihm.commands.settings), then check its form (saihm.storage.url); a bad URL is one line
    that never shows its password."""
    if not hasattr(args, "store"):
        return
    from saihm.storage.url import ENV, check_store_url

    if args.store is None and environ.get(ENV) and args.command != "migrate":
        args.store = environ[ENV]
    if args.store is not None:
        check_store_url(args.store)


def existing_data(args: argparse.Namespace) -> None:
    """Refuse a --data directory that does not exist: only ``serve`` creates one, so a typo
    cannot make a new store whose tokens the running server rejects."""
    from saihm.errors import NotFound

    data = getattr(args, "data", None)
    if data is not None and not Path(data, "authority.pub").is_file():
        what = "does not exist" if not Path(data).exists() else "is not a saihm data directory"
        raise NotFound(f"data directory {data} {what} (saihm serve --data {data} creates one)")


def settled(run: Run) -> Run:
    """``run`` after ``--store`` is settled and ``--data`` is known to exist (the operator
    commands; ``serve`` creates its directory and settles its own options)."""

    @functools.wraps(run)
    def settled_run(args: argparse.Namespace) -> int:
        store_option(args, os.environ)
        existing_data(args)
        return run(args)

    return settled_run


def emit(obj: object) -> None:
    """One JSON line on stdout."""
    print(json.dumps(obj, indent=None), flush=True)


def hex32(value: str | None, what: str) -> bytes:
    """A 64-hex id option as bytes; :class:`~saihm.errors.MalformedInput` otherwise."""
    from saihm.protocol.params import id32

    return id32(value, what=what)
