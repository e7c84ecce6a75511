"""A revoked session stays revoked when its revocation record is lost at rest (issue 21, item 4).

``p_session_revocations`` is a projection, and a deleted record used to read as "not revoked"
until someone ran ``saihm verify --data``. The projection's records are now counted in a
sealed record of ``p_meta`` bound to the applied index (saihm/projections/meta.py), and the
authenticator keeps every revocation it has seen in memory (saihm/store/auth.py
``Revocations``): a deleted record is honoured by a running process and refused (fail closed)
by a restarted one, and a count that is deleted or put back from an older copy fails closed
too. The PostgreSQL forms (a deleted row, a renumbered namespace) are in
tests/multinode/test_tamper_postgres.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from saihm.errors import SaihmError
from saihm.offline.fsck import check_store
from saihm.projections import apply as PJ
from saihm.projections.meta import REVOCATIONS
from saihm.store import StaleProjections, Store

from ..support.postgres import lmdb_only
from ..support.serve import post, serving
from .damage import lmdb_raw
from .populated import Populated, clone, populate

pytestmark = lmdb_only("the attacker's edits open DATA/lmdb with lmdb.open")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Populated, Path]:
    root = tmp_path_factory.mktemp("revocations")
    p = populate(root)
    p.baseline = p.views()  # type: ignore[attr-defined]
    p.world.store.close()
    return p, root


@pytest.fixture
def p(template: tuple[Populated, Path], tmp_path: Path) -> Populated:
    """A closed copy of the populated store (its one revoked session is ``a_revoked``)."""
    copy = clone(*template, tmp_path / "copy")
    copy.baseline = template[0].baseline  # type: ignore[attr-defined]
    copy.world.store.close()
    return copy


def _delete_the_revocation(p: Populated) -> None:
    with lmdb_raw(p.world.config) as raw:
        ((key, _),) = raw.rows(PJ.REVOKED)
        raw.set(PJ.REVOKED, key, None)


def _refused(p: Populated, name: str) -> bool:
    return p.recall(name) is None


def test_a_revocation_deleted_at_rest_keeps_the_session_refused_after_reopening(p) -> None:
    """The issue's reproduction: delete the record raw, reopen, use the revoked token."""
    _delete_the_revocation(p)
    views = p.views_reopened()
    assert views["a_revoked"] is None
    for token, seen in views.items():
        assert seen is None or seen <= (p.baseline[token] or frozenset())  # type: ignore[attr-defined]
    # Fail closed, naming the repair; `saihm verify --data` names the difference.
    store = Store(p.world.config)
    try:
        with pytest.raises(StaleProjections, match=r"rebuild --data DIR --replace"):
            store.authenticate(p.tokens["bob"])
        assert any(f.database == "p_session_revocations" for f in check_store(store).findings)
    finally:
        store.storage.close()


def test_the_repair_restores_every_token_and_keeps_the_session_revoked(p, tmp_path) -> None:
    _delete_the_revocation(p)
    store = Store(p.world.config, check_applied=False)
    try:
        store.replace_projections(tmp_path / "rebuild")
    finally:
        store.storage.close()
    assert p.views_reopened() == p.baseline  # type: ignore[attr-defined]


def test_a_revocation_deleted_under_a_running_server_stays_honoured_by_it_and_by_a_second(
    p, tmp_path
) -> None:
    """Two processes: server A has seen the revocation; the record is deleted under it. A still
    refuses the token (401, the revocation is in its memory); B, started after the edit, sees
    a count the records do not match and refuses every token (503), never the revoked
    session's reads."""
    data = str(p.world.config.data_dir)
    with serving(tmp_path, "--data", data, name="a") as (_, url_a):
        assert post(url_a, p.tokens["a_revoked"], "saihm_recall", {})[0] == 401
        _delete_the_revocation(p)
        assert post(url_a, p.tokens["a_revoked"], "saihm_recall", {}) == (
            401,
            {"error": "unauthenticated"},
        )
        status, body = post(url_a, p.tokens["bob"], "saihm_recall", {})
        assert status == 200 and {c["plaintext"] for c in body} == p.baseline["bob"]  # type: ignore[attr-defined]
        with serving(tmp_path, "--data", data, name="b") as (_, url_b):
            for token in ("a_revoked", "bob"):
                status, body = post(url_b, p.tokens[token], "saihm_recall", {})
                assert status == 503, (token, status, body)
                assert body == {"error": "operator_storage_unavailable"}
    for name in ("a", "b"):
        assert "Traceback" not in (tmp_path / f"{name}.err").read_text()


def test_a_deleted_count_fails_closed_and_a_later_commit_does_not_rederive_it(p) -> None:
    """Deleting the count with the record must not pass for "no revocations", and a commit
    made afterwards (here a new revocation) must not rewrite the count from what is left."""
    _delete_the_revocation(p)
    with lmdb_raw(p.world.config) as raw:
        raw.set(PJ.META, REVOCATIONS, None)
    p.world.reopen()
    session, token = p.world.session(p.holders["bob"])
    p.world.operator.admin.revoke_session(p.holders["bob"], session)
    p.world.store.close()
    views = p.views_reopened()
    assert views["a_revoked"] is None and all(seen is None for seen in views.values())
    p.tokens["new"] = token
    assert _refused(p, "new")


def test_a_count_put_back_from_an_older_copy_fails_closed(p) -> None:
    """A rollback of the count (authentic, older applied index) with the newest revocation
    deleted: the count no longer belongs to this log's size."""
    with lmdb_raw(p.world.config) as raw:
        older = raw.get(PJ.META, REVOCATIONS)
        before = {k for k, _ in raw.rows(PJ.REVOKED)}
    p.world.reopen()
    session, token = p.world.session(p.holders["bob"])
    p.world.operator.admin.revoke_session(p.holders["bob"], session)
    p.world.store.close()
    with lmdb_raw(p.world.config) as raw:
        (newest,) = {k for k, _ in raw.rows(PJ.REVOKED)} - before
        raw.set(PJ.REVOKED, newest, None)
        raw.set(PJ.META, REVOCATIONS, older)
    p.tokens["new"] = token
    views = p.views_reopened()
    assert views["new"] is None and views["a_revoked"] is None


def test_the_count_follows_revocations_made_by_another_process(p, tmp_path) -> None:
    """Server A serves; this process revokes a session of bob's; A refuses that token on its
    next request (it re-reads the records when the sealed count grew)."""
    session, token = p.world.session(p.holders["bob"])
    data = str(p.world.config.data_dir)
    with serving(tmp_path, "--data", data, name="a") as (_, url):
        assert post(url, token, "saihm_recall", {})[0] == 200
        store = Store(p.world.config)
        try:
            from saihm.operator import Operator

            Operator(store, p.world.config).admin.revoke_session(p.holders["bob"], session)
        finally:
            store.close()
        assert post(url, token, "saihm_recall", {}) == (401, {"error": "unauthenticated"})
        assert post(url, p.tokens["bob"], "saihm_recall", {})[0] == 200


def test_a_store_refusing_for_damaged_revocations_raises_a_saihm_error(p) -> None:
    """The in-process person's access fails closed the same way (one error, no traceback)."""
    _delete_the_revocation(p)
    store = Store(p.world.config)
    try:
        with pytest.raises(SaihmError):
            store.person_access(p.holders["alice"], b"\x01" * 32)
    finally:
        store.storage.close()
