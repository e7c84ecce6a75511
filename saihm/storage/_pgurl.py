"""A PostgreSQL URL made safe to show (the password removed, wherever the URL carried it),
and the server settings its ``options`` parameter sets."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

__all__ = ["options_settings", "safe_location"]

# One setting of libpq's ``options`` (the server's command line): ``-c NAME=VALUE``,
# ``-cNAME=VALUE`` or ``--NAME=VALUE``, at the start or after white space.
_OPTION = re.compile(r"(?:^|(?<=\s))(?:-c\s*|--)([A-Za-z_][-\w.]*)=")

# libpq parameters whose values are secrets (a URL may carry them in its query).
_SECRET_PARAMS = frozenset({"password", "sslpassword"})


def safe_location(url: str) -> tuple[str, tuple[str, ...]]:
    """``(location, secrets)``: ``url`` without its password (in the user part or the query),
    and the secret strings themselves (raw and percent-decoded), so a message can be scrubbed
    of them. A URL that does not parse is shown as its scheme alone."""
    secrets: list[str] = []
    try:
        parts = urlsplit(url)
        userinfo, at, hosts = parts.netloc.rpartition("@")
        if at:
            user, colon, password = userinfo.partition(":")
            if colon and password:
                secrets += [password, unquote(password)]
            netloc = f"{user}@{hosts}" if user else hosts
        else:
            netloc = hosts
        kept = []
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if name in _SECRET_PARAMS:
                if value:
                    secrets += [value, quote(value, safe="")]
                continue
            kept.append((name, value))
        query = urlencode(kept, quote_via=quote, safe="=-,")
        # Built by hand: urlunsplit drops the empty host of ``postgresql:///db?host=/socket``.
        location = f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
    except ValueError:
        return url.partition(":")[0] + "://(unparsable URL)", (url,)
    return location, tuple(sorted({s for s in secrets if s}, key=len, reverse=True))


def options_settings(options: str) -> frozenset[str]:
    """The names of the server settings that libpq's ``options`` string sets (lower case,
    ``-`` read as ``_``, as the server reads them), e.g. ``{"search_path", "lock_timeout"}``
    for ``-c search_path=s -c lock_timeout=1s``."""
    return frozenset(m.group(1).lower().replace("-", "_") for m in _OPTION.finditer(options))
