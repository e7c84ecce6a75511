"""saihm.events: event models, deterministic CBOR, identity, signing and the cell envelope.

Imports only ``saihm.errors`` and ``saihm.mldsa`` from saihm (DESIGN.md "Layers").
"""

from saihm.events.capability import Capability, CapabilityScope
from saihm.events.codec import decode, encode
from saihm.events.details import GrantDetail, ProposeDetail, VoteDetail
from saihm.events.envelope import (
    check_cell_id,
    compute_cell_id,
    decrypt,
    open_cell,
    seal,
    seal_bytes,
    verify_cell_signature,
)
from saihm.events.errors import (
    CapabilityError,
    CellIdError,
    DecodeError,
    DecryptError,
    EncodeError,
    SignatureError,
)
from saihm.events.governance import Proposal
from saihm.events.identity import AuthorityKey, HolderKey, derive_identity_key, holder_id_of
from saihm.events.models import Cell, Contract, Operation, Receipt, SealedPayload
from saihm.events.rules import check_contract_rules, check_contract_terms
from saihm.events.signing import (
    CAPABILITY_CONTEXT,
    CELL_CONTEXT,
    CONTRACT_CONTEXT,
    RECEIPT_CONTEXT,
    cell_message,
    receipt_signed_bytes,
    sign_capability,
    sign_contract,
    sign_receipt,
    verify_capability,
    verify_contract,
    verify_receipt,
)

__all__ = [
    "CAPABILITY_CONTEXT",
    "CELL_CONTEXT",
    "CONTRACT_CONTEXT",
    "RECEIPT_CONTEXT",
    "AuthorityKey",
    "Capability",
    "CapabilityError",
    "CapabilityScope",
    "Cell",
    "CellIdError",
    "Contract",
    "DecodeError",
    "DecryptError",
    "EncodeError",
    "GrantDetail",
    "HolderKey",
    "Operation",
    "Proposal",
    "ProposeDetail",
    "Receipt",
    "SealedPayload",
    "SignatureError",
    "VoteDetail",
    "cell_message",
    "check_cell_id",
    "check_contract_rules",
    "check_contract_terms",
    "compute_cell_id",
    "decode",
    "decrypt",
    "derive_identity_key",
    "encode",
    "holder_id_of",
    "open_cell",
    "receipt_signed_bytes",
    "seal",
    "seal_bytes",
    "sign_capability",
    "sign_contract",
    "sign_receipt",
    "verify_capability",
    "verify_cell_signature",
    "verify_contract",
    "verify_receipt",
]
