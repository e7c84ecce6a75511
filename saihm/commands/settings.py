"""``saihm serve`` settings from the command line, ``SAIHM_<OPTION>`` variables and a TOML file.

DESIGN.md "Pinned additions": every serve option is also settable as ``SAIHM_<OPTION>`` and in
the file named by ``--config FILE``. Nothing here knows the options: they are read from the
serve parser's own argparse definitions, so an option added to that parser is settable all three
ways with no further code. For an option ``--tls-cert`` the environment variable is
``SAIHM_TLS_CERT`` and the TOML key ``tls-cert``.

Precedence, highest first: the command line, the environment, the file, the option's default.
Values from the environment and the file go through the option's own argparse ``type`` and
``choices``, so they are checked exactly like the command line. An unknown key in the file, a
value of the wrong type or one the option's type refuses is :class:`SettingsError`: a one-line
message naming the key or variable.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from saihm.errors import MalformedInput

__all__ = ["CONFIG_ENV", "Setting", "SettingsError", "parse_with_settings", "settings_of"]

#: The environment variable naming the config file when ``--config`` is not given.
CONFIG_ENV = "SAIHM_CONFIG"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class SettingsError(MalformedInput):
    """A config file or environment value that cannot be used (names the key)."""


@dataclass(frozen=True)
class Setting:
    """One option as the three sources name it."""

    action: argparse.Action
    option: str  #: ``--tls-cert``
    key: str  #: ``tls-cert`` (the TOML key)
    env: str  #: ``SAIHM_TLS_CERT``

    @property
    def dest(self) -> str:
        return self.action.dest

    @property
    def is_flag(self) -> bool:
        """Takes no value on the command line (an on/off switch)."""
        return self.action.nargs == 0

    @property
    def repeatable(self) -> bool:
        return isinstance(self.action, (argparse._AppendAction, argparse._ExtendAction))


def settings_of(parser: argparse.ArgumentParser) -> list[Setting]:
    """Every option of ``parser`` that can be set from the environment or a file: each
    long option except ``--help``, ``--version`` and ``--config`` itself."""
    out = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        longs = [s for s in action.option_strings if s.startswith("--")]
        if not longs or action.dest == "config":
            continue
        option = longs[0]
        key = option[2:]
        out.append(Setting(action, option, key, "SAIHM_" + key.upper().replace("-", "_")))
    return out


def _flag_value(setting: Setting, value: object, where: str) -> object:
    """The namespace value a switch takes when the source says on (True) or off (False)."""
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            value = True
        elif lowered in _FALSE:
            value = False
    if not isinstance(value, bool):
        raise SettingsError(f"{where}: expected true or false")
    action = setting.action
    if isinstance(action, argparse.BooleanOptionalAction):
        return value
    if isinstance(action, argparse._StoreConstAction):  # store_true, store_false, store_const
        return action.const if value else action.default
    if isinstance(action, argparse._CountAction):
        return 1 if value else 0
    raise SettingsError(f"{where}: this option cannot be set here; use {setting.option}")


def _one(setting: Setting, value: object, where: str) -> object:
    """One value converted and checked as argparse would check it on the command line."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SettingsError(f"{where}: expected a {_type_name(setting)}, not {_kind(value)}")
    text = value if isinstance(value, str) else str(value)
    convert = setting.action.type
    if isinstance(convert, str):  # argparse allows a registered type name; saihm uses none
        raise SettingsError(f"{where}: {setting.option} has no converter")
    try:
        result = convert(text) if convert is not None else text
    except (TypeError, ValueError, argparse.ArgumentTypeError) as err:
        raise SettingsError(f"{where}: invalid {_type_name(setting)} value {text!r}") from err
    choices = setting.action.choices
    if choices is not None and result not in choices:
        shown = ", ".join(map(str, choices))
        raise SettingsError(f"{where}: {text!r} is not one of {shown}")
    return result


def _type_name(setting: Setting) -> str:
    convert = setting.action.type
    return getattr(convert, "__name__", "value") if convert is not None else "string"


def _kind(value: object) -> str:
    return {bool: "a boolean", list: "a list", dict: "a table"}.get(
        type(value), type(value).__name__
    )


