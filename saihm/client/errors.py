"""The client library's one exception type (saihm-protocol "Transport requirements").

Every failure of a :class:`~saihm.client.Client` or :class:`~saihm.client.AsyncClient` call is a
:class:`ClientError`. Its message is written by the client and never carries the credential, the
userinfo, query or fragment of the endpoint, or text from the HTTP library.
"""

from __future__ import annotations

from typing import Literal

from saihm.client.advice import advice_for
from saihm.errors import SaihmError

__all__ = ["ClientError", "Kind", "Outcome"]

#: What may have happened at the operator: nothing (``not_sent``), a reported failure
#: (``failed``), or no usable answer, so it may or may not have acted (``unknown``).
Outcome = Literal["not_sent", "failed", "unknown"]

#: Why the call failed, as the client saw it.
Kind = Literal[
    "config",  # the endpoint, credential, CA file or pin cannot be used; nothing sent
    "refused",  # a check before sending refused the arguments; nothing sent
    "not_sent",  # connection or TLS handshake failed; nothing reached the operator
    "redirect",  # a 3xx answer: a failure, never followed
    "status",  # a 4xx or 5xx answer; ``operator_code`` holds its error code when clean
    "timeout",  # no complete answer within the timeout
    "too_large",  # the answer exceeded the response bound
    "disconnected",  # the connection closed before a complete answer
    "intermediary",  # a 2xx answer that is not JSON: probably a proxy or captive portal
    "malformed",  # a 2xx JSON answer that is not the tool's result shape
    "http",  # any other HTTP library error (its text is never shown)
]

_OUTCOME: dict[str, Outcome] = {
    "config": "not_sent",
    "refused": "not_sent",
    "not_sent": "not_sent",
    "redirect": "failed",
    "status": "failed",
}


class ClientError(SaihmError):
    """A call that produced no usable operator result.

    - ``code``: the operator's protocol error code (``"unauthenticated"``, ``"not_holder"``, ...)
      when the operator sent a clean one, else the client's ``kind``;
    - ``kind``: why the call failed (:data:`Kind`);
    - ``outcome``: ``"not_sent"``, ``"failed"`` or ``"unknown"`` (:data:`Outcome`);
    - ``http_status``: the HTTP status when there was one;
    - ``operator_code``: the operator's error code, or ``None``;
    - ``retry_after``: the answer's ``Retry-After`` header text, or ``None``;
    - ``attempts``: how many times the call was sent (more than 1 only after a 429 or a 503
      that the client retried, saihm/client/_retry.py).
    """

    status = 502

    def __init__(
        self,
        message: str,
        *,
        kind: Kind,
        http_status: int | None = None,
        operator_code: str | None = None,
        retry_after: str | None = None,
    ) -> None:
        super().__init__(message, code=operator_code or kind)
        self.kind: Kind = kind
        self.outcome: Outcome = _OUTCOME.get(kind, "unknown")
        self.http_status = http_status
        self.operator_code = operator_code
        self.retry_after = retry_after
        self.attempts = 1
        #: A mistake in the client's own configuration seen behind this answer (advice.py).
        self.fix: str | None = None

    @property
    def advice(self) -> str | None:
        """For a 401 or 403: the likely cause and the command that fixes it (no credential)."""
        if self.kind != "status":
            return None
        return self.fix or advice_for(self.http_status, self.operator_code)

    def __repr__(self) -> str:
        return f"ClientError({str(self)!r}, code={self.code!r}, http_status={self.http_status!r})"
