"""Recipe loading: safe YAML, extends merging, --set overrides, validation errors, the hostile corpus.

The corpus (tests/corpus/*.yaml, expectations in tests/corpus/expected.yaml) is loaded through
`buildctl.cli.load_spec` (load + preflight, as every task does) and, for a handful, through the real
command line (`invoke render --recipe tests/corpus/X.yaml --out DIR`, run in this process: tests/invoke_here.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from invoke_here import invoke_here

from buildctl import recipe
from buildctl.cli.common import load_spec
from buildctl.errors import InputError, RecipeError
from buildctl.recipe import fields, loader, preflight
from buildctl.recipe.schema import Spec

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "corpus"
EXPECTED: dict[str, dict] = yaml.safe_load((CORPUS / "expected.yaml").read_text())


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    """Errors show paths relative to the working directory; tests see them as the CLI does."""
    monkeypatch.chdir(REPO)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def corpus_file(name: str, tmp_path: Path) -> Path:
    """The corpus file, or for a `generate:` entry the file the test writes."""
    if "generate" not in EXPECTED[name]:
        return CORPUS / name
    assert name == "huge.yaml", f"no generator for {name}"
    line = "# padding: a recipe is a few KB; this one is not.\n"
    return write(tmp_path / name, "description: huge\n" + line * ((2 << 20) // len(line)))


def load_error(path: Path | str, sets=None) -> RecipeError:
    with pytest.raises(RecipeError) as info:
        load_spec(str(path), sets)
    return info.value


# --- the corpus ---------------------------------------------------------------------------------


def test_corpus_is_complete():
    files = {p.name for p in CORPUS.glob("*.yaml")} - {"expected.yaml"}
    written = {n for n, e in EXPECTED.items() if "generate" in e}
    assert files | written == set(EXPECTED), "every corpus file needs an entry in expected.yaml and back"
    refused = [n for n, e in EXPECTED.items() if e["stage"] != "accept"]
    assert len(refused) >= 18
    for name, entry in EXPECTED.items():
        assert entry["stage"] in ("load", "preflight", "build", "accept"), name
        if entry["stage"] != "accept":
            assert len(entry["error"]) >= 2, f"{name}: name the location and the fix"
            assert any("fix:" in s for s in entry["error"]), f"{name}: expect the fix hint"
    for p in CORPUS.glob("*.yaml"):
        assert p.stat().st_size < 8192, f"{p.name}: corpus files stay small"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus(name, tmp_path):
    entry = EXPECTED[name]
    path = corpus_file(name, tmp_path)
    if entry["stage"] == "accept":
        spec, _ = load_spec(str(path.relative_to(REPO)))
        assert spec.name == path.stem
        return
    if entry["stage"] in ("preflight", "build"):
        recipe.load(str(path))  # the schema accepts it; only the compatibility tables (or a build) refuse it
    else:
        with pytest.raises(RecipeError):
            recipe.load(str(path))
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    start = time.perf_counter()
    if entry["stage"] == "build":  # it renders (marked); `invoke build` refuses it
        spec, _ = load_spec(str(shown))
        with pytest.raises(RecipeError) as info:
            preflight.refuse_placeholders(spec, source=str(shown))
        err = info.value
    else:
        err = load_error(shown)
    elapsed = time.perf_counter() - start
    text = str(err)
    assert isinstance(err, InputError) and err.exit_code == 2
    assert "\n" not in text and "\r" not in text, text
    assert "; fix: " in text
    for part in entry["error"]:
        assert part in text, f"{part!r} not in {text!r}"
    if entry["stage"] in ("preflight", "build"):
        assert err.line is None and err.field
    else:
        assert text.startswith(f"{err.file}:{err.line}:" if err.line else f"{err.file}:")
    assert elapsed < 1.0, f"{name}: {elapsed:.2f}s"


# A handful through the real command line: exit 2, one line on stderr, no traceback, nothing written.
CLI_CASES = ["alias_bomb.yaml", "python_tag.yaml", "ref_injection.yaml", "arch_too_old.yaml", "cycle_a.yaml",
             "unknown_key.yaml", "huge.yaml"]


@pytest.mark.parametrize("name", CLI_CASES)
def test_corpus_cli(name, tmp_path):
    path = corpus_file(name, tmp_path / "in")
    work = tmp_path / "work"
    work.mkdir()
    out = work / "out"
    arg = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
    proc = invoke_here("render", "--recipe", arg, "--out", str(out), cwd=REPO,
                       env={"COLUMNS": "60", "BUILDCTL_DEBUG": ""})
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    for part in EXPECTED[name]["error"]:
        assert part in lines[0]
    assert proc.stdout == ""
    assert list(work.iterdir()) == [], "nothing may be written on bad input"


def test_alias_bomb_is_refused_before_anything_is_built(monkeypatch):
    """The alias is seen in the event stream: no node graph is composed, nothing is expanded."""

    def explode(*a, **k):
        raise AssertionError("composed a document with aliases")

    monkeypatch.setattr(yaml, "compose", explode)
    start = time.perf_counter()
    with pytest.raises(RecipeError, match="anchors and aliases are not allowed"):
        recipe.load(str(CORPUS / "alias_bomb.yaml"))
    assert time.perf_counter() - start < 0.5


def test_python_tag_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    text = f'description: !!python/object/apply:os.system ["touch {marker}"]\n'
    with pytest.raises(RecipeError, match="is not allowed"):
        recipe.parse_yaml(text, "x.yaml")
    assert not marker.exists()


def test_a_text_is_parsed_once_and_every_caller_gets_its_own_copy(tmp_path):
    """A fragment is read again for every recipe that extends it: its text is parsed once, and each
    load gets data of its own (a caller changing it changes no other load); an edited file is new text."""
    from buildctl.recipe import safe_yaml

    text = "name: x\nbuild:\n  features: {USE_A: true}\n  cuda_arch: ['8.0']\n"
    first = recipe.parse_yaml(text, "x.yaml")
    hits = safe_yaml._parse.cache_info().hits
    first.data["build"]["features"]["USE_A"] = False
    first.data["build"]["cuda_arch"].append("9.0")
    first.lines.clear()
    second = recipe.parse_yaml(text, "x.yaml")
    assert safe_yaml._parse.cache_info().hits == hits + 1
    assert second.data == {"name": "x", "build": {"features": {"USE_A": True}, "cuda_arch": ["8.0"]}}
    assert second.lines[("build", "cuda_arch")] == ("x.yaml", 4)
    fragment = tmp_path / "fragment.yaml"
    fragment.write_text(f"extends: {REPO / 'recipes' / 'demo-cpu.yaml'}\ndescription: before\n")
    assert recipe.load(str(fragment)).description == "before"
    fragment.write_text(f"extends: {REPO / 'recipes' / 'demo-cpu.yaml'}\ndescription: after\n")
    assert recipe.load(str(fragment)).description == "after"


@pytest.mark.parametrize(("text", "expect"), [
    ("a: !!int abc\n", "x.yaml:1: a: 'abc' is not a valid int"),
    ("a: !!bool maybe\n", "x.yaml:1: a: 'maybe' is not a valid bool"),
    ("!!python/name:os.system k: 1\n", "x.yaml:1: YAML tag 'tag:yaml.org,2002:python/name:os.system' is not allowed"),
    ("a: !!binary aGVsbG8=\n", "x.yaml:1: a: YAML tag 'tag:yaml.org,2002:binary' is not allowed"),
    ("a: 2024-01-01\n", "x.yaml:1: a: YAML tag 'tag:yaml.org,2002:timestamp' is not allowed"),
    ("a: 1\n---\nb: 2\n", "x.yaml:2: invalid YAML: but found another document"),
    ("a:\n\tb: 1\n", "x.yaml:2: invalid YAML"),
    ("a: [" * 1 + "[" * 250_000 + "]" * 250_001 + "\n", "x.yaml:1: nested deeper than 32 levels"),
    ("a: " + "{k: " * 100_000 + "1" + "}" * 100_000 + "\n", "x.yaml:1: nested deeper than 32 levels"),
    ("a: &x 1\n", "x.yaml:1: YAML anchors and aliases are not allowed"),
    ('"<<": {a: 1}\n', "x.yaml:1: YAML merge keys (<<) are not allowed"),
])
def test_hostile_yaml(text, expect):
    start = time.perf_counter()
    with pytest.raises(RecipeError) as info:
        recipe.parse_yaml(text, "x.yaml")
    assert expect in str(info.value)
    assert "\n" not in str(info.value)
    assert time.perf_counter() - start < 1.0


def test_unbounded_file_is_not_read_whole():
    """A path that never ends (or a multi-GB file) stops at the size limit, it is not read into memory."""
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero here")
    start = time.perf_counter()
    err = load_error("/dev/zero")
    assert "/dev/zero: file is larger than 1 MiB" in str(err)
    assert time.perf_counter() - start < 1.0


def test_unreadable_and_missing_files(tmp_path):
    assert "file not found" in str(load_error(tmp_path / "nope.yaml"))
    (tmp_path / "dir.yaml").mkdir()
    assert "cannot read" in str(load_error(tmp_path / "dir.yaml"))
    (tmp_path / "latin1.yaml").write_bytes(b"description: caf\xe9\n")
    assert "cannot read: UnicodeDecodeError" in str(load_error(tmp_path / "latin1.yaml"))


# --- merging ------------------------------------------------------------------------------------


def test_deep_merge_semantics():
    base = {"a": 1, "b": {"x": 1, "y": [1, 2], "z": {"deep": 1, "keep": 2}}, "l": [1, 2, 3], "d": {"k": 1}, "s": 1}
    child = {"a": 2, "b": {"y": [9], "z": {"deep": 3}, "new": True}, "l": [4], "d": "scalar", "s": {"now": "dict"}}
    merged = recipe.deep_merge(base, child)
    assert merged == {
        "a": 2,  # child wins
        "b": {"x": 1, "y": [9], "z": {"deep": 3, "keep": 2}, "new": True},  # mappings merge recursively
        "l": [4],  # lists are replaced, not appended
        "d": "scalar",  # a scalar replaces a mapping
        "s": {"now": "dict"},  # and the other way round
    }
    assert base["b"]["z"] == {"deep": 1, "keep": 2} and base["l"] == [1, 2, 3], "inputs are not mutated"
    child["b"]["y"].append(10)
    assert merged["b"]["y"] == [9], "the result shares nothing with the inputs"


def _stack(tmp_path: Path) -> Path:
    """grand <- parent <- child, plus two side fragments for the several-parents order."""
    write(tmp_path / "frags" / "grand.yaml", """\