def _value(setting: Setting, value: object, where: str) -> object:
    if setting.is_flag:
        return _flag_value(setting, value, where)
    if setting.repeatable:
        if isinstance(value, str) and value.lstrip().startswith("["):
            try:
                value = json.loads(value)
            except ValueError as err:
                raise SettingsError(f"{where}: not a JSON array of values") from err
        values = value if isinstance(value, list) else [value]
        return [_one(setting, v, where) for v in values]
    return _one(setting, value, where)


def read_file(path: str | Path, settings: list[Setting]) -> dict[str, object]:
    """The values of a TOML config file by dest; refuses keys that name no option."""
    try:
        with open(path, "rb") as handle:
            table = tomllib.load(handle)
    except FileNotFoundError as err:
        raise SettingsError(f"config file {path}: no such file") from err
    except OSError as err:
        raise SettingsError(f"config file {path}: {err.strerror}") from err
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise SettingsError(f"config file {path}: not TOML ({err})") from err
    by_key = {s.key: s for s in settings}
    out: dict[str, object] = {}
    for key, value in table.items():
        setting = by_key.get(key)
        if setting is None:
            hint = by_key.get(key.replace("_", "-"))
            extra = f" (did you mean {hint.key!r}?)" if hint else ""
            raise SettingsError(f"config file {path}: unknown key {key!r}{extra}")
        out[setting.dest] = _value(setting, value, f"config file {path}: key {key!r}")
    return out


def read_environment(environ: Mapping[str, str], settings: list[Setting]) -> dict[str, object]:
    """The values of the ``SAIHM_<OPTION>`` variables that are set, by dest.

    Other ``SAIHM_*`` variables (the MCP client's ``SAIHM_ENDPOINT_URL``, ``SAIHM_DEBUG``, ...)
    belong to other programs and are left alone.
    """
    out: dict[str, object] = {}
    for setting in settings:
        if setting.env in environ:
            out[setting.dest] = _value(setting, environ[setting.env], f"${setting.env}")
    return out


def _direct(parser: argparse.ArgumentParser) -> contextlib.AbstractContextManager[None]:
    """Parse with ``parser`` as argparse does: a :class:`saihm.commands.common.Parser`
    whose parse hook is this module's merge must not run the merge again."""
    direct = getattr(parser, "direct", None)
    return direct() if direct is not None else contextlib.nullcontext()


def parse_with_settings(
    parser: argparse.ArgumentParser, argv: list[str], environ: Mapping[str, str]
) -> argparse.Namespace:
    """Parse ``argv`` with ``parser``, taking what it leaves out from ``environ`` and the TOML
    file of ``--config`` (or ``$SAIHM_CONFIG``), then the defaults.

    An option that argparse marks required may come from any of the three sources; it is
    required only of them together. Raises :class:`SettingsError` (one line, naming the key or
    variable) for a value any source gets wrong; usage errors on the command line exit 2 as
    argparse does.
    """
    settings = settings_of(parser)
    required = [s for s in settings if s.action.required]
    for s in required:
        if s.action.help and "required" not in s.action.help:
            s.action.help += f" (required: here, as ${s.env} or as {s.key!r} in the config file)"
    for s in required:
        s.action.required = False
    try:
        with _direct(parser):
            first = parser.parse_args(argv)
    finally:
        for s in required:
            s.action.required = True
    config_path = getattr(first, "config", None) or environ.get(CONFIG_ENV)
    merged: dict[str, object] = {}
    if config_path:
        merged.update(read_file(config_path, settings))
    merged.update(read_environment(environ, settings))
    for s in settings:
        # A repeatable option given on the command line replaces, not extends, the others.
        if s.repeatable and getattr(first, s.dest, None) != s.action.default:
            merged.pop(s.dest, None)
    # argparse sets a default only for a dest the namespace does not already hold, so the
    # command line (parsed again into this namespace) overrides the environment and the file.
    namespace = argparse.Namespace(**merged)
    for s in required:
        s.action.required = False
    try:
        with _direct(parser):
            args = parser.parse_args(argv, namespace)
    finally:
        for s in required:
            s.action.required = True
    for s in required:
        if getattr(args, s.dest, None) is None:
            raise SettingsError(
                f"{s.option} is required (on the command line, as ${s.env} or as {s.key!r} "
                "in the config file)"
            )
    args.config = config_path
    return args
