"""The log explorer in a real browser (headless Chromium) against a real ``saihm serve``.

Each test drives the page as a reader would and asserts what the page says; the proxy in
front of the server lies where a test needs a hostile log.
"""

from __future__ import annotations

import base64

from tests.explorer.conftest import WAIT_MS, open_explorer

DONE = "[data-result=pass], [data-result=fail], [data-result=not-checked]"


def _search(page, value: str, kind: str) -> None:
    page.fill("#search-id", value)
    page.select_option("#search-kind", kind)
    page.click("#search-form button[type=submit]")


def _check_first_inclusion(page, scope: str) -> object:
    card = page.locator(f"{scope} article.receipt").first
    card.locator("button.check").click()
    result = card.locator(".status")
    result.locator(f"xpath=self::*[{_done_xpath()}]").wait_for(timeout=WAIT_MS)
    return result


def _done_xpath() -> str:
    return "@data-result='pass' or @data-result='fail' or @data-result='not-checked'"


def test_latest_checkpoint_shows_origin_size_root_and_a_verified_ed25519_line(page, log, shots):
    open_explorer(page, log.url)
    note = log.checkpoint_note().decode()
    origin, size, root = note.split("\n")[:3]
    body = page.locator("#checkpoint-body")
    assert origin in body.inner_text() and size in body.inner_text()
    assert base64.b64decode(root).hex() in body.inner_text()
    assert page.get_attribute("#operator-signature", "data-result") == "pass"
    rows = page.locator("table.sigs tbody tr")
    assert rows.count() == note.split("\n\n", 1)[1].count("\u2014 ")
    statuses = [rows.nth(i).get_attribute("data-status") for i in range(rows.count())]
    assert statuses == ["verified", "not-checked"]  # Ed25519 checked; ML-DSA-44 said plainly
    assert "saihm verify" in rows.nth(1).inner_text()
    assert "ago" in body.inner_text()  # the age, from the signature line's timestamp
    shots.take(page, "explorer-full")
    shots.take(page, "checkpoint", "#checkpoint")
    shots.take(page, "growth", "#growth")


def test_search_by_receipt_id_finds_the_receipt_with_its_index_and_json(page, log):
    remember = log.receipts(f"subjectId={log.ids['cells'][1]['cellId']}")[0]
    open_explorer(page, log.url)
    _search(page, remember["receipt"]["receiptId"], "receiptId")
    card = page.locator("#search-results article.receipt").first
    card.wait_for(timeout=WAIT_MS)
    assert card.get_attribute("data-index") == str(remember["index"])
    assert card.get_attribute("data-receipt-id") == remember["receipt"]["receiptId"]
    card.locator("summary").click()
    shown = card.locator("pre").inner_text()
    assert remember["receipt"]["signature"] in shown and '"index": ' in shown


def test_search_by_holder_id_pages_through_every_receipt_of_the_holder(page, log):
    holder_id = log.ids["holders"][0]["holderId"]
    expected = [e["index"] for e in log.receipts(f"holderId={holder_id}&limit=1000")]
    assert len(expected) > 1
    open_explorer(page, log.url)
    _search(page, holder_id, "holderId")
    page.locator("#search-results article.receipt").first.wait_for(timeout=WAIT_MS)
    page.wait_for_function(
        "n => document.querySelectorAll('#search-results article.receipt').length >= n",
        arg=len(expected),
        timeout=WAIT_MS,
    )
    shown = page.eval_on_selector_all(
        "#search-results article.receipt", "els => els.map(e => Number(e.dataset.index))"
    )
    assert shown == expected