base: {image: "debian:bookworm", distro: bookworm}
python: {version: "3.11", packages: [numpy, pyyaml]}
framework:
  name: demofw
  source: {path: src}
  version: "0.1.0"
build: {type: Release, max_jobs: 2, env: {A: grand, B: grand}}
""")
    write(tmp_path / "frags" / "parent.yaml", """\
extends: grand.yaml
python: {packages: [cmake]}
build: {type: Debug, env: {B: parent, C: parent}}
labels: [from-parent]
""")
    write(tmp_path / "side1.yaml", "build: {max_jobs: 3, env: {D: side1}}\ndescription: side1\n")
    write(tmp_path / "side2.yaml", "build: {max_jobs: 4}\ndescription: side2\n")
    return write(tmp_path / "child.yaml", """\
extends: [frags/parent.yaml, side1.yaml, side2.yaml]
build:
  env: {C: child}
""")


def test_multi_level_and_several_parents(tmp_path):
    spec = recipe.load(str(_stack(tmp_path)))
    assert spec.name == "child"
    assert spec.build.type == "Debug"  # parent over grand
    assert dict(spec.build.env) == {"A": "grand", "B": "parent", "C": "child", "D": "side1"}
    assert spec.build.max_jobs == 4  # later parents win over earlier ones
    assert spec.description == "side2"
    assert spec.python.packages == ("cmake",)  # a list is replaced whole
    assert spec.python.version == "3.11" and spec.labels == ("from-parent",)
    # A relative source path is relative to the file that names it (the grand fragment).
    assert spec.framework.source.path == str(tmp_path / "frags" / "src")


def test_own_values_win_over_all_parents(tmp_path):
    child = _stack(tmp_path)
    write(child, child.read_text() + "  max_jobs: 7\ndescription: own\n")
    spec = recipe.load(str(child))
    assert spec.build.max_jobs == 7 and spec.description == "own"


def test_extends_a_single_string_and_a_shipped_recipe(tmp_path):
    mine = write(tmp_path / "mine.yaml", f"extends: {REPO / 'recipes' / 'cuda12.1-nccl2.18.yaml'}\n"
                                         "build: {cuda_arch: ['9.0']}\nname: my-cuda\n")
    spec = recipe.load(str(mine))
    shipped = recipe.load("cuda12.1-nccl2.18")
    assert spec.name == "my-cuda"
    assert spec.build.cuda_arch == ("9.0",)
    assert spec.toolchain == shipped.toolchain and spec.framework == shipped.framework


def test_error_in_a_fragment_points_at_the_fragment(tmp_path):
    write(tmp_path / "frag.yaml", "# comment\nbuild:\n  cache: ccachee\n")
    child = write(tmp_path / "child.yaml",
                  f"extends: [{REPO / 'recipes' / 'demo-cpu.yaml'}, frag.yaml]\ndescription: x\n")
    err = load_error(child)
    assert err.file.endswith("frag.yaml") and err.line == 3 and err.field == "build.cache"
    assert "use 'ccache', 'sccache' or 'none'" in str(err)


# --- line numbers and the error format ----------------------------------------------------------


def test_error_format():
    err = RecipeError("r.yaml", "build.type", "bad", "use Debug", 7)
    assert str(err) == "r.yaml:7: build.type: bad; fix: use Debug"
    assert str(RecipeError("r.yaml", "", "empty", "write one")) == "r.yaml: empty; fix: write one"
    assert err.exit_code == 2


@pytest.mark.parametrize("line", [3, 9, 14])
def test_line_numbers(tmp_path, line):
    body = ["extends: " + str(REPO / "recipes" / "demo-cpu.yaml")] + ["# filler"] * 20
    body[line - 2] = "build:"
    body[line - 1] = "  max_jobs: lots"
    path = write(tmp_path / "r.yaml", "\n".join(body) + "\n")
    err = load_error(path)
    assert err.line == line and err.field == "build.max_jobs"
    assert str(err).startswith(f"{err.file}:{line}: build.max_jobs: ")


def test_paths_in_errors_are_relative_to_the_working_directory():
    err = load_error("tests/corpus/unknown_key.yaml")
    assert err.file == "tests/corpus/unknown_key.yaml"
    err = load_error("tests/corpus/arch_too_old.yaml")  # preflight names the same file the same way
    assert err.file == "tests/corpus/arch_too_old.yaml"


# --- --set --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("item", "path", "value"), [
    ("build.max_jobs=4", ["build", "max_jobs"], 4),
    ("build.venv_guard=false", ["build", "venv_guard"], False),
    ("verify.allreduce=true", ["verify", "allreduce"], True),
    ('build.cuda_arch=["8.0", "9.0"]', ["build", "cuda_arch"], ["8.0", "9.0"]),
    ("labels=[a, b]", ["labels"], ["a", "b"]),
    ("toolchain.cuda.version=12.4", ["toolchain", "cuda", "version"], "12.4"),  # not the float 12.4
    ("python.version=3.10", ["python", "version"], "3.10"),  # not 3.1
    ("framework.version=2.1.0", ["framework", "version"], "2.1.0"),
    ("build.env.CFLAGS=-O2 -g", ["build", "env", "CFLAGS"], "-O2 -g"),
    ("build.env.X=a=b", ["build", "env", "X"], "a=b"),  # only the first = splits
    ("build.env.RUN=39144451", ["build", "env", "RUN"], "39144451"),  # env values are text, not numbers
    ("build.env.RUN=0b101", ["build", "env", "RUN"], "0b101"),  # not YAML 1.1's binary 5
    ("build.max_jobs=0x10", ["build", "max_jobs"], 16),  # a field that takes integers gets YAML's
    ("build.source_date_epoch=1700000000", ["build", "source_date_epoch"], 1700000000),
    ("build.max_jobs=0", ["build", "max_jobs"], 0),  # out of range: validation says so, as a number
    ("description=", ["description"], ""),
    ("build.features={USE_MKLDNN: false}", ["build", "features"], {"USE_MKLDNN": False}),
])
def test_set_parsing(item, path, value):
    assert loader._parse_override(item) == (path, value)


@pytest.mark.parametrize(("item", "expect"), [
    ("build.type", "--set: build.type: expected KEY=VALUE"),
    ("=Debug", "--set: empty path component"),
    ("build..type=Debug", "--set: build..type: empty path component"),
    ("build.cuda_arch=[8.0,", "--set build.cuda_arch: invalid YAML"),
    ("build.env.X=&a 1", "--set build.env.X: YAML anchors and aliases are not allowed"),
    ("description=!!python/object/apply:os.system [id]", "--set description: YAML tag"),
])
def test_set_parse_errors(item, expect):
    with pytest.raises(RecipeError) as info:
        loader._parse_override(item)
    assert expect in str(info.value)
    assert info.value.line is None


def test_set_overrides_are_applied_and_validated():
    spec, _ = load_spec("cuda12.1-nccl2.18", ["build.type=Debug", "build.max_jobs=8", "build.type=RelWithDebInfo",
                                              "build.env.CC=gcc-11", 'build.cuda_arch=["8.0", "9.0"]'])
    assert spec.build.type == "RelWithDebInfo"  # repeatable: the last one wins
    assert spec.build.max_jobs == 8 and spec.build.env["CC"] == "gcc-11"
    assert spec.build.cuda_arch == ("8.0", "9.0")
    spec, _ = load_spec("demo-rocm", ["build.env.BUILDCTL_TEST_RUN=39144451"])
    assert spec.build.env["BUILDCTL_TEST_RUN"] == "39144451"  # digits only, by chance: still the text typed
    spec, _ = load_spec("demo-cpu", ["toolchain.cuda.version=13.2", "toolchain.cuda.install=pip",
                                     "toolchain.cuda.pip_release=13.2.86", 'build.cuda_arch=["9.0"]'])
    assert spec.toolchain.cuda.version == "13.2" and spec.accelerator == "cuda"  # nested new keys


def test_set_one_value_for_a_list_field_is_a_list_of_one():
    """`--set build.cuda_arch=9.0` was refused ("Input should be a valid tuple; fix: write a list"): one value
    for a list-typed field is now a one-element list, and each element is still validated."""
    spec, _ = load_spec("cuda12.1-nccl2.18", ["build.cuda_arch=9.0", "verify.expect.arch=9.0a", "labels=mine"])
    assert spec.build.cuda_arch == ("9.0",) and spec.verify.expect.arch == ("9.0a",) and spec.labels == ("mine",)
    spec, _ = load_spec("rocm6.2", ["toolchain.rocm.arch=gfx942", "python.packages=numpy<2"])
    assert spec.toolchain.rocm.arch == ("gfx942",) and "numpy<2" in spec.python.packages
    spec, _ = load_spec("cuda12.1-nccl2.18", ["verify.expect.arch=null", "build.env.ARCHS=9.0"])
    assert spec.verify.expect.arch is None and spec.build.env["ARCHS"] == "9.0"  # null and non-list fields as given
    err = load_error("cuda12.1-nccl2.18", ["build.cuda_arch=9.0x"])
    assert "--set build.cuda_arch: build.cuda_arch.0: malformed value '9.0x'; fix: write archs like" in str(err)
    err = load_error("cuda12.1-nccl2.18", ["build.type=[Debug]"])
    assert "build.type: Input should be 'Release'" in str(err)  # a list for a scalar field stays refused


def test_set_names_an_item_of_a_list_by_its_position():
    """`--set extensions.0.source.ref=SHA`: one field of a list item (invoke bisect sets an extension's ref or
    version so); the rest of the item stays as the recipe has it, and the value is validated as a file's."""
    spec, _ = load_spec("ext-torch2.6-debian", ["extensions.0.source.pypi=torch-scatter==2.1.1",
                                                "extensions.0.source.sha256=" + "a" * 64])
    (ext,) = spec.extensions
    assert ext.source.pypi == "torch-scatter==2.1.1" and ext.source.sha256 == "a" * 64 and ext.smoke
    spec, _ = load_spec("ext-torch2.6-debian", ["extensions.0.source={git: 'https://github.com/rusty1s/pytorch_scatter', "
                                                "ref: 2.1.2}"])
    assert spec.extensions[0].source.git == "https://github.com/rusty1s/pytorch_scatter"
    assert spec.extensions[0].source.pypi is None and spec.extensions[0].name == "torch-scatter"
    err = load_error("ext-torch2.6-debian", ["extensions.1.source.ref=abc"])
    assert "--set extensions.1.source.ref: extensions: a list of 1: no item '1'; fix: name an item by its " \
           "position, from 0: e.g. --set extensions.0.source.ref" in str(err)
    err = load_error("ext-torch2.6-debian", ["extensions.scatter.source.ref=abc"])
    assert "no item 'scatter'" in str(err)
    err = load_error("ext-torch2.6-debian", ["extensions.0.source.ref=v1; rm -rf /"])
    assert "--set extensions.0.source.ref: extensions.0.source" in str(err)


