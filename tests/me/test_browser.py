"""The person's page (``/me/``) in headless Chromium against a real ``saihm serve``.

Each test drives the page as the person would and asserts what it shows, then checks the
operator's side through the ordinary API.
"""

from __future__ import annotations

import json
import time

from tests.me.conftest import WAIT_MS, saihm, sign_in
from tests.support.serve import fetch, holder_create, post


def _cards(page) -> list[str]:
    return page.eval_on_selector_all(
        "#memory-list article.memory", "els => els.map(e => e.dataset.cellId)"
    )


def test_a_session_token_sees_its_own_session_only(page, world, shots):
    sign_in(page, world, world.session_token)
    assert page.get_attribute("body", "data-ready") == "yes"
    shown = _cards(page)
    assert world.cells["tea"] in shown and world.cells["hostile"] in shown
    assert world.cells["other"] not in shown
    text = page.inner_text("#memory-list")
    assert world.plaintexts["tea"] in text and world.plaintexts["said"] in text
    assert world.plaintexts["other"] not in text
    assert "This session" in page.inner_text("#memory-list h3")
    assert "session token" in page.inner_text("#sharing-body")
    assert page.locator("#sharing-body li[data-grant]").count() == 0
    shots.take(page, "me-session")


def test_a_holder_wide_grant_sees_every_session_by_session_and_day(page, world, shots):
    sign_in(page, world, world.person_token)
    shown = _cards(page)
    assert {world.cells["tea"], world.cells["other"]} <= set(shown)
    sessions = page.eval_on_selector_all(
        "#memory-list section.group", "els => els.map(e => e.dataset.session)"
    )
    assert len(set(sessions)) >= 2
    heading = page.inner_text("#memory-list section.group h3 >> nth=0")
    assert "UTC" not in heading and "20" in heading  # a day in words, not an epoch
    assert not any(ch.isdigit() and len(ch) > 9 for ch in heading.split())
    shots.take(page, "me-memories")
    shots.take(page, "me-activity", "#activity")


def test_search_shows_the_same_ranking_as_recall(page, world):
    sign_in(page, world, world.person_token)
    page.fill("#query", "tea morning sailing")
    page.click("#recall-form button[type=submit]")
    page.wait_for_function(
        "() => document.querySelector('#memory-list .note')?.textContent.includes('best match')",
        timeout=WAIT_MS,
    )
    status, ranked = post(
        world.url, world.person_token, "saihm_recall", {"query": "tea morning sailing", "limit": 20}
    )
    assert status == 200
    assert _cards(page) == [item["cellId"] for item in ranked]
    assert _cards(page)[0] in (world.cells["tea"], world.cells["other"])


def test_kind_filter_narrows_to_records(page, world):
    sign_in(page, world, world.session_token)
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


def test_hostile_content_renders_as_text(page, world, shots):
    sign_in(page, world, world.session_token)
    card = page.locator(f"article.memory[data-cell-id='{world.cells['hostile']}']")
    shown = card.locator(".content").inner_text()
    assert "<script>document.title='owned'</script>" in shown and "<img src=x" in shown
    assert "[U+202E]" in shown and "[U+2066]" in shown  # bidi controls made visible
    assert "\u202e" not in shown and "\u2066" not in shown
    assert page.locator("#memory-list img, #memory-list script").count() == 0
    assert page.title() != "owned"
    shots.take(page, "me-hostile", f"article.memory[data-cell-id='{world.cells['hostile']}']")


def test_forget_with_confirmation_shows_the_erasure_verified(page, world, shots):
    cell = world.remember(world.session_token, "forget this one please")
    sign_in(page, world, world.session_token)
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
    assert check.get_attribute("data-result") == "pass"  # the proof stays beside the history
    shots.take(page, "me-forget", f"article.memory[data-cell-id='{cell}']")


def test_revoking_a_grant_in_the_page_refuses_the_agents_token(page, world, shots):
    status, _ = post(world.url, world.agent_token, "saihm_recall", {"limit": 1})
    assert status == 200
    sign_in(page, world, world.person_token)
    row = page.locator(f"#sharing-body li[data-grant='{world.agent_grant}']")
    assert "all your memories" in row.inner_text() and "until" in row.inner_text()
    consumer = page.locator("#sharing-body li[data-grant]", has_text="“cursor”")
    assert "notes" in consumer.inner_text()
    shots.take(page, "me-sharing", "#sharing")
    row.locator("button.revoke-grant").click()
    page.wait_for_function(
        "() => document.querySelector('#sharing-body .status')?.dataset.result === 'pass'",
        timeout=WAIT_MS,
    )
    assert page.locator(f"#sharing-body li[data-grant='{world.agent_grant}']").count() == 0
    status, answer = post(world.url, world.agent_token, "saihm_recall", {"limit": 1})
    assert (status, answer) == (401, {"error": "unauthenticated"})
    status, _ = post(world.url, world.person_token, "saihm_recall", {"limit": 1})
    assert status == 200  # only the revoked grant is refused