def test_listing_by_operation_pages_with_next(page, log):
    for i in range(25):
        log.remember(f"paging {i}")
    expected = [e["index"] for e in log.receipts("operation=REMEMBER&limit=1000")]
    assert len(expected) > 20
    open_explorer(page, log.url)
    page.select_option("#list-operation", "REMEMBER")
    page.click("#list-form button")
    cards = page.locator("#list-results article.receipt")
    page.wait_for_function(
        "() => document.querySelectorAll('#list-results article.receipt').length === 20",
        timeout=WAIT_MS,
    )
    page.locator("#list-results button", has_text="Next page").click()
    page.wait_for_function(
        "n => document.querySelectorAll('#list-results article.receipt').length === n",
        arg=len(expected),
        timeout=WAIT_MS,
    )
    assert [int(cards.nth(i).get_attribute("data-index")) for i in range(cards.count())] == expected
    assert page.locator("#list-results button", has_text="Next page").is_hidden()


def test_inclusion_check_passes_in_the_browser_for_a_real_receipt(page, log, shots):
    open_explorer(page, log.url)
    _search(page, log.ids["cells"][2]["cellId"], "subjectId")
    result = _check_first_inclusion(page, "#search-results")
    assert result.get_attribute("data-result") == "pass"
    text = result.inner_text()
    assert "VERIFIED" in text and "RFC 9162" in text
    assert "ML-DSA-65" in text and "saihm verify" in text  # what was not checked, said plainly
    shots.take(page, "inclusion-pass", "#search-results")


def test_inclusion_check_fails_for_a_proof_with_one_flipped_bit(page, log, shots):
    log.proxy.lies.add("inclusion")
    open_explorer(page, log.proxy.url)
    _search(page, log.ids["cells"][2]["cellId"], "subjectId")
    result = _check_first_inclusion(page, "#search-results")
    assert result.get_attribute("data-result") == "fail"
    assert "FAILED" in result.inner_text() and "not the checkpoint root" in result.inner_text()
    shots.take(page, "inclusion-tampered", "#search-results")


def test_consistency_check_passes_when_the_log_grew_honestly(page, log):
    open_explorer(page, log.url)
    first = page.inner_text("#first-seen")
    log.remember("growth")
    page.click("#consistency-button")
    page.wait_for_selector(f"#consistency-result:is({DONE})", timeout=WAIT_MS)
    assert page.get_attribute("#consistency-result", "data-result") == "pass"
    assert "VERIFIED" in page.inner_text("#consistency-result")
    assert page.inner_text("#first-seen") == first


def test_consistency_check_catches_a_served_rollback(page, log, shots):
    old = log.checkpoint_note()  # a real, validly signed, older checkpoint
    log.remember("after the old checkpoint")
    open_explorer(page, log.proxy.url)
    log.proxy.note = old
    log.proxy.lies.add("checkpoint")
    page.click("#consistency-button")
    page.wait_for_selector(f"#consistency-result:is({DONE})", timeout=WAIT_MS)
    assert page.get_attribute("#consistency-result", "data-result") == "fail"
    assert "ROLLBACK" in page.inner_text("#consistency-result")
    assert page.get_attribute("#operator-signature", "data-result") == "pass"  # signed, yet caught
    shots.take(page, "consistency-rollback", "#checkpoint")


def test_consistency_check_catches_a_fork_signed_with_the_logs_own_key(page, log):
    open_explorer(page, log.proxy.url)
    size = int(log.checkpoint_note().split(b"\n")[1])
    log.proxy.note = log.forge_checkpoint(size + 3, bytes(32))
    log.proxy.lies.add("checkpoint")
    log.remember("a"), log.remember("b"), log.remember("c")  # the real tree reaches that size
    page.click("#consistency-button")
    page.wait_for_selector(f"#consistency-result:is({DONE})", timeout=WAIT_MS)
    assert page.get_attribute("#operator-signature", "data-result") == "pass"
    assert page.get_attribute("#consistency-result", "data-result") == "fail"
    assert "FAILED" in page.inner_text("#consistency-result")