@pytest.mark.parametrize(("sets", "expect"), [
    (["build.type=Nightly"], "--set build.type: build.type: Input should be 'Release', 'Debug' or 'RelWithDebInfo'"),
    (["build.tpye=Debug"], "--set build.tpye: build.tpye: unknown key; fix: remove it or fix the spelling"),
    (["framework.source.ref=v1; rm -rf /"], "--set framework.source.ref: framework.source.ref: malformed value"),
    (["build.max_jobs=0"], "--set build.max_jobs: build.max_jobs: "),
    (["build.type.x=1"], "--set build.type.x: build.type: "),
    (["toolchain.cuda.runfile.sha256=abc"], "--set toolchain.cuda.runfile.sha256: toolchain.cuda.runfile.sha256: malformed"),
    (['build.cuda_arch=["7.0"]'], "recipes/demo-cuda13.yaml: build.cuda_arch: CUDA 13.2 no longer compiles 7.0"),
])
def test_set_errors_name_the_override(sets, expect):
    recipe_name = "demo-cuda13" if "7.0" in sets[0] else "cuda12.1-nccl2.18"
    err = load_error(recipe_name, sets)
    assert expect in str(err)
    if str(err).startswith("--set"):
        assert err.line is None


# --- name or path -------------------------------------------------------------------------------


