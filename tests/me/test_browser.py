"""The person's page (``/me/``) in headless Chromium against a real ``saihm serve`` beside
``saihm authority serve``, with a virtual authenticator (the DevTools WebAuthn domain).

Each test enrols a passkey from a person link (or signs in with one) and drives the page as the
person would, asserts what it shows, then checks the operator's side through the ordinary API.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tests.me.conftest import WAIT_MS, enrol, saihm, sign_in
from tests.support.serve import fetch, holder_create, post


def _cards(page) -> list[str]:
    return page.eval_on_selector_all(
        "#memory-list article.memory", "els => els.map(e => e.dataset.cellId)"
    )


def _person(world, path, body=None):
    headers = {"Authorization": f"Bearer {world.person_token}", "Origin": world.origin}
    data = None if body is None else json.dumps(body).encode()
    status, raw = fetch(world.url + path, data=data, headers=headers)
    return status, json.loads(raw)


def _passed(page, selector: str) -> None:
    page.wait_for_function(
        f"() => document.querySelector({selector!r})?.dataset.result === 'pass'",
        timeout=WAIT_MS,
    )


def test_a_link_enrols_a_passkey_that_signs_in_later(page, world, shots):
    link = world.person_link()
    page.goto(link)
    page.wait_for_selector("body[data-ready=signed-out]", timeout=WAIT_MS)
    assert "#enrol=" not in page.url  # the one-time code left the address at once
    assert page.locator("#enrol-box").is_visible()
    shots.take(page, "me-enrol")
    page.click("#enrol")
    page.wait_for_selector("body[data-ready=yes]", timeout=WAIT_MS)
    assert "passkey is made" in page.inner_text("#signin-result")
    assert page.locator("#passkeys-body li[data-passkey]").count() >= 1
    page.click("#signout")
    page.wait_for_function("() => document.body.dataset.ready === 'signed-out'", timeout=WAIT_MS)
    assert page.locator("#main").is_hidden()
    # the link is spent: opened again, it enrols nothing
    page.goto(link)
    page.wait_for_selector("body[data-ready=signed-out]", timeout=WAIT_MS)
    page.click("#enrol")
    page.wait_for_selector("body[data-ready=failed]", timeout=WAIT_MS)
    assert "used or expired" in page.inner_text("#signin-result")
    sign_in(page, world)
    assert page.get_attribute("body", "data-ready") == "yes"
    assert "Signed in with your passkey" in page.inner_text("#signin-result")
    shots.take(page, "me-signin", "header")


def test_every_session_newest_first(page, world, shots):
    enrol(page, world)
    shown = _cards(page)
    assert {world.cells["tea"], world.cells["other"]} <= set(shown)
    stamps = page.eval_on_selector_all(
        "#memory-list article.memory", "els => els.map(e => e.dataset.cellId)"
    )
    status, items = _person(world, "me/v1/call", {"method": "saihm_recall", "params": {}})
    assert status == 200
    when = {i["cellId"]: int(i["timestamp"]) for i in items}
    times = [when[c] for c in stamps]
    assert times == sorted(times, reverse=True)  # newest first, as the page says
    assert "newest first" in page.inner_text("#memory-list .note")
    shots.take(page, "me-memories")
    shots.take(page, "me-activity", "#activity")


def test_search_shows_the_same_ranking_as_recall(page, world):
    enrol(page, world)
    page.fill("#query", "tea morning sailing")
    page.click("#recall-form button[type=submit]")
    page.wait_for_function(
        "() => document.querySelector('#memory-list .note')?.textContent.includes('best match')",
        timeout=WAIT_MS,
    )
    params = {"query": "tea morning sailing", "limit": 20}
    status, ranked = _person(world, "me/v1/call", {"method": "saihm_recall", "params": params})
    assert status == 200
    assert _cards(page) == [item["cellId"] for item in ranked]
    assert _cards(page)[0] in (world.cells["tea"], world.cells["other"])


def test_kind_filter_narrows_to_records(page, world):
    enrol(page, world)
    for kind in ("memory", "did", "end"):
        page.uncheck(f"#recall-form input[value={kind}]")
    page.click("#recall-form button[type=submit]")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#memory-list article.memory')]"
        ".every(e => e.dataset.kind === 'said') && "
        "document.querySelectorAll('#memory-list article.memory').length > 0",
        timeout=WAIT_MS,
    )
    assert world.plaintexts["said"] in page.inner_text("#memory-list")


_PLANT = """
import sys
import saihm.operator.memory as memory
from saihm.compose import open_operator
from saihm.config import Config

