"""The explorer's route and its static copy beside a published tiles tree."""

from __future__ import annotations

import functools
import json
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from saihm.http.explorer import FILES, copy_static, render_checkpoint
from tests.explorer.conftest import open_explorer
from tests.support.serve import fetch


def test_the_page_and_its_files_are_served_with_a_strict_content_security_policy(log):
    for name in FILES:
        status, body = fetch(log.url + "explorer/" + ("" if name == "index.html" else name))
        assert status == 200 and body
    import urllib.request

    with urllib.request.urlopen(log.url + "explorer/explorer.js") as resp:
        assert resp.headers["Content-Type"].startswith("text/javascript")
        csp = resp.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp and "connect-src 'self'" in csp


@pytest.mark.parametrize(
    "path", ["explorer/nope.js", "explorer/..%2fsaihm-data", "explorer/%2e%2e", "explorer/index"]
)
def test_anything_but_the_pages_files_is_not_found(log, path):
    status, body = fetch(log.url + path)
    assert (status, json.loads(body)) == (404, {"error": "not_found"})


def test_explorer_without_the_slash_redirects_to_the_page(log):
    status, body = fetch(log.url + "explorer")  # urllib follows the 301
    assert status == 200 and b"saihm log explorer" in body


def test_the_server_rendered_checkpoint_escapes_everything():
    note = "o<b>x\n1\n" + "A" * 43 + "=\n\n\u2014 <script>x</script> AAAAAAA=\n"
    html = render_checkpoint(note.encode())
    assert "<b>" not in html and "<script>" not in html
    assert "&lt;script&gt;" in html and "o&lt;b&gt;x" in html


@pytest.fixture
def published(tmp_path, log):
    """copy_static beside a checkpoint file, served by a plain static file server."""
    out = tmp_path / "out"
    copy_static(out)
    (out / "checkpoint").write_bytes(log.checkpoint_note())
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(out))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield out, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    thread.join(30)


def test_copy_static_writes_every_file_and_no_server_rendered_checkpoint(published):
    out, _ = published
    assert sorted(p.name for p in (out / "explorer").iterdir()) == sorted(FILES)
    index = (out / "explorer" / "index.html").read_text()
    assert "static copy" in index and "<!--saihm:checkpoint-->" not in index


def test_the_static_copy_reads_the_checkpoint_and_checks_it_with_a_pinned_key(page, log, published):
    _, base = published
    open_explorer(page, base)
    assert "static copy" in page.inner_text("#mode")
    assert page.get_attribute("#operator-signature", "data-result") == "fail"  # no key yet
    assert "needs the operator's JSON API" in page.inner_text("#erasures-body")
    assert page.locator("#search-form button").is_disabled()
    _, keys = fetch(log.url + "log/v1/keys")
    ed25519 = next(k for k in json.loads(keys)["checkpointKeys"] if k["type"] == 1)
    page.fill("#pin-key", ed25519["vkey"])
    page.click("#pin-form button")
    page.wait_for_selector("#pin-result[data-result]")
    assert page.get_attribute("#pin-result", "data-result") == "pass"
    assert page.get_attribute("#operator-signature", "data-result") == "pass"


def test_the_copy_command_in_operations_md_writes_the_explorer(tmp_path):
    """docs/operations.md "The log explorer": the documented command writes OUT/explorer/."""
    import re
    import subprocess
    import sys

    from tests.explorer.conftest import ROOT

    doc = (ROOT / "docs" / "operations.md").read_text()
    section = doc[doc.index("## The log explorer") :]
    command = re.search(r"```sh\n(python -c .*) OUT\n```", section).group(1)
    python = str(Path(sys.executable))
    done = subprocess.run(
        command.replace("python", python, 1) + f" {tmp_path / 'out'}",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "out" / "explorer").iterdir()) == sorted(FILES)


def test_the_static_copy_checks_the_checkpoint_with_the_published_v1_keys(page, log, published):
    """``saihm publish`` writes v1/keys beside the tiles; the page reads it when present."""
    out, base = published
    (out / "v1").mkdir()
    (out / "v1" / "keys").write_bytes(fetch(log.url + "log/v1/keys")[1])
    open_explorer(page, base)
    assert "static copy" in page.inner_text("#mode")
    assert page.get_attribute("#operator-signature", "data-result") == "pass"


def test_saihm_publish_writes_the_explorer_beside_the_tiles(tmp_path, log):
    """``saihm publish --to OUT`` puts the page at OUT/explorer/ beside OUT/checkpoint."""
    import subprocess
    import sys

    saihm = str(Path(sys.executable).with_name("saihm"))
    out = tmp_path / "pub"
    done = subprocess.run(
        [saihm, "publish", "--data", str(log.data), "--to", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (out / "checkpoint").is_file()
    assert sorted(p.name for p in (out / "explorer").iterdir()) == sorted(FILES)
    assert "static copy" in (out / "explorer" / "index.html").read_text()
