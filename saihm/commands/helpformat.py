"""The help formatter every saihm command line uses: each option's help states its default.

A leaf module (no saihm imports), so the audit commands can use it without importing the CLI.
"""

from __future__ import annotations

import argparse
import copy

__all__ = ["DefaultsFormatter", "default_text"]


def default_text(action: argparse.Action) -> str | None:
    """What ``(default: ...)`` says for ``action``, or None when nothing should be added."""
    if not action.option_strings or action.default is argparse.SUPPRESS:
        return None
    if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
        return None
    default = action.default
    if isinstance(action, argparse.BooleanOptionalAction):
        return f"--{action.dest.replace('_', '-')}" if default else action.option_strings[-1]
    if isinstance(action, argparse._StoreTrueAction):
        return "off" if not default else "on"
    if isinstance(action, argparse._StoreFalseAction):
        return "on" if default else "off"
    if default is None or default == []:
        return "none"
    return str(default)


class DefaultsFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``(default: ...)`` to an option's help unless the help already names its
    default (an option with no help at all gets one that states the default); keeps
    descriptions and epilogs as written."""

    def _format_action(self, action: argparse.Action) -> str:
        shown = default_text(action) if action.help is None else None
        if shown is not None:
            action = copy.copy(action)
            action.help = f"default: {shown.replace('%', '%%')}"
        return super()._format_action(action)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if not text or text is argparse.SUPPRESS or "default" in text:
            return text
        if action.required or "required" in text:
            return text if "required" in text else f"{text} (required)"
        shown = default_text(action)
        if shown is None:
            return text
        # The help is a %-format string: a literal % in the default must not be read as one.
        return f"{text} (default: {shown.replace('%', '%%')})"