def test_a_checkpoint_with_a_bad_operator_signature_is_shown_as_failed(page, log):
    note = bytearray(log.forge_checkpoint(1, bytes(32)))
    line_end = note.index(b"\n", note.index("\u2014 ".encode()))
    signature_at = line_end - 10  # inside the signature, past the key ID
    note[signature_at] = ord("A") if note[signature_at] != ord("A") else ord("B")
    log.proxy.note = bytes(note)
    log.proxy.lies.add("checkpoint")
    open_explorer(page, log.proxy.url)
    assert page.get_attribute("#operator-signature", "data-result") == "fail"
    assert page.locator("table.sigs tbody tr").first.get_attribute("data-status") == "failed"


def test_a_hostile_key_name_in_a_signature_line_is_text_not_html(page, log):
    hostile = "<img/src=x/onerror=document.title='owned'>"
    blob = base64.b64encode(b"\x01\x02\x03\x04" + bytes(72)).decode()
    size = int(log.checkpoint_note().split(b"\n")[1])
    root = bytes.fromhex(log.receipts("operation=KEY")[0]["receipt"]["receiptId"])
    log.proxy.note = log.forge_checkpoint(size, root, f"\u2014 {hostile} {blob}")
    log.proxy.lies.add("checkpoint")
    open_explorer(page, log.proxy.url)
    assert hostile in page.inner_text("table.sigs")
    assert page.locator("img").count() == 0 and page.title() != "owned"
    row = page.locator("table.sigs tbody tr").nth(1)
    assert row.get_attribute("data-status") == "unknown-key"
    assert "cosignature" in row.inner_text()  # 72 bytes: the shape of a tlog-cosignature


def test_without_ed25519_in_webcrypto_the_page_says_it_cannot_check(browser, log):
    tab = browser.new_page()
    tab.add_init_script(
        """const real = crypto.subtle.importKey.bind(crypto.subtle);
        crypto.subtle.importKey = (f, k, alg, ...rest) =>
          (alg && alg.name === 'Ed25519')
            ? Promise.reject(new DOMException('no', 'NotSupportedError'))
            : real(f, k, alg, ...rest);"""
    )
    try:
        open_explorer(tab, log.url)
        assert "has no Ed25519" in tab.inner_text("#ed25519")
        first = tab.locator("table.sigs tbody tr").first
        assert first.get_attribute("data-status") == "not-checked"
        assert "saihm verify" in first.inner_text()
        assert tab.get_attribute("#operator-signature", "data-result") == "fail"
    finally:
        tab.close()


def test_erased_cell_shows_its_remember_and_forget_receipts_side_by_side(page, log, shots):
    open_explorer(page, log.url)
    item = page.locator("ul.erasures li", has_text=log.ids["erased"])
    item.locator("button").click()
    pair = item.locator(".side-by-side")
    pair.wait_for(timeout=WAIT_MS)
    columns = pair.locator(".column")
    assert columns.count() == 2
    assert "REMEMBER" in columns.nth(0).locator("h4").first.inner_text()
    assert "FORGET" in columns.nth(1).locator("h4").first.inner_text()
    for i in range(2):
        assert log.ids["erased"] in columns.nth(i).inner_text()
    result = columns.nth(1).locator(".status")
    columns.nth(1).locator("button.check").click()
    result.locator(f"xpath=self::*[{_done_xpath()}]").wait_for(timeout=WAIT_MS)
    assert result.get_attribute("data-result") == "pass"
    shots.take(page, "erasure", "#erasures")


def test_governance_tallies_are_recomputed_from_vote_receipts(page, log, shots):
    open_explorer(page, log.url)
    proposal = log.ids["proposal"]["proposalId"]
    row = page.locator(f"tr[data-proposal='{proposal}']")
    cells = row.locator("td")
    assert cells.nth(5).inner_text() == "2" and cells.nth(6).inner_text() == "1"
    votes = log.receipts(f"subjectId={proposal}&limit=1000")
    assert sum(e["receipt"]["operation"] == "VOTE" for e in votes) == 3
    assert "604800" in page.inner_text("#governance-body")  # the form is shown too
    shots.take(page, "governance", "#governance")


