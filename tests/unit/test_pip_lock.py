"""Issue 41: what pip installs into the builder venv. A recipe with a lock (`invoke lock`: name==version and
sha256 of every package) installs exactly it with --require-hashes, whatever index serves it, so the index is
no part of the key; a recipe without one lets pip choose, and then the index it chooses from is keyed (two
indexes serving numpy 1.26.4 and 2.2.0 gave one key). A lock made for other requirements is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from buildctl import recipe
from buildctl import render as render_mod
from buildctl.errors import InputError
from buildctl.render import pip_lock
from buildctl.store import key as key_mod

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
INDEX_A = {"pip_index_url": "http://127.0.0.1:9001/simple"}
INDEX_B = {"pip_index_url": "http://127.0.0.1:9002/simple"}


def key_of(r: render_mod.Rendered) -> str:
    return key_mod.artifact_key(r.files, "src", "sha256:base")


@pytest.fixture
def unlocked(tmp_path) -> str:
    """demo-cpu as a recipe of its own folder, with no lock beside it."""
    folder = tmp_path / "recipes"
    (folder / "fragments").mkdir(parents=True)
    shutil.copy(RECIPES / "fragments" / "demofw.yaml", folder / "fragments" / "demofw.yaml")
    text = (RECIPES / "demo-cpu.yaml").read_text()
    (folder / "demo-cpu.yaml").write_text(text)
    demofw = (folder / "fragments" / "demofw.yaml")
    demofw.write_text(demofw.read_text().replace("../../examples/demofw", str(RECIPES.parent / "examples" / "demofw")))
    return str(folder / "demo-cpu.yaml")


def lock_for(spec, packages: str = "numpy==1.26.4") -> str:
    """A lock as `invoke lock` writes it for `spec` (the hashes made up: the render does not check them)."""
    from buildctl.render import rendering

    facts = pip_lock.made_for(spec.python.version, *rendering.builder_requirements(spec))
    return pip_lock.header(facts, "http://index") + f"{packages} \\\n    --hash=sha256:{'a' * 64}\n"


def test_without_a_lock_the_index_pip_chooses_from_is_keyed(unlocked):
    a = render_mod.render(recipe.load(unlocked, site=INDEX_A))
    b = render_mod.render(recipe.load(unlocked, site=INDEX_B))
    assert "pip.lock" not in a.files and "pip.lock" not in b.files
    assert key_of(a) != key_of(b)
    assert key_mod.not_keyed_because("pip.conf", a.files) is None
    assert pip_lock.pip_line(a.spec, False) == ("no pip lock for demo-cpu: pip chooses the builder venv's versions "
                                                "from http://127.0.0.1:9001/simple (keyed); fix: invoke lock --recipe "
                                                "demo-cpu")


def test_with_a_lock_the_index_is_not_keyed_and_the_lock_is(unlocked):
    spec = recipe.load(unlocked)
    lock = Path(unlocked).parent / "locks" / "demo-cpu.txt"
    lock.parent.mkdir()
    lock.write_text(lock_for(spec))
    a = render_mod.render(recipe.load(unlocked, site=INDEX_A))
    b = render_mod.render(recipe.load(unlocked, site=INDEX_B))
    assert a.spec.python.lock == str(lock) and a.files["pip.lock"] == lock.read_text()  # outside the checkout
    assert key_of(a) == key_of(b)
    assert (str(lock), __import__("hashlib").sha256(lock.read_bytes()).hexdigest()) in a.reads  # the memo checks it
    assert "--require-hashes --no-deps -r /usr/local/share/buildctl/pip.lock" in a.files["Dockerfile"]
    lock.write_text(lock_for(spec, "numpy==2.2.0"))
    assert key_of(render_mod.render(recipe.load(unlocked, site=INDEX_A))) != key_of(a)


def test_a_lock_is_used_only_for_a_request_it_covers(unlocked):
    """A Debug request drops the repair's tools: the Release lock covers it. A --set that adds a package is not
    covered: pip chooses, the index is keyed, and the line says why and the fix. A file that is no lock is
    refused."""
    lock = Path(unlocked).parent / "locks" / "demo-cpu.txt"
    lock.parent.mkdir()
    lock.write_text(lock_for(recipe.load(unlocked)))
    assert "pip.lock" in render_mod.render(recipe.load(unlocked, ["build.type=Debug"])).files
    more = recipe.load(unlocked, ["python.packages=[numpy, cmake, ninja, pyyaml]"], site=INDEX_A)
    r = render_mod.render(more)
    assert "pip.lock" not in r.files
    assert key_of(r) != key_of(render_mod.render(recipe.load(unlocked, ["python.packages=[numpy, cmake, ninja, pyyaml]"],
                                                             site=INDEX_B)))
    assert pip_lock.pip_line(more, False) == (
        f"the lock {lock} does not cover this request's requirements (a --set or an edit changed them): pip chooses "
        "the builder venv's versions from http://127.0.0.1:9001/simple (keyed); fix: invoke lock --recipe demo-cpu "
        "(with the same --set)")
    lock.write_text("numpy==1.26.4\n")
    with pytest.raises(InputError, match="is not a lock buildctl made; fix: invoke lock --recipe demo-cpu"):
        render_mod.render(recipe.load(unlocked))


@pytest.mark.parametrize("name", [p.stem for p in recipe.list_recipes()])
def test_every_shipped_recipe_has_its_lock(name):
    """A prebuilt framework too: a torch from an index is in its lock with its dependencies."""
    spec = recipe.load(name, ["toolchain.ascend.installer.sha256=" + "0" * 64] if name == "ascend-cann8.0" else [])
    assert "pip.lock" in render_mod.render(spec).files, f"fix: invoke lock --recipe {name}"


def test_a_file_the_lock_does_not_name_is_diagnosed_naming_the_package():
    """pip --require-hashes refuses it; the diagnosis names the package, both hashes and the fix."""
    from buildctl.failure import diagnose

    log = ("Step 12/40 : RUN . /usr/local/lib/buildctl/secrets.sh  && python3.11 -m venv /opt/venv ...\n"
           "Collecting numpy==1.26.4 (from -r /usr/local/share/buildctl/pip.lock (line 40))\n"
           "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the "
           "package versions, please update the hashes. Otherwise, examine the package contents carefully; someone "
           "may have tampered with them.\n"
           "    numpy==1.26.4 from http://127.0.0.1:9002/simple/numpy/numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64"
           ".whl#sha256=" + "b" * 64 + " (from -r /usr/local/share/buildctl/pip.lock (line 40)):\n"
           "        Expected sha256 " + "a" * 64 + "\n"
           "             Got        " + "b" * 64 + "\n")
    found = diagnose.diagnose(log, step="image", exit_code=1, context={"recipe": "demo-cpu"})
    assert found.id == "checksum-mismatch"
    line = diagnose.render_diagnosis(found).splitlines()[0]
    assert "numpy==1.26.4" in found.cause and "expected aaaaaaaaaaaa…, got bbbbbbbbbbbb…" in found.cause
    assert found.fix.endswith("invoke lock --recipe demo-cpu --index-url URL") and line
