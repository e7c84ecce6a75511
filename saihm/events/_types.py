"""Constrained field types and the strict map reader shared by the event models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from saihm.events.codec import U64_MAX as U64_MAX
from saihm.events.codec import decode, decode_authenticated
from saihm.events.errors import DecodeError, InvalidValue
from saihm.mldsa import MLDSA65_PUBLIC_KEY_SIZE, MLDSA65_SIGNATURE_SIZE

U32_MAX = 2**32 - 1
#: The configuration of every event model: immutable, and no field beyond the declared ones.
FROZEN = ConfigDict(frozen=True, extra="forbid")

Id32 = Annotated[bytes, Strict(), Field(min_length=32, max_length=32)]
Nonce16 = Annotated[bytes, Strict(), Field(min_length=16, max_length=16)]
Signature65 = Annotated[
    bytes, Strict(), Field(min_length=MLDSA65_SIGNATURE_SIZE, max_length=MLDSA65_SIGNATURE_SIZE)
]
PublicKey65 = Annotated[
    bytes, Strict(), Field(min_length=MLDSA65_PUBLIC_KEY_SIZE, max_length=MLDSA65_PUBLIC_KEY_SIZE)
]
U64 = Annotated[int, Strict(), Field(ge=0, le=U64_MAX)]
U32 = Annotated[int, Strict(), Field(ge=0, le=U32_MAX)]
Text = Annotated[str, Strict()]
#: A short printable-ASCII name (storage tier, capability consumer).
Name = Annotated[str, Strict(), Field(min_length=1, max_length=64, pattern=r"^[\x21-\x7e]+$")]


def read_map(
    data: bytes,
    what: str,
    required: set[Any],
    optional: frozenset[Any] = frozenset(),
    *,
    authenticated: bool = False,
) -> dict[Any, Any]:
    """Decode ``data`` as a CBOR map whose keys are exactly ``required`` plus some of ``optional``.

    ``authenticated=True`` uses :func:`decode_authenticated` (see its precondition). Raises
    ``DecodeError`` naming ``what`` and the first rule broken.
    """
    obj = decode_authenticated(data) if authenticated else decode(data)
    return check_map(obj, what, required, optional)


def check_map(
    obj: Any, what: str, required: set[Any], optional: frozenset[Any] = frozenset()
) -> dict[Any, Any]:
    """Check an already decoded map's key set; see ``read_map``."""
    if not isinstance(obj, dict):
        raise DecodeError(f"{what}: expected a CBOR map")
    keys = set(obj)
    missing = required - keys
    if missing:
        raise DecodeError(f"{what}: missing key {sorted(missing, key=repr)[0]!r}")
    unknown = keys - required - optional
    if unknown:
        raise DecodeError(f"{what}: unknown key {sorted(unknown, key=repr)[0]!r}")
    return obj


class Record(BaseModel):
    """The base of every event model: frozen, no extra fields, and one error root.

    Constructing a model from values that do not fit raises ``InvalidValue`` (a
    ``MalformedInput``) naming the first bad field, never pydantic's ``ValidationError``.
    """

    model_config = FROZEN

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ())) or "value"
            raise InvalidValue(type(self).__name__, loc, first.get("msg", "invalid")) from err
        except TypeError as err:
            # pydantic validates a nested model from a dict through this __init__: keys that are
            # not field names (not even strings) fail in the call itself.
            raise InvalidValue(type(self).__name__, "value", "not a map of field names") from err


_Model = TypeVar("_Model")


def build(model: Callable[..., _Model], what: str, **fields: Any) -> _Model:
    """Construct ``model`` from decoded fields, turning validation failures into ``DecodeError``."""
    try:
        return model(**fields)
    except InvalidValue as err:
        raise DecodeError(f"{what}: field {err.field}: {err.reason}") from err


Bool = Annotated[bool, Strict()]


def need(obj: Any, kind: type, what: str) -> Any:
    """Return ``obj`` if its type is exactly ``kind``; raise ``DecodeError`` otherwise."""
    if type(obj) is not kind:
        raise DecodeError(f"{what}: expected {kind.__name__}")
    return obj
