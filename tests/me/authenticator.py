"""A software WebAuthn authenticator for tests: real ES256 keys and real attestation and
assertion bytes (CBOR by cbor2, signatures by cryptography), so the operator's py_webauthn
checks run on what a browser would send."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import struct
from dataclasses import dataclass, field
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

UP, UV, AT = 0x01, 0x04, 0x40


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Passkey:
    credential_id: bytes
    key: ec.EllipticCurvePrivateKey
    rp_id: str
    user_handle: bytes
    counter: int = 0


@dataclass
class Authenticator:
    """Holds passkeys; ``create`` and ``get`` answer as ``navigator.credentials`` would (the
    JSON a page sends: base64url fields)."""

    origin: str
    passkeys: list[Passkey] = field(default_factory=list)

    def create(
        self,
        options: dict[str, Any],
        *,
        origin: str | None = None,
        uv: bool = True,
        reuse: Passkey | None = None,
    ) -> dict[str, Any]:
        """A new passkey (or, with ``reuse``, an attestation of an existing one)."""
        rp_id = options["rp"]["id"]
        key = reuse.key if reuse else ec.generate_private_key(ec.SECP256R1())
        numbers = key.public_key().public_numbers()
        cose = {
            1: 2,
            3: -7,
            -1: 1,
            -2: numbers.x.to_bytes(32, "big"),
            -3: numbers.y.to_bytes(32, "big"),
        }
        credential_id = reuse.credential_id if reuse else secrets.token_bytes(16)
        attested = bytes(16) + struct.pack(">H", len(credential_id)) + credential_id
        auth_data = (
            hashlib.sha256(rp_id.encode()).digest()
            + bytes([UP | (UV if uv else 0) | AT])
            + struct.pack(">I", 0)
            + attested
            + cbor2.dumps(cose)
        )
        client_data = json.dumps(
            {
                "type": "webauthn.create",
                "challenge": options["challenge"],
                "origin": origin or self.origin,
                "crossOrigin": False,
            }
        ).encode()
        self.passkeys.append(Passkey(credential_id, key, rp_id, unb64(options["user"]["id"])))
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return {
            "id": b64(credential_id),
            "rawId": b64(credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64(client_data),
                "attestationObject": b64(attestation),
                "transports": ["internal"],
            },
            "clientExtensionResults": {},
        }

    def get(
        self,
        options: dict[str, Any],
        *,
        passkey: Passkey | None = None,
        origin: str | None = None,
        uv: bool = True,
        counter: int | None = None,
    ) -> dict[str, Any]:
        chosen = passkey or self.passkeys[-1]
        chosen.counter = chosen.counter + 1 if counter is None else counter
        auth_data = (
            hashlib.sha256(options.get("rpId", chosen.rp_id).encode()).digest()
            + bytes([UP | (UV if uv else 0)])
            + struct.pack(">I", chosen.counter)
        )
        client_data = json.dumps(
            {
                "type": "webauthn.get",
                "challenge": options["challenge"],
                "origin": origin or self.origin,
                "crossOrigin": False,
            }
        ).encode()
        signature = chosen.key.sign(
            auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256())
        )
        return {
            "id": b64(chosen.credential_id),
            "rawId": b64(chosen.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64(client_data),
                "authenticatorData": b64(auth_data),
                "signature": b64(signature),
                "userHandle": b64(chosen.user_handle),
            },
            "clientExtensionResults": {},
        }
