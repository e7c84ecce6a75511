"""deploy/ (Dockerfile, systemd unit, example config), .gitignore and LICENSE.

Docker cannot run on the test machine, so the Dockerfile is checked by reading it: every path
it copies exists, the user is not root, the volumes are separate, the health check asks
/healthz on the port it exposes, and every SAIHM_* variable it sets names a real serve option.
The systemd unit is checked with ``systemd-analyze verify`` where that exists.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from saihm.commands.main import build_parser, subparser
from saihm.commands.settings import read_file, settings_of

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return _instructions((DEPLOY / "Dockerfile").read_text())


def _args(dockerfile, name: str) -> list[str]:
    return [rest for word, rest in dockerfile if word == name]


def test_every_path_the_dockerfile_copies_exists(dockerfile) -> None:
    copies = _args(dockerfile, "COPY")
    assert copies
    for rest in copies:
        *sources, _dest = rest.split()
        for source in sources:
            assert (ROOT / source).exists(), source


def test_the_image_runs_as_a_non_root_user_it_creates(dockerfile) -> None:
    (user,) = _args(dockerfile, "USER")
    assert user not in ("root", "0")
    assert any("useradd" in r and r.endswith(user) for r in _args(dockerfile, "RUN"))


def test_data_kek_and_authority_are_separate_volumes_and_are_what_serve_uses(dockerfile) -> None:
    (volumes,) = _args(dockerfile, "VOLUME")
    paths = json.loads(volumes)
    env = _env(dockerfile)
    for option in ("SAIHM_DATA", "SAIHM_KEK_DIR", "SAIHM_AUTHORITY_DIR", "SAIHM_LOG_KEYS_DIR"):
        assert env[option] in paths, option
    assert len(set(paths)) == len(paths) == 4
    for a in paths:  # none inside another, so each can be its own storage
        assert not any(b != a and b.startswith(a + "/") for b in paths)


def _env(dockerfile) -> dict[str, str]:
    env: dict[str, str] = {}
    for rest in _args(dockerfile, "ENV"):
        for pair in rest.split():
            key, _, value = pair.partition("=")
            env[key] = value
    return env


def test_every_saihm_variable_the_image_sets_is_a_serve_option(dockerfile) -> None:
    known = {s.env for s in settings_of(subparser(build_parser(), "serve"))}
    names = [k for k in _env(dockerfile) if k.startswith("SAIHM_")]
    assert names and set(names) <= known, set(names) - known


def test_the_health_check_asks_healthz_on_the_exposed_port_and_the_entrypoint_is_saihm(
    dockerfile,
) -> None:
    (health,) = _args(dockerfile, "HEALTHCHECK")
    (port,) = _args(dockerfile, "EXPOSE")
    env = _env(dockerfile)
    assert env["SAIHM_PORT"] == port
    assert f"https://127.0.0.1:{port}/healthz" in health
    # The probe is valid Python.
    command = json.loads(health.split("CMD", 1)[1])
    assert command[:2] == ["python", "-c"]
    compile(command[2], "healthcheck", "exec")
    (entry,) = _args(dockerfile, "ENTRYPOINT")
    assert json.loads(entry) == ["saihm", "serve"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "saihm" in scripts


def test_the_example_config_is_valid_for_serve() -> None:
    settings = settings_of(subparser(build_parser(), "serve"))
    values = read_file(DEPLOY / "saihm.toml", settings)
    assert values["data"] == "/var/lib/saihm/data" and values["port"] == 443


def test_the_systemd_unit_runs_the_example_config_with_hardening() -> None:
    text = (DEPLOY / "saihm.service").read_text()
    exec_start = re.search(r"^ExecStart=(.*)$", text, re.MULTILINE).group(1).split()
    assert exec_start[1:] == ["serve", "--config", "/etc/saihm/saihm.toml"]
    hardening = [
        "User=saihm",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "PrivateTmp=yes",
        "ProtectHome=yes",
        "CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
        "SystemCallFilter=@system-service",
        "KillSignal=SIGTERM",
    ]
    for line in hardening:
        assert re.search(rf"^{re.escape(line)}$", text, re.MULTILINE), line


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path) -> None:
    """Verified with ExecStart pointing at this venv's saihm (the installed path need not exist
    here); any warning (an unknown or unparsable directive) fails the test."""
    text = (DEPLOY / "saihm.service").read_text()
    here = str(Path(sys.executable).parent / "saihm")
    unit = tmp_path / "saihm.service"
    unit.write_text(text.replace("/opt/saihm/.venv/bin/saihm", here))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


def test_gitignore_covers_every_secret_directory_the_defaults_create(tmp_path) -> None:
    """What `make run` (saihm serve --data ./saihm-data) creates beside the clone is ignored."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    from saihm.compose import open_operator
    from saihm.config import Config

    operator = open_operator(Config.for_data(tmp_path / "saihm-data"))
    operator.store.close()
    created = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert any(str(p).startswith("authority/") for p in created)
    for path in created:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "check-ignore", "--no-index", "-q", str(path)],
            capture_output=True,
        )
        assert done.returncode == 0, f"{path} is not git-ignored"
    for extra in ("log-keys/checkpoint-ed25519.key", "backup.key"):
        done = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", "-q", extra])
        assert done.returncode == 0, extra


def test_the_licence_file_matches_pyproject() -> None:
    licence = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert licence == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License")
    assert "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert text.count("\n") > 150  # the full text, not a pointer to it