def test_the_basic_view_works_without_javascript(browser, log):
    context = browser.new_context(java_script_enabled=False)
    try:
        tab = context.new_page()
        tab.goto(log.url + "explorer/")
        size = log.checkpoint_note().split(b"\n")[1].decode()
        text = tab.inner_text("#checkpoint-body")
        assert "Tree size" in text and size in text
        assert "Without JavaScript" in tab.inner_text("header")  # the noscript note shows
    finally:
        context.close()


def test_a_json_form_that_does_not_match_its_logged_cbor_fails_the_check(page, log):
    log.proxy.lies.add("receipt-json")
    open_explorer(page, log.proxy.url)
    _search(page, log.ids["cells"][2]["cellId"], "subjectId")
    result = _check_first_inclusion(page, "#search-results")
    assert result.get_attribute("data-result") == "fail"
    assert "does not match the logged CBOR" in result.inner_text()


def _cosign(note: bytes, name: str, timestamp: int, tamper: bool = False) -> tuple[bytes, str]:
    """``note`` with a tlog-cosignature/v1 line by a fresh witness key, and its vkey."""
    import hashlib

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes_raw()
    key_id = hashlib.sha256(name.encode() + b"\n\x04" + public).digest()[:4]
    text = note[: note.index(b"\n\n") + 1]
    signature = key.sign(b"cosignature/v1\ntime %d\n" % timestamp + text)
    if tamper:
        signature = bytes([signature[0] ^ 1]) + signature[1:]
    blob = key_id + timestamp.to_bytes(8, "big") + signature
    line = f"\u2014 {name} {base64.b64encode(blob).decode()}\n".encode()
    material = base64.b64encode(bytes([4]) + public).decode()
    vkey = f"{name}+{key_id.hex()}+{material}"
    return note + line, vkey


def test_a_witness_cosignature_is_listed_and_verified_with_the_witness_key(page, log, shots):
    note, vkey = _cosign(log.checkpoint_note(), "witness.example/w1", 1_700_000_000)
    note, bad_vkey = _cosign(note, "witness.example/w2", 1_700_000_001, tamper=True)
    log.proxy.note = note
    log.proxy.lies.add("checkpoint")
    open_explorer(page, log.proxy.url)
    rows = page.locator("table.sigs tbody tr")
    assert rows.count() == 4
    assert rows.nth(2).get_attribute("data-status") == "unknown-key"  # no key for it yet
    assert "witness.example/w1" in rows.nth(2).inner_text()
    for key in (vkey, bad_vkey):
        page.fill("#pin-key", key)
        page.click("#pin-form button")
        page.wait_for_function(
            "n => document.querySelector('#pin-result').textContent.startsWith(n + ' key')",
            arg=1 if key == vkey else 2,
            timeout=WAIT_MS,
        )
    statuses = [rows.nth(i).get_attribute("data-status") for i in range(4)]
    assert statuses == ["verified", "not-checked", "verified", "failed"]
    assert "2023-11-14T22:13:20Z" in rows.nth(2).inner_text()  # the cosignature's own time
    shots.take(page, "cosignatures", "#checkpoint")


def test_a_search_for_something_that_is_not_an_id_says_so_and_asks_nothing(page, log):
    open_explorer(page, log.url)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    _search(page, "<b>not an id</b>", "any")
    page.wait_for_selector("#search-results[data-result=fail]", timeout=WAIT_MS)
    assert "64 hexadecimal" in page.inner_text("#search-results")
    assert page.locator("#search-results b").count() == 0
    assert requests == []


def test_the_scripts_never_parse_text_as_html():
    """Nothing from the log or a reader is rendered as HTML: no innerHTML and friends."""
    from pathlib import Path

    import saihm.http.explorer as explorer

    static = Path(explorer.__file__).parent / "static"
    for script in static.glob("*.js"):
        source = script.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in source, f"{script.name} uses {sink}"
