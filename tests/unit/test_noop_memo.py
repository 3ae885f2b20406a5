"""The no-op memo (buildctl/store/noop_memo.py): an entry is trusted only while everything it records
holds; anything else is a miss, so the full path runs. No engine: the base image's id is the caller's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from buildctl.store import noop_memo
from buildctl.store.key import tree_digest


@pytest.fixture
def entry(tmp_path: Path) -> tuple[Path, str, dict]:
    """A recorded entry over real files: a recipe and its fragment, an artifact, a rendered copy, a source tree."""
    (tmp_path / "recipes").mkdir()
    recipe, fragment = tmp_path / "recipes" / "r.yaml", tmp_path / "recipes" / "f.yaml"
    recipe.write_text("extends: f.yaml\n")
    fragment.write_text("framework: {name: demofw}\n")
    artifact = tmp_path / "artifacts" / "r" / "0123456789abcdef"
    artifact.mkdir(parents=True)
    (artifact / "demofw-0.1.0-py3-none-any.whl").write_bytes(b"PK")
    wheels = [{"file": "demofw-0.1.0-py3-none-any.whl", "sha256": noop_memo.file_sha256(artifact / "demofw-0.1.0-py3-none-any.whl"),
               "bytes": 2}]
    (artifact / "manifest.json").write_text(json.dumps({"recipe": "r", "wheels": wheels}))
    render = tmp_path / "build" / "r" / "0123456789abcdef"
    render.mkdir(parents=True)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.cpp").write_text("int a;\n")
    root = tmp_path / "artifacts"
    digest = noop_memo.request_digest({"recipe": "r", "set": []}, "code")
    noop_memo.record(root, digest, {
        "recipe": "r", "key": "0123456789abcdef", "artifact_dir": str(artifact), "render_dir": str(render),
        "base_image": "buildctl/base:bookworm", "base_image_id": "sha256:1", "pull": "missing",
        "reads": {str(p): noop_memo.file_sha256(p) for p in (recipe, fragment)},
        "source_tree": [str(src), tree_digest(src)], "manifest_sha256": noop_memo.file_sha256(artifact / "manifest.json"),
        "report_sha256": None, "warnings": [], "skipped": ["image", "compile", "wheel"],
        "rows": [["recipe", "r"]], "artifact": "artifacts/r/0123456789abcdef", "manifest": {"recipe": "r"},
        "verification": None, "wheels": wheels, "fingerprints": {}})
    return root, digest, {"recipe": recipe, "fragment": fragment, "artifact": artifact, "render": render, "src": src}


def test_an_entry_holds_while_nothing_it_records_changed(entry):
    root, digest, _ = entry
    found = noop_memo.read(root, digest)
    assert found is not None and found["key"] == "0123456789abcdef"
    assert noop_memo.still_holds(found)


@pytest.mark.parametrize("change", [
    "fragment edited", "recipe removed", "manifest rewritten", "artifact removed", "rendered copy removed",
    "source file edited", "source file added",
])
def test_a_change_to_what_the_entry_records_is_a_miss(entry, change):
    root, digest, paths = entry
    if change == "fragment edited":
        paths["fragment"].write_text("framework: {name: demofw, version: '0.2'}\n")
    elif change == "recipe removed":
        paths["recipe"].unlink()
    elif change == "manifest rewritten":
        (paths["artifact"] / "manifest.json").write_text('{"recipe": "r", "wheels": []}')
    elif change == "artifact removed":
        (paths["artifact"] / "manifest.json").unlink()
    elif change == "rendered copy removed":
        paths["render"].rmdir()
    elif change == "source file edited":
        (paths["src"] / "a.cpp").write_text("int a = 1;\n")
    else:
        (paths["src"] / "b.cpp").write_text("int b;\n")
    assert not noop_memo.still_holds(noop_memo.read(root, digest))


@pytest.mark.parametrize("text", ["", "{", "[]", '{"version": 1}', json.dumps({"version": 999})])
def test_an_entry_that_is_not_what_record_writes_is_a_miss(entry, text):
    root, digest, _ = entry
    noop_memo.entry_path(root, digest).write_text(text)
    assert noop_memo.read(root, digest) is None


def test_an_entry_with_a_field_of_another_type_is_a_miss(entry):
    root, digest, _ = entry
    path = noop_memo.entry_path(root, digest)
    data = json.loads(path.read_text())
    data["rows"] = [["recipe", 1]]
    path.write_text(json.dumps(data))
    assert noop_memo.read(root, digest) is None


def test_another_request_or_other_code_names_another_entry(entry):
    root, digest, _ = entry
    assert noop_memo.request_digest({"recipe": "r", "set": ["build.type=Debug"]}, "code") != digest
    assert noop_memo.request_digest({"recipe": "r", "set": []}, "other code") != digest
    assert noop_memo.read(root, noop_memo.request_digest({"recipe": "r", "set": ["x=1"]}, "code")) is None


def test_the_code_fingerprint_changes_when_a_file_of_the_code_changes(tmp_path):
    code = tmp_path / "pkg"
    code.mkdir()
    module = code / "render.py"
    module.write_text("X = 1\n")
    before = noop_memo.code_fingerprint([code])
    assert noop_memo.code_fingerprint([code]) == before
    (code / "__pycache__").mkdir()  # bytecode is no change of the code
    (code / "__pycache__" / "render.cpython-311.pyc").write_bytes(b"\0")
    assert noop_memo.code_fingerprint([code]) == before
    module.write_text("X = 2\n")
    os.utime(module, ns=(1, 1))
    assert noop_memo.code_fingerprint([code]) != before


def test_a_store_that_cannot_be_written_keeps_no_memo(tmp_path):
    root = tmp_path / "artifacts"
    root.write_text("a file where the folder would be")
    noop_memo.record(root, "d" * 64, {"recipe": "r"})  # no error: the next no-op takes the full path
    assert noop_memo.read(root, "d" * 64) is None


def test_clean_prunes_the_entries_of_removed_artifacts_and_leaves_links_alone(entry, tmp_path):
    root, digest, paths = entry
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    (root / noop_memo.FOLDER / "link.json").symlink_to(elsewhere)
    assert noop_memo.prune(root) == 0 and noop_memo.read(root, digest) is not None
    (paths["artifact"] / "manifest.json").unlink()
    assert noop_memo.prune(root) == 1 and not noop_memo.entry_path(root, digest).exists()
    assert elsewhere.exists() and (root / noop_memo.FOLDER / "link.json").is_symlink()


# --- what the full path read, recorded when it read it (issue 31) --------------------------------------------


def _remember(tmp_path: Path, recipe_arg: str, reads, spec) -> tuple[Path, str]:
    """The full path's `noop.remember` after it found its artifact (a fake result: no engine)."""
    from types import SimpleNamespace

    from buildctl.cli import noop
    from buildctl.settings import Settings

    root = tmp_path / "artifacts"
    artifact = root / spec.name / "0123456789abcdef"
    artifact.mkdir(parents=True)
    wheel = artifact / "demofw-0.1.0-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"PK wheel")
    manifest = {"recipe": spec.name, "key": "0123456789abcdef",
                "wheels": [{"file": wheel.name, "sha256": noop_memo.file_sha256(wheel), "bytes": wheel.stat().st_size}]}
    (artifact / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "build" / spec.name / "0123456789abcdef").mkdir(parents=True)
    from buildctl.store.key import KeyInputs, source_digest

    result = SimpleNamespace(base_image_id="sha256:1", verify_error=None, artifact=artifact, report=None,
                             key="0123456789abcdef", manifest=SimpleNamespace(to_json=lambda: manifest),
                             inputs=KeyInputs({}, source_digest(spec), "sha256:1"), reads=())
    settings = Settings(artifacts=root)
    noop.remember(recipe_arg, [], settings=settings, no_preflight=False, spec=spec, reads=reads, result=result,
                  shown=noop.Shown([], [("recipe", spec.name)], ["image"]))
    return root, noop._request(recipe_arg, [], settings, False)