def test_accepting_a_pending_proposal_makes_it_a_memory(page, world, shots):
    sign_in(page, world, world.person_token)
    item = page.locator(f"#pending-body li[data-proposal='{world.proposal_id}']")
    assert world.proposal_text in item.inner_text() and "cursor" in item.inner_text()
    shots.take(page, "me-pending", "#pending")
    item.locator("button.accept-proposal").click()
    page.wait_for_function(
        "() => document.querySelector('#pending-body .status')?.dataset.result === 'pass'",
        timeout=WAIT_MS,
    )
    assert page.locator(f"#pending-body li[data-proposal='{world.proposal_id}']").count() == 0
    headers = {"Authorization": f"Bearer {world.person_token}"}
    status, raw = fetch(world.url + "me/v1/pending", headers=headers)
    assert status == 200 and json.loads(raw) == {"pending": []}
    status, items = post(world.url, world.person_token, "saihm_recall", {"query": "dark mode"})
    assert status == 200 and any(world.proposal_text in i["plaintext"] for i in items)


def test_activity_counts_receipts_by_day_and_operation(page, world):
    sign_in(page, world, world.person_token)
    status, raw = fetch(world.url + f"log/v1/receipts?holderId={world.holder_id}&limit=1000")
    assert status == 200
    receipts = json.loads(raw)["receipts"]
    remembers = sum(e["receipt"]["operation"] == "REMEMBER" for e in receipts)
    cells = page.locator("#activity-body td[data-operation=REMEMBER]")
    shown = sum(int(t or 0) for t in cells.all_inner_texts())
    assert shown == remembers > 0
    assert page.locator("#activity-body tbody tr").count() >= 1


def test_a_refused_token_says_so_and_shows_nothing(page, world):
    sign_in(page, world, "not-a-token")
    assert page.get_attribute("body", "data-ready") == "failed"
    assert "refused" in page.inner_text("#signin-result")
    assert page.locator("#main").is_hidden()


def test_no_secret_in_urls_storage_or_server_logs(browser, world):
    context = browser.new_context()
    try:
        tab = context.new_page()
        urls: list[str] = []
        tab.on("request", lambda request: urls.append(request.url))
        sign_in(tab, world, world.person_token)
        tab.fill("#query", "tea")
        tab.click("#recall-form button[type=submit]")
        tab.wait_for_selector("#memory-list article.memory", timeout=WAIT_MS)
        stored = tab.evaluate(
            "() => [localStorage.length, sessionStorage.length, document.cookie,"
            " document.querySelector('#token').value, location.href]"
        )
        assert stored[:4] == [0, 0, "", ""]
        assert context.cookies() == []
        state = json.dumps(context.storage_state())
        page_html = tab.content()
    finally:
        context.close()
    assert urls and all(world.url in u for u in urls)
    for token in world.tokens():
        assert all(token not in u for u in urls)
        assert token not in state and token not in page_html and token not in stored[4]
    logs = world.server_output()
    assert "/me/" in logs  # the access log is there, and it is what we search
    for secret in [*world.tokens(), *world.plaintexts.values(), world.proposal_text]:
        assert secret not in logs


def test_a_large_session_pages_with_the_recall_cursor(page, world):
    fresh = saihm(world.data, "session", "open", "--holder", world.holder_id)
    for i in range(25):
        world.remember(fresh["token"], f"paging note {i}")
    sign_in(page, world, fresh["token"])
    assert len(_cards(page)) == 20  # one bounded recall page, not the whole session
    more = page.locator("#memory-more")
    assert more.is_visible()
    more.click()
    page.wait_for_function(
        "() => document.querySelectorAll('#memory-list article.memory').length === 25",
        timeout=WAIT_MS,
    )
    assert more.is_hidden()
    texts = page.locator("#memory-list .content").all_inner_texts()
    assert sorted(texts) == sorted(f"paging note {i}" for i in range(25))


def test_the_namespace_filter_narrows_the_list(page, world):
    fresh = saihm(world.data, "session", "open", "--holder", world.holder_id)
    status, _ = post(
        world.url, fresh["token"], "saihm_remember", {"content": "in work", "namespace": "work"}
    )
    assert status == 200
    world.remember(fresh["token"], "in the default namespace")
    sign_in(page, world, fresh["token"])
    assert len(_cards(page)) == 2
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
    sign_in(page, world, world.session_token)
    incoming = page.locator(f"#sharing-body li[data-contract='{contract}']")
    assert "shares temporary with you" in incoming.inner_text()
    assert "waiting for your answer" in incoming.inner_text()
    assert contract not in incoming.inner_text()  # ids only on demand
    incoming.locator("button.accept-contract").click()
    page.wait_for_function(
        "() => document.querySelector('#sharing-body .status')?.dataset.result === 'pass'",
        timeout=WAIT_MS,
    )
    assert "accepted" in page.locator(f"#sharing-body li[data-contract='{contract}']").inner_text()
    status, answer = post(world.url, world.session_token, "saihm_status", {})
    assert [c["accepted"] for c in answer["incomingContracts"] if c["contractId"] == contract] == [
        True
    ]
    page.close()
    tab = page.context.browser.new_page()
    try:
        sign_in(tab, world, sharer["token"])
        mine = tab.locator(f"#sharing-body li[data-contract='{contract}']")
        assert "You share temporary with 1 agent, until" in mine.inner_text()
        shots.take(tab, "me-shared", "#sharing")
        mine.locator("button.revoke-share").click()
        tab.wait_for_function(
            "() => document.querySelector('#sharing-body .status')?.dataset.result === 'pass'",
            timeout=WAIT_MS,
        )
        assert tab.locator(f"#sharing-body li[data-contract='{contract}']").count() == 0
    finally:
        tab.close()
    status, answer = post(world.url, sharer["token"], "saihm_status", {})
    assert all(c["contractId"] != contract for c in answer["contracts"])
