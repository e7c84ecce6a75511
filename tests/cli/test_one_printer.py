"""One printer for SaihmError (issue #22 item 1): library code and commands raise, and only
saihm/commands/main.py prints an error line, in one format: ``saihm: error: MESSAGE``.

The static test lists every ``print(..., file=sys.stderr)`` and ``sys.stderr.write`` in saihm/
with the text it starts with; each one outside main.py must be in ``ALLOWED`` (output that is not
an error: alarms, warnings, progress, a server's runtime log), so a new error line printed
anywhere else fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from saihm.commands.main import main
from tests.support.cli import one_line_refusal, run_saihm

SAIHM = Path(__file__).resolve().parents[2] / "saihm"

#: The one module that prints a command's error.
PRINTER = "commands/main.py"

#: Every other stderr writer, by (module, the source of its first argument up to the first
#: placeholder), and why it is not an error line.
ALLOWED = {
    ("audit/mirror.py", "f'saihm mirror: ALARM: "): "a failed check of the log: output",
    ("audit/monitor.py", "f'saihm monitor: ALARM: "): "a failed check of the log: output",
    ("audit/run.py", "f'saihm export: warning: leaf "): "a warning; the export goes on",
    ("commands/admin.py", "summary"): "what a new token sees (authority/continuity.py)",
    ("commands/backup.py", "f'saihm backup: left out "): "a note per key file left out",
    ("commands/host.py", "f'saihm: for "): "a note on what a host configuration is for",
    (
        "commands/migrate.py",
        "f'saihm migrate: done; serve it with: saihm serve --data ",
    ): "the next step",
    (
        "commands/person.py",
        'f"saihm: give this link to the person only: it enrols a passkey once, until ',
    ): "a note beside the printed link: who it is for, until when",
    ("commands/serve.py", "PERSON_ACTIONS_RETIRED"): "a notice; the server starts as usual",
    ("http/serve.py", "f'saihm: error: "): "a forked worker's exit: it never returns to main",
    ("mcp/__init__.py", "f'saihm-mcp: "): "saihm-mcp, a console script of its own",
    ("services/witness.py", "json.dumps(line)"): "the witness's JSON access log (runtime)",
    ("services/witness.py", "line"): "a rate-limited incident line (runtime)",
    ("services/witness.py", "f'saihm witness: evidence of log conflicts in "): "startup note",
    ("services/witness.py", "f'saihm witness: state unavailable ("): "runtime log, answer 503",
    ("services/witness.py", "f'saihm witness: internal error ("): "runtime log, answer 500",
}


def _lead(node: ast.expr) -> str:
    """The source of a print's first argument up to its first ``{`` placeholder."""
    return ast.unparse(node).split("{", 1)[0]


def stderr_writers() -> set[tuple[str, str]]:
    """(module under saihm/, leading text) of every print to stderr and ``sys.stderr.write``."""
    found = set()
    for path in sorted(SAIHM.rglob("*.py")):
        module = path.relative_to(SAIHM).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            call = ast.unparse(node.func)
            to_stderr = call == "sys.stderr.write" or (
                call == "print"
                and any(
                    k.arg == "file" and ast.unparse(k.value) == "sys.stderr" for k in node.keywords
                )
            )
            if to_stderr:
                found.add((module, _lead(node.args[0])))
    return found


def test_only_the_printer_prints_an_error_line() -> None:
    writers = stderr_writers()
    others = {(module, lead) for module, lead in writers if module != PRINTER}
    assert others - ALLOWED.keys() == set(), "print the error from commands/main.py: raise"
    # The list stays exact: an entry whose writer is gone goes too.
    assert ALLOWED.keys() - others == set()
    assert any(lead.startswith("f'saihm: error: ") for module, lead in writers if module == PRINTER)


def test_the_scan_sees_an_error_line_printed_elsewhere(tmp_path, monkeypatch) -> None:
    """The scan is not blind: a module that prints its own error line is found."""
    fake = tmp_path / "saihm"
    (fake / "audit").mkdir(parents=True)
    (fake / "audit" / "replay.py").write_text(
        "import sys\n\ndef run(err):\n    print(f'saihm replay: {err}', file=sys.stderr)\n"
    )
    monkeypatch.setattr(f"{__name__}.SAIHM", fake)
    assert stderr_writers() == {("audit/replay.py", "f'saihm replay: ")}


@pytest.mark.parametrize(
    "argv",
    [
        ["publish", "--data", "{tmp}/nowhere", "--to", "{tmp}/out"],
        ["verify", "{tmp}/missing.cbor", "--no-progress"],
        ["export", "--data", "{tmp}/nowhere", "--out", "{tmp}/bundle.cbor"],
        ["replay", "{tmp}/missing.cbor", "--out", "{tmp}/replayed", "--no-progress"],
        ["mirror", "{tmp}/not-a-url", "{tmp}/m", "--trust", "{tmp}/none.txt", "--no-progress"],
        ["monitor", "ftp://example.org/log", "--state", "{tmp}/s", "--once"],
        ["memory", "status", "--data", "{tmp}/nowhere", "--consumer-token", "x"],
        ["witness"],
        ["witness", "serve", "--state", "{tmp}/w", "--log", "not-a-key"],
        ["memory", "mcp"],
        ["record", "hello"],
    ],
    ids=lambda argv: " ".join(a for a in argv[:2] if a.isalpha()),
)
def test_bad_input_is_one_line_in_the_one_format(tmp_path, capsys, monkeypatch, argv) -> None:
    # memory mcp refuses a bad timeout before serving; record finds nobody on port 1.
    if argv[:2] == ["memory", "mcp"]:
        monkeypatch.setenv("SAIHM_TIMEOUT_SECONDS", "soon")
    monkeypatch.setenv("SAIHM_ENDPOINT_URL", "http://127.0.0.1:1/")
    monkeypatch.setenv("SAIHM_AUTH_HEADER", "Bearer x")
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith("saihm: error: ") and "Traceback" not in err, err


def test_the_installed_script_prints_the_one_format(tmp_path) -> None:
    done = run_saihm("publish", "--data", str(tmp_path / "nowhere"), "--to", str(tmp_path / "o"))
    line = one_line_refusal(done)
    assert done.returncode == 2
    assert line == f"saihm: error: {tmp_path / 'nowhere'} is not a saihm data directory"


def test_a_command_keeps_its_own_exit_code_through_the_printer(capsys, monkeypatch) -> None:
    """A host command whose call may or may not have reached the operator exits 3, not 2:
    the command raises a CommandError with its code, and the printer returns it."""
    import contextlib

    from saihm.client import ClientError
    from saihm.commands import host

    class TimedOut:
        def record(self, kind: str, text: str) -> None:
            raise ClientError("no answer within 30 s; it may have been recorded", kind="timeout")

    monkeypatch.setattr(host, "_client", lambda: contextlib.nullcontext(TimedOut()))
    assert main(["record", "hello"]) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "saihm: error: no answer within 30 s; it may have been recorded\n"
