"""The semantic stage on by default (issue 33 item 4; docs/retrieval.md "The engine"): ``saihm
serve`` with no flags ranks by meaning with the bundled all-MiniLM-L6-v2, whose files are
found in their pinned packages and checked by SHA-256; ``--embedding-model none`` turns it off."""

from __future__ import annotations

import argparse
import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from saihm.operator import Operator
from saihm.retrieval import SemanticUnavailable, load_embedder
from saihm.retrieval import bundled as bundled_module
from saihm.retrieval.bundled import BUNDLED_FILES, BundledFile, bundled_model_dir
from saihm.store import Store
from tests.store.test_semantic_stage import ConceptEmbedder
from tests.support.cli import one_line_refusal, run_saihm
from tests.support.serve import holder_create, post, serving
from tests.support.world import make_world

WAIT = 60.0

#: Twelve facts about one person, as a user would tell them.
FACTS = [
    "At Moonbase her manager is Sofia Lindqvist.",
    "Arjun, her boy, turned nine.",
    "Every morning she orders a flat white.",
    "Her laptop budget tops out at 1200 euros.",
    "She grows tomatoes and basil on the balcony.",
    "The quarterly report is due on Thursday.",
    "She is allergic to penicillin.",
    "Her sister Meera lives in Toronto.",
    "She drives a blue Volvo estate.",
    "She plays the cello in a community orchestra.",
    "Her flat is on the fourth floor, with no lift.",
    "She runs 10 km every Sunday along the river.",
]


def test_the_bundled_model_is_its_pinned_files_checked(tmp_path: Path) -> None:
    folder = bundled_model_dir()
    assert bundled_model_dir() == folder  # laid out once per process
    for file in BUNDLED_FILES:
        data = (folder / file.name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == file.sha256
    (vector,) = load_embedder(folder).embed(["At Moonbase her manager is Sofia Lindqvist."])
    assert len(vector) == 384


def test_the_pins_match_pyproject() -> None:
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    for file in BUNDLED_FILES:
        assert f'"{file.package}=={file.version}"' in pyproject


def fake_package(root: Path, file: BundledFile, content: bytes) -> Path:
    """An installed-looking ``file.package`` under ``root`` whose ``file.path`` holds
    ``content``: put ahead of site-packages, it is the one importlib.metadata finds."""
    info = root / f"{file.package.replace('-', '_')}-{file.version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {file.package}\nVersion: {file.version}\n"
    )
    (root / file.path).parent.mkdir(parents=True)
    (root / file.path).write_bytes(content)
    return root


@pytest.mark.parametrize("which", [f.name for f in BUNDLED_FILES])
def test_a_file_with_another_sha256_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    (file,) = (f for f in BUNDLED_FILES if f.name == which)
    monkeypatch.syspath_prepend(str(fake_package(tmp_path, file, b"not the model")))
    with pytest.raises(SemanticUnavailable, match="SHA-256") as raised:
        bundled_model_dir()
    assert which in str(raised.value) and "\n" not in str(raised.value)


def test_a_missing_package_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = BundledFile("tokenizer.json", "saihm-no-such-package", "1.0", "x/t.json", "0" * 64)
    monkeypatch.setattr(bundled_module, "BUNDLED_FILES", (BUNDLED_FILES[0], missing))
    with pytest.raises(SemanticUnavailable, match=r"saihm-no-such-package==1\.0"):
        bundled_model_dir()


def test_serve_refuses_to_start_on_a_wrong_sha256(tmp_path: Path) -> None:
    """The real command, no flags, with the ONNX file's package replaced by one whose file is
    not the pinned one: one line, a non-zero exit, and no data directory created."""
    fake = fake_package(tmp_path / "site", BUNDLED_FILES[0], b"\0" * 1024)
    path = os.pathsep.join(p for p in (str(fake), os.environ.get("PYTHONPATH")) if p)
    done = run_saihm("serve", "--data", str(tmp_path / "data"), env={"PYTHONPATH": path})
    line = one_line_refusal(done)
    assert "SHA-256" in line and "onnx/model.onnx" in line and "--embedding-model none" in line
    assert not (tmp_path / "data").exists()


