"""The verification report: what was checked, and every failure with the leaf it concerns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum

__all__ = ["UNPINNED_RESULT", "Alarm", "AlarmKind", "Failure", "Report"]

#: The verdict when every check held but the checkpoint keys were not pinned with --trust.
UNPINNED_RESULT = (
    "RESULT: OK — every check held, but the checkpoint keys were NOT pinned (give --trust KEYFILE)"
)


@dataclass(frozen=True)
class Failure:
    """One failed check. ``index`` is the leaf concerned, when one can be named."""

    check: str
    what: str
    index: int | None = None
    database: str | None = None  # private-state findings (saihm/offline/fsck.py) name a database
    key: str | None = None  # ... and a key (hex)

    def __str__(self) -> str:
        where = f"leaf {self.index}: " if self.index is not None else ""
        if self.database is not None:
            where += f"{self.database} {(self.key or '')[:64]}: "
        return f"[{self.check}] {where}{self.what}"


class AlarmKind(StrEnum):
    """What an :class:`Alarm` is: a stable code, printed before its detail and used by ``saihm
    verify`` as the name of the failed check. docs/operations.md "Alarms" lists every one."""

    #: A checkpoint smaller than one held (or once seen).
    ROLLBACK = "rollback"
    #: Two roots signed for one size, or entries that do not extend the held tree.
    FORK = "fork"
    #: A checkpoint whose signature does not verify against the keys in use.
    BAD_SIGNATURE = "bad signature"
    #: Entries that do not hash to the root their checkpoint signs.
    ROOT = "root"
    #: A mirror directory whose tiles no longer give the roots of the checkpoints it holds.
    INCONSISTENT = "inconsistent"
    #: Entries beyond the (witnessed) checkpoint that stop advancing past ``--max-stale``.
    STALE = "stale"
    #: Too few of the given witnesses cosigned the newest witnessed checkpoint.
    WITNESSES = "witnesses"
    #: The log could not be read: it did not answer, or its answer could not be parsed (the
    #: detail starts "unreachable or malformed answer", the prose this kind was before).
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class Alarm:
    """A finding that stops a run and adopts nothing: ``kind`` names it (an
    :class:`AlarmKind`), ``detail`` says what was seen. Rendered ``kind: detail``; ``saihm
    verify`` reports it as a failure of check ``kind``."""

    kind: AlarmKind
    detail: str

    def __post_init__(self) -> None:
        # A kind outside the enum (free prose) is a programming error: raise ValueError here
        # rather than print a kind no document lists.
        object.__setattr__(self, "kind", AlarmKind(self.kind))

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


@dataclass
class Report:
    """Counts of what held, the failures in check order, and notes for the reader."""

    source: str = ""
    origin: str = ""
    leaves: int = 0
    receipts: int = 0
    signatures: int = 0
    second_implementation: bool = False
    checkpoints: int = 0
    consistency_proofs: int = 0
    held_checkpoints: int = 0
    keys_pinned: bool = False
    erasures: int = 0
    proposals: int = 0
    cells: int = 0
    contracts: int = 0
    latest_size: int = 0
    person: bool = False  # a person's export (the bundle's person member) was checked
    person_memories: int = 0  # ... its memories that passed every check
    inclusion_proofs: int = 0  # ... its receipts proven in the signed checkpoint
    private: dict | None = None  # what the private-state check covered (verify --data)
    private_unchecked: str | None = None  # why the private-state check could not run
    notes: list[str] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True only when every check held."""
        return not self.failures

    def fail(
        self,
        check: str,
        what: str,
        index: int | None = None,
        *,
        database: str | None = None,
        key: str | None = None,
    ) -> None:
        """Record a failure."""
        self.failures.append(Failure(check, what, index, database, key))

    def to_json(self) -> dict:
        """A JSON-ready form (failures as objects, first failure first)."""
        out = asdict(self)
        # database and key appear only on private-state findings (verify --data).
        for failure in out["failures"]:
            for name in ("database", "key"):
                if failure[name] is None:
                    del failure[name]
        out["ok"] = self.ok
        return out

    def render(self) -> str:
        """The human report: one line per check, then the verdict and the first failures."""
        pinned = (
            "pinned (--trust)"
            if self.keys_pinned
            else ("NOT independently pinned: the log's own keys were used")
        )
        second = ", re-verified with pqcrypto" if self.second_implementation else ""
        lines = [
            f"saihm verify {self.source}",
            f"  origin            {self.origin}",
            f"  leaves            {self.leaves}",
            f"  receipts          {self.receipts} strictly encoded with valid ids; "
            f"{self.signatures} ML-DSA-65 signatures checked{second}",
            f"  checkpoint keys   {pinned}",
            f"  checkpoints       {self.checkpoints} signatures and roots recomputed from the "
            f"leaves; {self.consistency_proofs} consistency proofs (latest size "
            f"{self.latest_size})",
            f"  held checkpoints  {self.held_checkpoints}",
            f"  erasure list      {self.erasures} cells, rebuilt from FORGET receipts",
            f"  tallies           {self.proposals} proposals, rebuilt from VOTE receipts",
            f"  cells             {self.cells} cells, {self.contracts} contracts checked",
        ]
        if self.person:
            # A person's export has no leaves of its own: its receipts are proven by inclusion.
            lines = [
                *lines[:2],
                lines[3],
                lines[4],
                f"  checkpoint        {self.checkpoints} signature(s) checked (size "
                f"{self.latest_size})",
                f"  inclusion         {self.inclusion_proofs} receipts proven in the signed "
                "checkpoint's tree (RFC 9162)",
                f"  person export     {self.person_memories} memories: each plaintext's sealed "
                "length, signed cell and REMEMBER receipt (not that the ciphertext decrypts to "
                "it: docs/formats.md 5.1)",
            ]
        if self.private is not None:
            p = self.private
            lines.append(
                f"  private state     {p.get('live_cells', 0)} live and {p.get('erased_cells', 0)}"
                f" erased cells, {p.get('holders', 0)} holder seeds, {p.get('pending', 0)} "
                f"pending proposals, {p.get('projection_records', 0)} MAC-bound records; "
                "projections and tiles rebuilt from the log and compared"
            )
        lines += [f"  note: {n}" for n in self.notes]
        if self.ok and self.private_unchecked is not None:
            pinned = "" if self.keys_pinned else " and the checkpoint keys were NOT pinned"
            lines.append(
                f"RESULT: OK — the public checks held, but the private state was NOT checked "
                f"({self.private_unchecked}){pinned}"
            )
        elif self.ok and self.keys_pinned:
            lines.append("RESULT: OK — every check held")
        elif self.ok:
            # Without pinned keys the checkpoints were checked against keys the operator
            # supplied, which proves consistency, not which log this is.
            lines.append(UNPINNED_RESULT)
        else:
            lines.append(
                f"RESULT: FAILED — {len(self.failures)} failure(s); first: {self.failures[0]}"
            )
            lines += [f"  {f}" for f in self.failures[:20]]
            if len(self.failures) > 20:
                lines.append(f"  ... and {len(self.failures) - 20} more")
        return "\n".join(lines)