@pytest.fixture
def branches(tmp_path: Path, monkeypatch) -> dict[str, Path]:
    """Two copies of the recipes, the second with the demo fragment edited, and `current -> branchA`."""
    import shutil

    repo = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(tmp_path)
    for name in ("branchA", "branchB"):
        shutil.copytree(repo / "recipes", tmp_path / name)
        (tmp_path / name / "fragments" / "demofw.yaml").write_text(
            (repo / "recipes" / "fragments" / "demofw.yaml").read_text().replace(
                "path: ../../examples/demofw", f"path: {repo / 'examples' / 'demofw'}"))
    with (tmp_path / "branchB" / "fragments" / "demofw.yaml").open("a") as fh:
        fh.write("# branch B's fragment\n")
    (tmp_path / "current").symlink_to("branchA")
    return {"root": tmp_path, "current": tmp_path / "current"}


def test_the_memo_follows_no_symlink_a_recipe_was_read_through(branches):
    """5: re-point `current -> branchA` to branchB: the memo served branch A's key (it recorded resolved paths)."""
    from buildctl import recipe

    reads: list = []
    arg = "current/demo-cpu.yaml"
    spec = recipe.load(arg, reads=reads)
    root, digest = _remember(branches["root"], arg, reads, spec)
    assert noop_memo.still_holds(noop_memo.read(root, digest))
    (branches["current"]).unlink()
    (branches["current"]).symlink_to("branchB")
    assert not noop_memo.still_holds(noop_memo.read(root, digest))


