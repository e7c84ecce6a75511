"""The authority: issues capability tokens with its own key (DESIGN.md "Capabilities").

The serving process holds only the authority's public key; this package is used by the person's
tools (``saihm holder create``, ``saihm session open``, ``saihm grant``) on the authority's
machine, and by ``saihm authority serve`` (:mod:`saihm.services.authority`), which offers the
same actions as JSON calls behind an admin credential (docs/authority.md). A token cannot be
manufactured by anyone who lacks the authority's private key.
"""

from saihm.authority.authority import ISSUABLE_TOKEN_CHARS, Authority, check_token_fits

__all__ = ["ISSUABLE_TOKEN_CHARS", "Authority", "check_token_fits"]