def test_recipe_path_name_or_path():
    assert recipe.recipe_path("cuda12.1-nccl2.18") == recipe.recipes_dir() / "cuda12.1-nccl2.18.yaml"
    assert recipe.recipe_path("demo-cpu") == recipe.recipes_dir() / "demo-cpu.yaml"
    assert recipe.recipe_path("tests/corpus/empty.yaml") == Path("tests/corpus/empty.yaml")
    assert recipe.recipe_path("mine.yml") == Path("mine.yml")
    assert recipe.recipe_path("some/dir/recipe") == Path("some/dir/recipe")


def test_name_and_path_load_the_same(tmp_path):
    by_name = recipe.load("cuda12.1-nccl2.18")
    by_path = recipe.load("recipes/cuda12.1-nccl2.18.yaml")
    by_abs = recipe.load(str(REPO / "recipes" / "cuda12.1-nccl2.18.yaml"))
    assert by_name == by_path == by_abs
    copy = write(tmp_path / "anywhere" / "cuda12.1-nccl2.18.yaml",
                 f"extends: {REPO / 'recipes' / 'cuda12.1-nccl2.18.yaml'}\n")
    assert recipe.load(str(copy)) == by_name  # any YAML file, anywhere


def test_unknown_name_is_one_line_with_the_fix():
    err = load_error("cuda99-nope")
    assert str(err) == "recipes/cuda99-nope.yaml: file not found; fix: check the path or run `invoke recipes`"