def recall(url: str, token: str, question: str) -> list[str]:
    status, items = post(url, token, "saihm_recall", {"query": question, "limit": 10})
    assert status == 200, items
    return [item["plaintext"] for item in items]


def test_serve_with_no_flags_understands_a_paraphrase(tmp_path: Path) -> None:
    """Issue 33: ``make run``, twelve facts, and "Who is her boss?" (no word in common with
    its fact) finds "At Moonbase her manager is Sofia Lindqvist." in the top 3."""
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data), model=True) as (_proc, url):
        token = holder_create(data)["token"]
        for fact in FACTS:
            assert post(url, token, "saihm_remember", {"content": fact})[0] == 200
        assert FACTS[0] in recall(url, token, "Who is her boss?")[:3]
        assert FACTS[1] in recall(url, token, "How old is her son?")[:3]
        assert recall(url, token, "How many moons does Jupiter have?") == []
    banner = (tmp_path / "serve.out").read_text()
    assert "saihm: semantic stage all-MiniLM-L6-v2" in banner and "SHA-256 checked" in banner


def test_embedding_model_none_serves_lexical_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serving(tmp_path, "--data", str(data), "--embedding-model", "none") as (_proc, url):
        token = holder_create(data)["token"]
        assert post(url, token, "saihm_remember", {"content": FACTS[0]})[0] == 200
        assert recall(url, token, "Who is her boss?") == []
        assert recall(url, token, "Who manages her at Moonbase?") == [FACTS[0]]
    banner = (tmp_path / "serve.out").read_text()
    assert "saihm: semantic stage off (lexical only)" in banner
    assert "all-MiniLM" not in banner


def test_the_banner_names_a_model_folder(tmp_path: Path) -> None:
    folder = bundled_model_dir()
    with serving(tmp_path, "--data", str(tmp_path / "data"), "--embedding-model", str(folder)):
        pass
    assert f"saihm: semantic stage the model in {folder}" in (tmp_path / "serve.out").read_text()


class Blocked(ConceptEmbedder):
    """Every call waits until ``gate`` is set; ``entered`` says one is waiting."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        self.entered.set()
        assert self.gate.wait(WAIT)
        return super().embed(texts)


def test_remember_answers_while_the_model_is_blocked(tmp_path: Path) -> None:
    """New cells are embedded off the request path: with the model stuck, remember still
    answers, and the worker embeds the cell once the model is free."""
    world = make_world(tmp_path)
    world.store.close()
    embedder = Blocked()
    store = Store(world.config, clock=world.clock, embedder=embedder)
    world.operator = Operator(store, world.config)
    try:
        a = world.holder()
        answered: list[object] = []
        writer = threading.Thread(
            target=lambda: answered.append(
                world.call(a, "saihm_remember", content="the user wants dark mode")
            )
        )
        writer.start()
        writer.join(WAIT)
        assert not writer.is_alive() and answered, "remember waited for the model"
        assert not embedder.gate.is_set()
        assert embedder.entered.wait(WAIT)  # the worker is embedding the new cell
        embedder.gate.set()
        assert store.warmer is not None and store.warmer.drained.wait(WAIT)
        got = world.call(a, "saihm_recall", query="which theme does the user like?")
        assert [i["plaintext"] for i in got] == ["the user wants dark mode"]
    finally:
        embedder.gate.set()
        world.store.close()


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, "bundled"),
        ({"SAIHM_EMBEDDING_MODEL": "none"}, None),
        ({"SAIHM_EMBEDDING_MODEL": "/m"}, Path("/m")),
    ],
)
def test_the_option_from_the_environment(environ: dict[str, str], expected: object) -> None:
    """``SAIHM_EMBEDDING_MODEL`` takes the same values as the option: unset is the bundled
    model, ``none`` is off, anything else a folder."""
    from saihm.commands.main import build_parser
    from saihm.commands.serve import _settle_model
    from saihm.commands.settings import parse_with_settings

    parser = build_parser()
    (serve,) = (
        a.choices["serve"] for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    )
    args = parse_with_settings(serve, ["--data", "x"], environ)
    _settle_model(args)
    assert args.embedding_model == (bundled_model_dir() if expected == "bundled" else expected)
