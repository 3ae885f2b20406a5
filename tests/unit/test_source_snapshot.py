"""A local source is snapshotted once, at the key (issue 41): the key's digest and the tar the configure and
compile containers are sent come from one read of the tree, so an edit made after the key reaches neither;
what the tree sends is one declared rule (a git work tree: tracked plus untracked-not-ignored; elsewhere
everything), empty folders and names that are not UTF-8 included. No engine: the stream the engine would
be given is read here."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

from conftest import TEST_NAMESPACE

from buildctl import recipe
from buildctl.engine.transfer import Snapshot, snapshot_chunks
from buildctl.pipeline import stages
from buildctl.pipeline.stages import prepare as prepare_stage
from buildctl.store import source_tree


def sent(snapshot: Path) -> dict[str, bytes | None]:
    """{member name: contents (None for a folder or link)} of the stream the container would be sent."""
    tar = tarfile.open(fileobj=io.BytesIO(b"".join(snapshot_chunks(Snapshot(snapshot), "work/src", (0, 0)))))
    return {m.name: (tar.extractfile(m).read() if m.isreg() else None) for m in tar.getmembers()}


def tree(root: Path) -> Path:
    (root / "csrc").mkdir(parents=True)
    (root / "csrc" / "a.cpp").write_text("int a;\n")
    (root / "setup.py").write_text("print('setup')\n")
    return root


def test_an_edit_after_the_key_reaches_neither_the_key_nor_the_container(tmp_path):
    src = tree(tmp_path / "src")
    before = source_tree.digest(src)
    keyed = source_tree.snapshot(src, tmp_path / "snap.tar")
    assert keyed == before
    (src / "csrc" / "a.cpp").write_text("int a = 1; // edited after the key\n")
    assert sent(tmp_path / "snap.tar")["work/src/csrc/a.cpp"] == b"int a;\n"
    assert source_tree.digest(src) != keyed


def test_the_fetch_step_snapshots_the_tree_and_keys_the_snapshot(tmp_path, monkeypatch):
    """prepare: the key's source digest is the snapshot's; the tree edited afterwards changes neither."""
    src = tree(tmp_path / "demo")
    spec = recipe.load("demo-cpu", [f"framework.source={{path: '{src}'}}"])
    monkeypatch.setattr(prepare_stage, "_base_image", lambda run: None)
    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=tmp_path / "artifacts", render_root=tmp_path / "r"))
    prepared = prepare_stage.prepare(run, prepare_stage.render_files(run))
    assert prepared.inputs.source == source_tree.digest(src)
    (src / "setup.py").write_text("print('edited')\n")
    assert sent(prepared.source_snapshot.path)["work/src/setup.py"] == b"print('setup')\n"
    assert prepared.inputs.source != source_tree.digest(src)
    prepare_stage.discard(prepared)
    assert not prepared.context_dir.exists() and not prepared.source_snapshot.path.exists()


def test_a_git_work_tree_sends_what_git_tracks_and_what_it_does_not_ignore(tmp_path):
    src = tree(tmp_path / "src")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    subprocess.run(["git", "init", "-q"], cwd=src, check=True, env=env)
    (src / ".gitignore").write_text("/build/\n")
    subprocess.run(["git", "add", "-A"], cwd=src, check=True, env=env)
    (src / "new.cpp").write_text("int n;\n")  # untracked, not ignored: sent
    (src / "build").mkdir()
    (src / "build" / "CMakeCache.txt").write_text("stale\n")  # ignored: neither sent nor keyed
    (src / "tools" / "build").mkdir(parents=True)
    (src / "tools" / "build" / "gen.py").write_text("x = 1\n")  # a `build` folder git does not ignore: sent
    assert source_tree.rule(src) == source_tree.GIT_RULE
    names = set(sent_of(src, tmp_path))
    assert {"work/src/new.cpp", "work/src/tools/build/gen.py", "work/src/csrc/a.cpp"} <= names
    assert not any("/build/CMakeCache" in n or "/.git/" in n for n in names)


def sent_of(src: Path, tmp_path: Path) -> dict[str, bytes | None]:
    source_tree.snapshot(src, tmp_path / "s.tar")
    return sent(tmp_path / "s.tar")


def test_outside_git_everything_is_sent_empty_folders_and_any_name_bytes_keyed(tmp_path):
    src = tree(tmp_path / "src")
    (src / "build").mkdir()
    (src / "build" / "gen.so").write_bytes(b"ELF")  # no silent list of names: the tree's own
    assert source_tree.rule(src) == source_tree.ALL_RULE
    before = source_tree.digest(src)
    (src / "empty").mkdir()
    with_empty = source_tree.digest(src)
    assert with_empty != before
    odd = os.path.join(os.fsencode(src), b"caf\xe9.c")
    with open(odd, "wb") as fh:
        fh.write(b"int c;\n")
    with_odd = source_tree.digest(src)
    assert with_odd != with_empty
    os.rename(odd, os.path.join(os.fsencode(src), b"caf\xe8.c"))
    assert source_tree.digest(src) != with_odd
    names = sent_of(src, tmp_path)
    assert "work/src/build/gen.so" in names and "work/src/empty" in names
    assert any(n.startswith("work/src/caf") for n in names)


def test_taking_a_local_sources_snapshot_imports_no_docker_py(tmp_path):
    """A no-op build takes the snapshot's digest for its key: the snapshot's record must not bring in the
    engine's transfer code and docker-py with it (seen on a real no-op: tests/import_budget.py's list)."""
    src = tree(tmp_path / "src")
    code = ("import sys; from pathlib import Path; from types import SimpleNamespace\n"
            "from buildctl.pipeline.stages import prepare\n"
            f"run = SimpleNamespace(spec=SimpleNamespace(framework=SimpleNamespace(source=SimpleNamespace("
            f"kind='path', path={str(src)!r}))))\n"
            f"snap, digest = prepare._snapshot(run, Path({str(tmp_path / 'ctx')!r}))\n"
            "assert snap is not None and digest\n"
            "print(sorted(m for m in sys.modules if m == 'docker' or m.startswith('buildctl.engine.transfer')))\n")
    out = subprocess.run([os.sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