def test_every_shipped_recipe_loads():
    names = [p.stem for p in recipe.list_recipes()]
    assert {"cpu", "cuda12.1-nccl2.18", "rocm6.2", "ascend-cann8.0", "demo-cpu"} <= set(names)
    for name in names:
        spec = recipe.load(name)
        assert spec.name == name


# --- resolved output ----------------------------------------------------------------------------


def test_masked_dump_hides_credentials():
    site = {"pip_index_url": "https://alice:s3cr3t-t0ken@pypi.corp.example/simple",
            "pip_extra_index_urls": ["https://bob:an0ther@extra.example/simple"],
            "http_proxy": "http://carol:pr0xypw@proxy.example:3128"}
    spec = recipe.load("demo-cpu", site=site)
    assert spec.site.pip_index_url == site["pip_index_url"]  # the spec keeps the real value
    dumped = recipe.masked_dump(spec)
    assert dumped["site"]["pip_index_url"] == "https://***@pypi.corp.example/simple"
    assert dumped["site"]["pip_extra_index_urls"] == ["https://***@extra.example/simple"]
    assert dumped["site"]["http_proxy"] == "http://***@proxy.example:3128"
    text = recipe.resolved_yaml(spec)
    for secret in ("s3cr3t-t0ken", "an0ther", "pr0xypw", "alice", "bob"):
        assert secret not in text
    assert yaml.safe_load(text)["name"] == "demo-cpu"