memory.check_namespace = lambda value: value  # the rule did not exist when this was written
operator = open_operator(Config.for_data(sys.argv[1]), checkpointer=False)
access = operator.store.authenticate(sys.stdin.read())
print(operator.memory.remember(access, "a legacy label", namespace=sys.argv[2]).cell_id.hex())
operator.store.close()
"""


def _plant_legacy_label(world, namespace: str) -> str:
    """A cell with ``namespace`` remembered in-process below the namespace rule; its cellId."""
    done = subprocess.run(
        [sys.executable, "-c", _PLANT, str(world.data), namespace],
        input=world.session_token,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def test_hostile_content_and_namespace_labels_render_as_marked_text(page, world, shots):
    # Such a label can no longer enter (400 bad_namespace: saihm.names); one written before the
    # rule existed is planted below it, in its own process on the served data directory.
    status, refused = post(
        world.url,
        world.session_token,
        "saihm_remember",
        {"content": "a legacy label", "namespace": "notes\u202eevil\u200b"},
    )
    assert (status, refused) == (400, {"error": "bad_namespace"})
    legacy = {"cellId": _plant_legacy_label(world, "notes\u202eevil\u200b")}
    enrol(page, world)
    card = page.locator(f"article.memory[data-cell-id='{world.cells['hostile']}']")
    shown = card.locator(".content").inner_text()
    assert "<script>document.title='owned'</script>" in shown and "<img src=x" in shown
    assert "[U+202E]" in shown and "[U+2066]" in shown  # bidi controls made visible
    assert "\u202e" not in shown and "\u2066" not in shown
    assert page.locator("#memory-list img, #memory-list script").count() == 0
    assert page.title() != "owned"
    label = page.locator(f"article.memory[data-cell-id='{legacy['cellId']}'] .namespace")
    assert label.get_attribute("data-marked") == "yes"
    assert label.inner_text() == "notes[U+202E]evil[U+200B]"
    shots.take(page, "me-hostile", f"article.memory[data-cell-id='{world.cells['hostile']}']")


def test_add_and_edit_a_memory(page, world, shots):
    enrol(page, world)
    page.click("#add-box summary")
    page.fill("#add-content", "lives in Oslo")
    page.click("#add-form button[type=submit]")
    _passed(page, "#add-result")
    card = page.locator("#memory-list article.memory", has_text="lives in Oslo")
    old = card.get_attribute("data-cell-id")
    assert "added by you" in card.locator(".meta").inner_text()
    card.locator("button.edit").click()
    card.locator("textarea.edit-content").fill("moved to Bergen")
    shots.take(page, "me-edit", f"article.memory[data-cell-id='{old}']")
    card.locator("button.save-edit").click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('#memory-list .content')]"
        ".some(e => e.textContent === 'moved to Bergen')",
        timeout=WAIT_MS,
    )
    assert "lives in Oslo" not in page.inner_text("#memory-list")
    status, erased = fetch(world.url + "log/v1/erasures")
    assert status == 200 and old in json.loads(erased)["cellIds"]
    assert page.locator(f"article.memory[data-cell-id='{old}']").count() == 0
    new = page.locator("#memory-list article.memory", has_text="moved to Bergen")
    new.locator("button.history").click()
    earlier = new.locator(f"li.replaced[data-replaced='{old}']")
    earlier.wait_for(timeout=WAIT_MS)
    assert "Replaced an earlier version" in earlier.inner_text()
    ops = earlier.locator("li").evaluate_all("els => els.map(e => e.dataset.operation)")
    assert ops == ["REMEMBER", "FORGET"]  # the old version's own receipts
    shots.take(page, "me-edit-history", "#memory-list article.memory >> nth=0")


def test_forget_with_confirmation_shows_the_erasure_verified(page, world, shots):
    cell = world.remember(world.session_token, "forget this one please")
    enrol(page, world)
    card = page.locator(f"article.memory[data-cell-id='{cell}']")
    card.locator("button.forget").click()
    assert card.locator(".confirm").is_visible()  # nothing happens before the person confirms
    status, erased = fetch(world.url + "log/v1/erasures")
    assert cell not in json.loads(erased)["cellIds"]
    card.locator("button.confirm-forget").click()
    check = card.locator("[data-check=erasure]")
    check.locator("xpath=self::*[@data-result='pass' or @data-result='fail']").wait_for(
        timeout=WAIT_MS
    )
    assert check.get_attribute("data-result") == "pass", check.inner_text()
    assert "VERIFIED" in check.inner_text() and "erasure list" in check.inner_text()
    assert card.get_attribute("data-state") == "forgotten"
    status, erased = fetch(world.url + "log/v1/erasures")
    assert status == 200 and cell in json.loads(erased)["cellIds"]
    card.locator("button.history").click()
    card.locator("ul.history li[data-operation=FORGET]").wait_for(timeout=WAIT_MS)
    ops = card.locator("ul.history li").evaluate_all("els => els.map(e => e.dataset.operation)")
    assert ops[0] == "REMEMBER" and "FORGET" in ops
    shots.take(page, "me-forget", f"article.memory[data-cell-id='{cell}']")


def test_bulk_forget_proves_each(page, world, shots):
    cells = [world.remember(world.session_token, f"bulk note {i}") for i in range(3)]
    enrol(page, world)
    for cell in cells[:2]:
        page.locator(f"article.memory[data-cell-id='{cell}'] input.select").check()
    assert page.inner_text("#bulk-count") == "2 selected"
    page.click("#bulk-forget")
    shots.take(page, "me-bulk-confirm", "#memories")
    page.click("button.confirm-bulk")
    _passed(page, "#bulk-out")
    for cell in cells[:2]:
        check = page.locator(f"article.memory[data-cell-id='{cell}'] [data-check=erasure]")
        assert check.get_attribute("data-result") == "pass"
    status, erased = fetch(world.url + "log/v1/erasures")
    assert status == 200
    gone = json.loads(erased)["cellIds"]
    assert cells[0] in gone and cells[1] in gone and cells[2] not in gone


def test_name_then_revoke_a_grant_after_confirming(page, world, shots):
    status, _ = post(world.url, world.agent_token, "saihm_recall", {"limit": 1})
    assert status == 200
    enrol(page, world)
    row = page.locator(f"#sharing-body li[data-grant='{world.agent_grant}']")
    assert "unnamed agent" in row.inner_text() and "all your memories" in row.inner_text()
    # what it read, from the operator's own record (the public log names the holder only)
    assert "Last read" in row.inner_text() and "1 read in all, 1 item" in row.inner_text()
    helper = page.locator(f"#sharing-body li[data-grant='{world.person_grant}']")
    assert "No read seen by this operator yet" in helper.inner_text()
    consumer = page.locator("#sharing-body li[data-grant]", has_text="“cursor”")
    assert "notes" in consumer.inner_text()
    row.locator("button.name-grant").click()
    row.locator("input.grant-label").fill("Travel agent")
    row.locator("button.save-name").click()
    _passed(page, "#sharing-body .status")
    row = page.locator(f"#sharing-body li[data-grant='{world.agent_grant}']")
    assert "“Travel agent”" in row.inner_text()
    shots.take(page, "me-sharing", "#sharing")
    row.locator("button.revoke-grant").click()
    assert "Revoke “Travel agent”?" in row.locator(".confirm").inner_text()
    assert post(world.url, world.agent_token, "saihm_recall", {"limit": 1})[0] == 200
    shots.take(page, "me-revoke-confirm", f"#sharing-body li[data-grant='{world.agent_grant}']")
    row.locator("button.confirm-revoke-grant").click()
    page.wait_for_function(
        "() => document.querySelector('#sharing-body .status')?.textContent.includes('Revoked')",
        timeout=WAIT_MS,
    )
    assert page.locator(f"#sharing-body li[data-grant='{world.agent_grant}']").count() == 0
    status, answer = post(world.url, world.agent_token, "saihm_recall", {"limit": 1})
    assert (status, answer) == (401, {"error": "unauthenticated"})
    assert post(world.url, world.helper_token, "saihm_recall", {"limit": 1})[0] == 200


def test_accepting_a_pending_proposal_makes_it_a_memory_shown_as_text(page, world, shots):
    enrol(page, world)
    item = page.locator(f"#pending-body li[data-proposal='{world.proposal_id}']")
    assert "fact: " + world.proposal_text in item.inner_text() and "cursor" in item.inner_text()
    shots.take(page, "me-pending", "#pending")
    item.locator("button.accept-proposal").click()
    _passed(page, "#pending-body .status")
    assert page.locator(f"#pending-body li[data-proposal='{world.proposal_id}']").count() == 0
    status, answer = _person(world, "me/v1/pending")
    assert status == 200 and answer == {"pending": []}
    shows = f"includes('{world.proposal_text}')"
    page.wait_for_function(
        f"() => document.querySelector('#memory-list').textContent.{shows}", timeout=WAIT_MS
    )
    card = page.locator("#memory-list article.memory", has_text=world.proposal_text)
    text = card.locator(".content").inner_text()
    assert "fact: " + world.proposal_text in text and "{" not in text  # words, not raw JSON
    assert card.locator("details.structure").count() == 1  # the structure beside it
    shots.take(page, "me-accepted", "#memories")


def test_activity_counts_receipts_by_day_and_operation(page, world):
    enrol(page, world)
    status, raw = fetch(world.url + f"log/v1/receipts?holderId={world.holder_id}&limit=1000")
    assert status == 200
    receipts = json.loads(raw)["receipts"]
    remembers = sum(e["receipt"]["operation"] == "REMEMBER" for e in receipts)
    cells = page.locator("#activity-body td[data-operation=REMEMBER]")
    shown = sum(int(t or 0) for t in cells.all_inner_texts())
    assert shown == remembers > 0


def test_a_removed_passkey_no_longer_signs_in(page, world, shots):
    enrol(page, world)
    row = page.locator("#passkeys-body li[data-passkey]", has_text="this sign-in")
    row.locator("button.remove-passkey").click()
    shots.take(page, "me-passkeys", "#passkeys")
    row.locator("button.confirm-remove-passkey").click()
    page.wait_for_function("() => document.body.dataset.ready === 'signed-out'", timeout=WAIT_MS)
    page.click("#signin")
    page.wait_for_selector("body[data-ready=failed]", timeout=WAIT_MS)
    assert "not accepted" in page.inner_text("#signin-result")
    assert page.locator("#main").is_hidden()


def test_export_downloads_a_file_that_verifies_offline(page, world, shots, tmp_path):
    import subprocess

    from saihm.audit.bundle import read_bundle
    from tests.support.serve import SAIHM

    enrol(page, world)
    urls: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    page.click("#export-box summary")
    with page.expect_download(timeout=WAIT_MS) as download:
        page.click("#export")
    path = tmp_path / download.value.suggested_filename
    download.value.save_as(path)
    _passed(page, "#export-result")
    assert path.name.startswith("saihm-memory-") and path.suffix == ".saihm"
    shots.take(page, "me-export", "#export-box")
    assert all(world.person_token not in u for u in urls)  # the token never rode in a URL
    bundle = read_bundle(path)
    assert bundle.person is not None
    texts = {m.plaintext for m in bundle.person.memories}
    assert world.plaintexts["tea"] in texts and world.plaintexts["other"] in texts
    done = subprocess.run(
        [SAIHM, "verify", str(path), "--no-progress"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "person export" in done.stdout


def test_no_secret_in_urls_storage_or_server_logs(browser, world):
    from tests.me.conftest import add_authenticator

    context = browser.new_context()
    try:
        tab = context.new_page()
        add_authenticator(tab)
        urls: list[str] = []
        tab.on("request", lambda request: urls.append(request.url))
        link = world.person_link()
        code = link.split("#enrol=", 1)[1]
        tab.goto(link)
        tab.wait_for_selector("body[data-ready=signed-out]", timeout=WAIT_MS)
        tab.click("#enrol")
        tab.wait_for_selector("body[data-ready=yes]", timeout=WAIT_MS)
        tab.fill("#query", "tea")
        tab.click("#recall-form button[type=submit]")
        tab.wait_for_selector("#memory-list article.memory", timeout=WAIT_MS)
        stored = tab.evaluate(
            "() => [localStorage.length, sessionStorage.length, document.cookie, location.href,"
            " history.length]"
        )
        assert stored[:3] == [0, 0, ""]
        assert code not in stored[3]
        assert context.cookies() == []
        state = json.dumps(context.storage_state())
        page_html = tab.content()
    finally:
        context.close()
    assert urls and all(world.page_url in u for u in urls)
    assert all(code not in u for u in urls)  # the fragment never went to the server
    assert code not in state and code not in page_html
    for token in world.tokens():
        assert all(token not in u for u in urls)
        assert token not in state and token not in page_html
    logs = world.server_output()
    assert "/me/" in logs  # the access log is there, and it is what we search
    for secret in [*world.tokens(), *world.plaintexts.values(), world.proposal_text, code]:
        assert secret not in logs


def test_a_long_list_shows_twenty_then_more(page, world):
    fresh = saihm(world.data, "session", "open", "--holder", world.holder_id)
    for i in range(25):
        world.remember(fresh["token"], f"paging note {i}")
    enrol(page, world)
    assert len(_cards(page)) == 20
    more = page.locator("#memory-more")
    assert more.is_visible()
    status, items = _person(world, "me/v1/call", {"method": "saihm_recall", "params": {}})
    assert status == 200
    count = "document.querySelectorAll('#memory-list article.memory').length"
    more.click()
    page.wait_for_function(f"() => {count} === {min(len(items), 40)}", timeout=WAIT_MS)
    texts = page.locator("#memory-list .content").all_inner_texts()
    assert [t for t in texts if t.startswith("paging note")] == [
        f"paging note {i}" for i in reversed(range(25))
    ]


def test_the_namespace_filter_narrows_the_list(page, world):
    fresh = saihm(world.data, "session", "open", "--holder", world.holder_id)
    status, _ = post(
        world.url, fresh["token"], "saihm_remember", {"content": "in work", "namespace": "work"}
    )
    assert status == 200
    enrol(page, world)
    page.fill("#namespaces", "work")
    page.click("#recall-form button[type=submit]")
    page.wait_for_function(
        "() => document.querySelectorAll('#memory-list article.memory').length === 1",
        timeout=WAIT_MS,
    )
    assert page.inner_text("#memory-list .content") == "in work"


def test_sharing_in_plain_words_with_accept_and_stop(page, world, shots):
    sharer = holder_create(world.data)
    cell = world.remember(sharer["token"], "a shared note")
    params = {
        "granteeIdHashesHex": [world.holder_id],
        "shardIds": [cell],
        "type": "temporary",
        "scope": "read",
        "expiryEpoch": str(int(time.time()) + 3600),
    }
    status, shared = post(world.url, sharer["token"], "saihm_share", params)
    assert status == 200, shared
    contract = shared["contractId"]
    enrol(page, world)
    incoming = page.locator(f"#sharing-body li[data-contract='{contract}']")
    assert "shares temporary with you" in incoming.inner_text()
    assert "waiting for your answer" in incoming.inner_text()
    assert contract not in incoming.inner_text()  # ids only on demand
    incoming.locator("button.accept-contract").click()
    _passed(page, "#sharing-body .status")
    assert "accepted" in page.locator(f"#sharing-body li[data-contract='{contract}']").inner_text()
    status, answer = post(world.url, world.session_token, "saihm_status", {})
    assert [c["accepted"] for c in answer["incomingContracts"] if c["contractId"] == contract] == [
        True
    ]
    enrol(page, world, sharer["holderId"])
    mine = page.locator(f"#sharing-body li[data-contract='{contract}']")
    assert "You share temporary with 1 agent, until" in mine.inner_text()
    shots.take(page, "me-shared", "#sharing")
    mine.locator("button.revoke-share").click()
    _passed(page, "#sharing-body .status")
    assert page.locator(f"#sharing-body li[data-contract='{contract}']").count() == 0
    status, answer = post(world.url, sharer["token"], "saihm_status", {})
    assert all(c["contractId"] != contract for c in answer["contracts"])