def test_the_memo_records_the_files_as_they_were_read_not_as_they_are_when_it_writes(branches):
    """6: a build that waited on the key lock recorded edits made during the wait against the old key."""
    from buildctl import recipe

    reads: list = []
    arg = "branchA/demo-cpu.yaml"
    spec = recipe.load(arg, reads=reads)
    with (branches["root"] / "branchA" / "fragments" / "demofw.yaml").open("a") as fh:
        fh.write("# edited while the build waited for the key's lock\n")
    root, digest = _remember(branches["root"], arg, reads, spec)
    assert not noop_memo.still_holds(noop_memo.read(root, digest))


@pytest.mark.parametrize("change", ["wheel deleted", "wheel corrupted, same size"])
def test_the_memo_never_answers_for_a_wheel_that_is_not_the_one_published(branches, change):
    """4: a deleted wheel (and a corrupted one) still counted as up to date in the memo."""
    from buildctl import recipe

    reads: list = []
    spec = recipe.load("branchA/demo-cpu.yaml", reads=reads)
    root, digest = _remember(branches["root"], "branchA/demo-cpu.yaml", reads, spec)
    wheel = next((root / "demo-cpu" / "0123456789abcdef").glob("*.whl"))
    if change == "wheel deleted":
        wheel.unlink()
    else:
        with wheel.open("r+b") as fh:
            fh.write(b"XX")
    assert not noop_memo.still_holds(noop_memo.read(root, digest))


# --- the memo is untrusted input (issue 43, item 7) ----------------------------------------------------------

_NESTED = {"past the parser's depth": "[" * 100_000 + "]" * 100_000,
           "within the parser's depth": '{"a": ' * 900 + "{}" + "}" * 900}


def _nested_entry(entry, depth: str) -> tuple[Path, str, dict]:
    """The entry with its manifest replaced by deeply nested JSON (a file anyone who can write the root can make)."""
    root, digest, paths = entry
    path = noop_memo.entry_path(root, digest)
    path.write_text(path.read_text().replace('"manifest": {"recipe": "r"}', f'"manifest": {_NESTED[depth]}'))
    assert _NESTED[depth] in path.read_text()
    return root, digest, paths


@pytest.mark.parametrize("depth", list(_NESTED))
def test_a_deeply_nested_entry_is_a_miss_and_clean_removes_it(entry, depth):
    """`invoke build` and `invoke clean` ended in `internal error: RecursionError` on such an entry."""
    from buildctl.host.clean import clean

    root, digest, _ = _nested_entry(entry, depth)
    assert noop_memo.read(root, digest) is None
    result = clean(objects=(), root=root)
    assert result["failed"] == [] and not noop_memo.entry_path(root, digest).exists()


def test_the_no_op_passes_over_a_deeply_nested_entry(tmp_path, monkeypatch):
    """The no-op answers False (the full path runs and writes the entry again), never raises."""
    from buildctl.cli import noop
    from buildctl.settings import Settings

    monkeypatch.chdir(tmp_path)
    settings = Settings(artifacts=tmp_path / "artifacts")
    path = noop_memo.entry_path(settings.artifacts, noop._request("demo-cpu", [], settings, False))
    path.parent.mkdir(parents=True)
    for nested in _NESTED.values():
        path.write_text(f'{{"version": {noop_memo.VERSION}, "manifest": {nested}}}')
        assert noop.build("demo-cpu", [], settings=settings, no_preflight=False, as_json=True) is False