def test_resolved_yaml_round_trips():
    spec = recipe.load("cuda12.1-nccl2.18")
    from buildctl.recipe.schema import Spec

    assert Spec.model_validate(yaml.safe_load(recipe.resolved_yaml(spec))) == spec


# --- docs/recipes.md stays true -----------------------------------------------------------------


DOC = REPO / "docs" / "recipes.md"


def test_docs_name_every_field():
    """Every field of every section of the schema is documented."""
    from pydantic import BaseModel

    from buildctl.recipe import schema as spec_mod

    text = DOC.read_text()
    models = [m for m in vars(spec_mod).values()
              if isinstance(m, type) and issubclass(m, BaseModel) and m.__module__.startswith("buildctl.recipe.")]
    missing = [f"{m.__name__}.{f}" for m in models for f in m.model_fields
               if f"`{f}`" not in text and f".{f}`" not in text]
    assert not missing, f"docs/recipes.md does not mention {missing}"
    for var in ("BUILDCTL_CA_CERT", "BUILDCTL_PIP_INDEX_URL", "BUILDCTL_APT_MIRROR", "BUILDCTL_HTTP_PROXY",
                "BUILDCTL_HTTPS_PROXY", "BUILDCTL_NO_PROXY", "BUILDCTL_NETWORK", "BUILDCTL_DOWNLOAD_CACHE",
                "BUILDCTL_BASE_IMAGE", "BUILDCTL_DEBUG", "BUILDCTL_RECIPES_DIR"):
        assert var in text


def test_docs_error_examples_are_real():
    """The example errors in docs/recipes.md are what the corpus recipes really give."""
    import re

    examples = re.findall(r"`([a-z_]+\.yaml(?::\d+)?: [^`]+)`", DOC.read_text())
    assert len(examples) >= 8
    for example in examples:
        name = example.split(":", 1)[0]
        err = load_error(f"tests/corpus/{name}")
        assert example.split("…")[0].rstrip() in str(err), (example, str(err))


def test_docs_resolved_example_is_current():
    """The annotated resolved cuda12.1-nccl2.18 in the docs is `invoke show`'s output, comments aside."""
    text = DOC.read_text()
    start = text.index("```yaml\nname: cuda12.1-nccl2.18")
    block = text[start + len("```yaml\n"):text.index("```", start + 8)]
    assert yaml.safe_load(block) == recipe.masked_dump(recipe.load("cuda12.1-nccl2.18"))


@pytest.mark.parametrize("path", recipe.list_recipes(), ids=lambda p: p.stem)
def test_resolved_spec_validates_again(path):
    """What is stored (recipe.resolved.yaml, bundle.json) must load again: repro re-validates it."""
    spec = recipe.load(str(path))
    assert Spec.model_validate(spec.model_dump(mode="json")) == spec


# --- hints ----------------------------------------------------------------------------------------


def _patterns(annotation, seen: set) -> set[str]:
    """Every string pattern in a type: Annotated metadata, union members, tuple items, dict keys, models."""
    from typing import get_args

    from pydantic import BaseModel, StringConstraints

    found: set[str] = set()
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return found
        seen.add(annotation)
        for f in annotation.model_fields.values():
            found |= _patterns(f.annotation, seen)
            found |= {m.pattern for m in f.metadata if isinstance(m, StringConstraints) and m.pattern}
        return found
    for meta in getattr(annotation, "__metadata__", ()):
        if isinstance(meta, StringConstraints) and meta.pattern:
            found.add(meta.pattern)
    for arg in get_args(annotation):
        found |= _patterns(arg, seen)
    return found


def test_every_pattern_of_the_spec_has_its_hint():
    """Hints were chosen by matching the start of each regex of the recipe schema, so a changed pattern
    silently lost its hint, and python.constraints (pattern '...==...') got the generic 'use only letters,
    digits and ._+- (pattern ^...$)'. Now each pattern is declared with its hint (recipe/fields.py's
    matching)."""

    patterns = _patterns(Spec, set())
    assert len(patterns) >= 17
    missing = sorted(p for p in patterns if p not in fields.PATTERN_HINTS)
    assert not missing, f"declare these with fields.matching(pattern, hint): {missing}"
    for pattern in patterns:
        err = {"type": "string_pattern_mismatch", "loc": ("x",), "input": "?", "ctx": {"pattern": pattern}}
        assert loader._hint_for(err) == fields.PATTERN_HINTS[pattern]
    err = load_error("cuda12.1-nccl2.18", ["python.constraints=[nvidia-cublas-cu12>=12]"])
    assert "python.constraints.0: malformed value" in str(err) and "fix: write a pin like " in str(err)
