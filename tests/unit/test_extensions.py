"""Extensions (issue 18) without an engine: the recipe fields and their refusals, what the build script
does for them, the Requires-Dist pin (in_container/pin_requires.py), what the artifact records and how a
verification's findings become checks. The builds themselves: tests/integration/test_extensions_integration.py."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from buildctl import recipe
from buildctl import render as render_mod
from buildctl.errors import RecipeError, StepFailed
from buildctl.in_container import pin_requires
from buildctl.pipeline.stages import artifact as artifact_stage
from buildctl.recipe.schema import Spec
from buildctl.store import key as key_mod
from buildctl.verify import extensions

REPO = Path(__file__).resolve().parents[2]
SCATTER = {"name": "torch-scatter", "source": {"pypi": "torch-scatter==2.1.2", "sha256": "69b3" + "0" * 60}}


def spec_with(**changes) -> Spec:
    data = recipe.load("ext-torch2.6-debian").model_dump(mode="json")
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        holder = data
        for p in parents:
            holder = holder[p]
        holder[last] = value
    return Spec.model_validate(data)


# --- the recipe ------------------------------------------------------------------------------------


def test_a_prebuilt_framework_with_no_extension_is_refused():
    with pytest.raises(ValueError, match="nothing to build"):
        spec_with(extensions=[])


@pytest.mark.parametrize("bad, words", [
    ({"name": "torch-scatter", "source": {"pypi": "torch-scatter==2.1.2"}}, "needs sha256"),
    ({"name": "x", "source": {"pypi": "x==1", "sha256": "0" * 64, "git": "https://e.org/x"}}, "exactly one"),
    ({"name": "x", "source": {"git": "https://e.org/x"}}, "needs ref"),
    ({"name": "x", "source": {"pypi": "x>=1", "sha256": "0" * 64}}, "pattern"),
    ({**SCATTER, "env": {"MAX_JOBS": "9"}}, "MAX_JOBS is reserved"),
    ({**SCATTER, "env": {"FRAMEWORK_VERSION": "1"}}, "FRAMEWORK_VERSION is reserved"),
])
def test_an_extension_entry_that_cannot_build_is_refused(bad, words):
    with pytest.raises(ValueError, match=words):
        spec_with(extensions=[bad])


def test_the_framework_itself_or_a_name_twice_is_refused():
    with pytest.raises(ValueError, match="listed twice"):
        spec_with(extensions=[SCATTER, {**SCATTER, "name": "torch_scatter"}])
    with pytest.raises(ValueError, match="the framework itself"):
        spec_with(extensions=[{**SCATTER, "name": "torch"}])


def test_a_recipe_error_names_the_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text((REPO / "recipes/ext-torch2.6-debian.yaml").read_text().replace(
        "extends: fragments/torch-extensions-pyg.yaml",
        "extends: " + str(REPO / "recipes/fragments/torch-extensions-pyg.yaml"))
        .replace("prebuilt: base-image", "prebuilt: image"))
    with pytest.raises(RecipeError) as e:
        recipe.load(str(path))
    assert "framework.source.prebuilt" in str(e.value)


def test_recipes_without_extensions_dump_as_before():
    """The new fields are left out of the resolved recipe while unset: keys and build volumes survive."""
    dumped = recipe.masked_dump(recipe.load("pytorch2.6-cpu-trixie"))
    assert "extensions" not in dumped and "prebuilt" not in dumped["framework"]["source"]
    assert recipe.masked_dump(recipe.load("ext-torch2.6-debian"))["framework"]["source"] == {
        "git": None, "ref": None, "submodules": True, "path": None, "tarball": None, "prebuilt": "base-image"}


# --- the build script ------------------------------------------------------------------------------


def test_the_extension_step_builds_each_against_the_installed_framework():
    files = render_mod.render(recipe.load("ext-torch2.6-debian")).files
    script, dockerfile = files["build.sh"], files["Dockerfile"]
    assert "step configure" not in script and "python setup.py" not in script  # no torch built
    assert "step extensions" in script
    assert "--require-hashes" in script and "--hash=sha256:69b3aa43" in script
    assert "pip wheel --no-build-isolation --no-deps" in script
    assert 'pin_requires.py "$wheel" --dist torch --version "$FRAMEWORK_VERSION"' in script
    assert "-m venv --system-site-packages /opt/venv" in dockerfile  # Debian's torch is seen from the venv
    assert "COPY abi_check.py pin_requires.py cuda_checks.py /usr/local/share/buildctl/" in dockerfile
    assert "binutils" in dockerfile.split("FROM base AS runtime\n")[1].split("FROM base AS builder")[0]
    # a framework built here: installed into the venv before the extensions, its wheel in their key
    built = render_mod.render(spec_with(framework={"name": "pytorch", "source": {"path": "/src"}})).files["build.sh"]
    assert built.index("step wheel") < built.index("step extensions") \
        < built.index('pip install --no-deps --force-reinstall --no-compile "$OUT"/*.whl') < built.index("--- torch-scatter")


def test_an_extension_env_and_cuda_defaults_reach_only_its_build():
    spec = spec_with(extensions=[{**SCATTER, "env": {"WITH_METIS": "1"}}])
    script = render_mod.render(spec).files["build.sh"]
    block = script[script.index("--- torch-scatter"):]
    assert "export WITH_METIS=1" in block
    assert "WITH_METIS" not in script[:script.index("--- torch-scatter")]


def test_extension_files_are_rendered_and_keyed_only_for_a_recipe_with_extensions():
    plain = render_mod.render(recipe.load("demo-cpu")).files
    assert "abi_check.py" not in plain and "pin_requires.py" not in plain
    ext = render_mod.render(recipe.load("ext-torch2.6-debian")).files
    assert key_mod.artifact_key(ext, "s", "b") != key_mod.artifact_key({**ext, "pin_requires.py": ""}, "s", "b")


# --- pinning Requires-Dist -------------------------------------------------------------------------


def _wheel(tmp_path: Path, requires: list[str]) -> Path:
    info = "torch_scatter-2.1.2.dist-info"
    meta = "Metadata-Version: 2.1\nName: torch_scatter\nVersion: 2.1.2\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires) + "\nlong description\n"
    files = {"torch_scatter/__init__.py": b"", f"{info}/METADATA": meta.encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp313-cp313-linux_x86_64\n"}
    record = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},"
                     f"{len(d)}\n" for n, d in files.items()) + f"{info}/RECORD,,\n"
    path = tmp_path / "torch_scatter-2.1.2-cp313-cp313-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w") as z:
        for n, d in {**files, f"{info}/RECORD": record.encode()}.items():
            z.writestr(n, d)
    return path


def _metadata(wheel: Path) -> tuple[list[str], str]:
    with zipfile.ZipFile(wheel) as z:
        meta = z.read("torch_scatter-2.1.2.dist-info/METADATA").decode()
        record = z.read("torch_scatter-2.1.2.dist-info/RECORD").decode()
    row = next(r for r in record.splitlines() if r.startswith("torch_scatter-2.1.2.dist-info/METADATA,"))
    digest = base64.urlsafe_b64encode(hashlib.sha256(meta.encode()).digest()).rstrip(b"=").decode()
    assert row == f"torch_scatter-2.1.2.dist-info/METADATA,sha256={digest},{len(meta.encode())}"
    return [line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Requires-Dist:")], meta


@pytest.mark.parametrize("requires, expected", [
    ([], ["torch==2.6.0+debian"]),  # torch-scatter's own wheel names no torch at all
    (["scipy"], ["scipy", "torch==2.6.0+debian"]),
    (["torch>=2.0.0", "ninja"], ["torch==2.6.0+debian", "ninja"]),  # deepspeed's
    (["Torch (>=2.0)"], ["torch==2.6.0+debian"]),
    (['torch>=2; python_version >= "3.9"'], ['torch==2.6.0+debian ; python_version >= "3.9"']),
    (['torch>=2; extra == "all"', "torchvision"], ['torch>=2; extra == "all"', "torchvision", "torch==2.6.0+debian"]),
])
def test_the_pin_names_the_exact_framework_and_keeps_the_rest(tmp_path, requires, expected):
    wheel = _wheel(tmp_path, requires)
    out = tmp_path / "out"
    out.mkdir()
    pinned = Path(pin_requires.pin(str(wheel), "torch", "2.6.0+debian", str(out)))
    got, meta = _metadata(pinned)
    assert got == expected and meta.endswith("\nlong description\n")
    with zipfile.ZipFile(wheel) as a, zipfile.ZipFile(pinned) as b:
        assert [i.filename for i in a.infolist()] == [i.filename for i in b.infolist()]


def test_an_extension_of_the_set_it_imports_is_pinned_beside_the_framework(tmp_path):
    """torch-sparse imports torch-scatter but its setup.py requires only scipy: `requires: [torch-scatter]`
    pins the set's own, so that an install of torch-sparse from the index brings it."""
    wheel = _wheel(tmp_path, ["scipy", "torch-scatter>=2"])
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([sys.executable, pin_requires.__file__, str(wheel), "--dist", "torch", "--version", "2.6.0",
                           "--require", "torch-scatter==2.1.2", "--require", "torch-cluster==1.6.3", "--out", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    got, _ = _metadata(out / wheel.name)
    assert got == ["scipy", "torch-scatter==2.1.2", "torch==2.6.0", "torch-cluster==1.6.3"]
    bad = subprocess.run([sys.executable, pin_requires.__file__, str(wheel), "--dist", "torch", "--version", "2.6.0",
                          "--require", "torch-scatter"], capture_output=True, text=True)
    assert bad.returncode == 2 and "not NAME==VERSION" in bad.stderr


def test_requires_names_an_extension_listed_before_it():
    sparse = {"name": "torch-sparse", "source": {"pypi": "torch-sparse==0.6.18", "sha256": "2f14" + "0" * 60},
              "requires": ["torch_scatter"]}
    script = render_mod.render(spec_with(extensions=[SCATTER, sparse])).files["build.sh"]
    block = script[script.index("--- torch-sparse"):]
    assert '--require "torch-scatter==$(built_version torch-scatter)"' in block
    assert "--require \"" not in script[script.index("--- torch-scatter"):script.index("--- torch-sparse")]
    with pytest.raises(ValueError, match="requires torch_scatter, which is not an extension listed before it"):
        spec_with(extensions=[sparse, SCATTER])


def test_the_pin_refuses_bad_input_in_one_line(tmp_path):
    wheel = _wheel(tmp_path, [])
    for args, words in ((["--dist", "torch", "--version", "2.6 0"], "not a PEP 440 version"),
                        (["--dist", "../x", "--version", "2.6.0"], "not a distribution name")):
        done = subprocess.run([sys.executable, pin_requires.__file__, str(wheel), *args], capture_output=True, text=True)
        assert done.returncode == 2 and words in done.stderr and len(done.stderr.strip().splitlines()) == 1
    (tmp_path / "junk.whl").write_bytes(b"not a zip")
    done = subprocess.run([sys.executable, pin_requires.__file__, str(tmp_path / "junk.whl"), "--dist", "torch",
                           "--version", "2.6.0"], capture_output=True, text=True)
    assert done.returncode == 2 and "not a readable wheel" in done.stderr and "Traceback" not in done.stderr


# --- what the artifact records ---------------------------------------------------------------------


def test_each_extension_wheel_is_found_by_its_name(tmp_path):
    spec = recipe.load("ext-torch2.6-debian")
    (tmp_path / "extensions").mkdir()
    with pytest.raises(StepFailed, match="torch-scatter built no wheel"):
        artifact_stage.extension_wheels(spec, tmp_path, "log")
    wheel = _wheel(tmp_path / "extensions", [])
    (tmp_path / "extensions" / "built.txt").write_text("torch-scatter seconds=321 frontend=setuptools\n")
    [(found, facts)] = artifact_stage.extension_wheels(spec, tmp_path, "log")
    assert found == wheel and facts == {"seconds": "321", "frontend": "setuptools"}
    (tmp_path / "extensions" / "other-1.0-py3-none-any.whl").write_bytes(b"")
    with pytest.raises(StepFailed, match="no extension names: other"):
        artifact_stage.extension_wheels(spec, tmp_path, "log")


def test_the_manifest_says_what_each_extension_was_built_against(tmp_path):
    spec = recipe.load("ext-torch2.6-debian")
    (tmp_path / "extensions").mkdir()
    (tmp_path / "extensions" / "built-against.json").write_text(json.dumps({
        "version": "2.6.0+debian", "git_version": "Unknown", "cxx11_abi": True, "cuda": None, "hip": None,
        "dir": "/usr/lib/python3/dist-packages/torch", "cuda_arch_list": []}))
    pinned = Path(pin_requires.pin(str(_wheel(tmp_path, ["scipy"])), "torch", "2.6.0+debian",
                                   str(tmp_path / "extensions")))
    section = artifact_stage._extensions_section(spec, tmp_path, [], [(pinned, {"seconds": "9"})])
    assert section["built_against"] == {"version": "2.6.0+debian", "git_version": "Unknown", "cxx11_abi": True,
                                        "cuda": None, "hip": None, "cuda_arch_list": [], "framework": "torch",
                                        "from": "the base image", "wheel_sha256": None, "cuda_arch": []}
    [row] = section["extensions"]
    assert row["requires"] == ["torch==2.6.0+debian"] and row["build_seconds"] == 9 and row["version"] == "2.1.2"


def test_the_manifest_lists_an_extensions_pins_on_the_set_beside_the_framework(tmp_path):
    """torch-sparse's row (its `requires: [torch-scatter]`) names both pins its wheel carries: torch's and
    the set's torch-scatter, as pip will read them; the unrelated scipy stays out. Seen on the real stack:
    the row listed torch only."""
    sparse = {"name": "torch-scatter", "source": {"pypi": "torch-scatter==2.1.2", "sha256": "69b3" + "0" * 60},
              "requires": []}
    other = {"name": "torch-sparse", "source": {"pypi": "torch-sparse==0.6.18", "sha256": "2f14" + "0" * 60},
             "requires": ["torch-scatter"]}
    spec = spec_with(extensions=[sparse, other])
    (tmp_path / "extensions").mkdir()
    first = Path(pin_requires.pin(str(_wheel(tmp_path, ["scipy"])), "torch", "2.6.0", str(tmp_path / "extensions")))
    second_dir = tmp_path / "second"
    second_dir.mkdir()
    second = _wheel(second_dir, ["scipy", "torch-scatter==2.1.2", "torch==2.6.0"])
    section = artifact_stage._extensions_section(spec, tmp_path, [], [(first, {}), (second, {})])
    assert [row["requires"] for row in section["extensions"]] == [["torch==2.6.0"],
                                                                   ["torch-scatter==2.1.2", "torch==2.6.0"]]


# --- a verification's findings ---------------------------------------------------------------------


def test_findings_become_one_check_each_with_the_reason(tmp_path):
    reason = ("torchvision 0.21.0+cu124 (Requires-Dist: torch==2.6.0, CUDA 12, C++11 ABI 0) does not fit torch "
              "2.6.0+debian (CPU, C++11 ABI 1, git Unknown): _C.so: C++11 ABI 0 here, 1 in torch")
    (tmp_path / extensions.RESULT_FILE).write_text(json.dumps({"torch": {"version": "2.6.0+debian"}, "results": [
        {"name": "torch-scatter", "role": "extension", "version": "2.1.2", "ok": True, "reason": None,
         "smoke": {"ok": True, "detail": "scatter_add = index_add_", "seconds": 2.1}},
        {"name": "torchvision", "role": "beside", "version": "0.21.0+cu124", "ok": False, "reason": reason,
         "abi": [{"so": "x", "differs": ["y"]}], "unknown": "kept out"},
        "not a result"]}))
    found = extensions.load_result(tmp_path / extensions.RESULT_FILE, "test")
    checks = extensions.checks(found)
    assert [(c.name, c.ok) for c in checks] == [("extension torch-scatter", True), ("beside torchvision", False)]
    assert checks[1].detail == reason
    assert "unknown" not in found["results"][1]


def test_findings_that_are_not_an_extension_check_are_refused(tmp_path):
    """ext_set.py runs beside the extensions' code, which can write its output: issue 35, item 6, JSON nested
    100,000 deep raised RecursionError (an internal error); a number of 5000 digits is past int()'s limit."""
    path = tmp_path / extensions.RESULT_FILE
    for text in ("[1, 2]", "{not json", '{"results": "no"}', '{"results": ' + "[" * 100_000 + "]" * 100_000 + "}",
                 '{"results": [], "torch": {"version": ' + "9" * 5000 + "}}"):
        path.write_text(text)
        with pytest.raises(extensions.VerificationFailed):
            extensions.load_result(path, "test")
    with pytest.raises(extensions.VerificationFailed, match="wrote no"):
        extensions.load_result(tmp_path / "absent.json", "test")


def test_findings_of_the_wrong_types_are_read_as_no_value(tmp_path):
    path = tmp_path / extensions.RESULT_FILE
    path.write_text(json.dumps({"torch": [1], "error": 5, "results": [
        {"name": 5, "role": ["x"], "ok": "yes", "requires": {"torch": "==2.6"}, "abi": "no", "smoke": [1]},
        {"name": "x", "requires": 5, "abi": 7, "import": "no"}]}))
    found = extensions.load_result(path, "test")
    assert found["torch"] is None and found["error"] is None
    assert [(r["name"], r["ok"], r["requires"], r["abi"]) for r in found["results"]] == [("", False, [], []),
                                                                                     ("x", False, [], [])]
    assert [c.ok for c in extensions.checks(found)] == [False, False]


def test_a_beside_requirement_is_one_pinned_distribution(tmp_path):
    from buildctl.errors import InputError

    for bad in ("torchvision", "torchvision>=0.21", "-e .", "x==1; rm -rf /"):
        with pytest.raises(InputError, match="not NAME==VERSION"):
            extensions.fetch_beside([bad], "3.13", ["linux_x86_64"], tmp_path, print)


def test_a_prebuilt_framework_is_not_expected_to_have_the_recipes_build_type():
    """Debian's torch is RelWithDebInfo; the recipe's build section (Release by default) builds the
    extensions, not the torch: the evidence run failed on `BUILD_TYPE RelWithDebInfo, recipe pins Release`."""
    from buildctl import recipe
    from buildctl.verify.expectations import Expectations

    exp = Expectations.from_spec(recipe.load("ext-torch2.6-debian"))
    assert exp.build_type is None and exp.cuda is not None  # CPU (absent CUDA) still expected
    pinned = Expectations.from_spec(recipe.load("ext-torch2.6-debian", ["verify.expect.build_type=RelWithDebInfo"]))
    assert pinned.build_type == "RelWithDebInfo"


def test_a_package_tried_beside_the_set_reports_into_a_folder_of_its_own():
    """`invoke verify --recipe R --beside torchvision==0.21.0` wrote its (failing) report over the
    artifact's report.json; it goes to beside/<packages>/ now, and a value that is no NAME==VERSION
    (it names that folder) is refused in one line."""
    from buildctl.errors import InputError
    from buildctl.verify.extensions import beside_folder

    assert beside_folder(["torchvision==0.21.0", "pillow==11.0"]) == "pillow-11.0+torchvision-0.21.0"
    for bad in ("../../x==1", "torchvision", "a/b==1"):
        with pytest.raises(InputError, match="not NAME==VERSION"):
            beside_folder([bad])


@pytest.mark.parametrize("text", ["Metadata-Version: 2.1\nName: tinyop\nVersion: 0.1.0\n",
                                  "Metadata-Version: 2.1\nName: tinyop\nVersion: 0.1.0",
                                  "Metadata-Version: 2.1\nName: tinyop\nVersion: 0.1.0\n\n"])
def test_the_pin_lands_in_the_headers_of_a_metadata_without_a_body(text):
    """tinyop's METADATA (no description, no Requires-Dist) got the pin after its closing newline, in the
    body, where pip never reads it (the CI's extension test: requires [])."""
    from email.parser import Parser

    pinned = pin_requires.pin_metadata(text, "torch", "2.6.0+debian")
    assert Parser().parsestr(pinned).get_all("Requires-Dist") == ["torch==2.6.0+debian"]
    assert pinned.startswith(text.rstrip("\n"))


def _dist(site, name: str, version: str, requires: tuple[str, ...] = (), module: str | None = None) -> None:
    """An installed distribution as pip leaves one: its importable module and NAME-VERSION.dist-info."""
    module = module or name.replace("-", "_")
    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text("")
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    (info / "RECORD").write_text(f"{module}/__init__.py,,\n")


def test_the_extension_check_compares_requires_dist_with_the_installed_framework(tmp_path):
    """Issue 35, item 11: ext_set.py collected each extension's Requires-Dist on the framework and stopped
    (installs are --no-deps, so pip never compared it): an extension requiring torch==2.6.0 beside torch
    2.7.0 reported ok, and so did a --beside package. Run here as in the container (its own process, the
    set description it is given), on installed distributions: a pin the installed framework does not meet
    fails the check with one line naming both."""
    import subprocess
    import sys

    from buildctl.in_container import EXTENSION_CHECK_FILES

    site = tmp_path / "site"
    _dist(site, "fakefw", "2.7.0+cpu")
    _dist(site, "pinned-old", "1.0", ("fakefw==2.6.0",))
    _dist(site, "fits", "1.0", ("fakefw>=2.5,<2.8", "numpy>=1",
                                "fakefw==2.7.0",  # a public pin ignores the local label (PEP 440)
                                'fakefw==1.0; python_version < "3"', 'fakefw==1.0; extra == "old"'))  # not here
    _dist(site, "beside-old", "1.0", ("fakefw (<2.7)",))
    wanted = {"framework": {"dist": "fakefw", "module": "fakefw"},
              "extensions": [{"name": n} for n in ("pinned-old", "fits")], "beside": ["beside-old"]}
    (tmp_path / "set.json").write_text(json.dumps(wanted))
    script = next(p for p in EXTENSION_CHECK_FILES if p.name == "ext_set.py")
    done = subprocess.run([sys.executable, str(script), "--set", str(tmp_path / "set.json"), "--out",
                           str(tmp_path / "out.json")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr
    found = extensions.load_result(tmp_path / "out.json", "test")
    checks = {c.name: c for c in extensions.checks(found)}
    assert {name: c.ok for name, c in checks.items()} == {
        "extension pinned-old": False, "extension fits": True, "beside beside-old": False}
    for name, pin in (("extension pinned-old", "fakefw==2.6.0"), ("beside beside-old", "fakefw<2.7")):
        detail = checks[name].detail
        assert "\n" not in detail and f"Requires-Dist {pin}" in detail.replace(" (", "").replace(")", ""), detail
        assert "fakefw 2.7.0+cpu is installed" in detail, detail


def test_the_extension_check_compares_built_against_with_any_installed_framework(tmp_path):
    """Issue 36: the manifest's built_against was compared with the installed framework only when that was
    torch (the ABI rows' branch): an extension of demofw built against 0.1.0+cpu beside demofw 0.2.0
    reported ok. The version comparison is every framework's; the ABI rows stay torch's."""
    import subprocess
    import sys

    from buildctl.in_container import EXTENSION_CHECK_FILES

    site = tmp_path / "site"
    _dist(site, "fakefw", "0.2.0+cpu")
    _dist(site, "built-for-old", "1.0", ("fakefw==0.1.0+cpu",))
    _dist(site, "built-for-this", "1.0", ("fakefw==0.2.0+cpu",))  # pinned, as the build pins (issue 44)
    wanted = {"framework": {"dist": "fakefw", "module": "fakefw"},
              "extensions": [{"name": "built-for-old", "built_against": {"version": "0.1.0+cpu", "framework": "fakefw"}},
                             {"name": "built-for-this", "built_against": {"version": "0.2.0+cpu",
                                                                          "framework": "fakefw"}}]}
    (tmp_path / "set.json").write_text(json.dumps(wanted))
    script = next(p for p in EXTENSION_CHECK_FILES if p.name == "ext_set.py")
    done = subprocess.run([sys.executable, str(script), "--set", str(tmp_path / "set.json"), "--out",
                           str(tmp_path / "out.json")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr
    found = extensions.load_result(tmp_path / "out.json", "test")
    checks = {c.name: c for c in extensions.checks(found)}
    assert {name: c.ok for name, c in checks.items()} == {"extension built-for-old": False,
                                                          "extension built-for-this": True}
    detail = checks["extension built-for-old"].detail
    assert "\n" not in detail and "built against fakefw 0.1.0+cpu, fakefw 0.2.0+cpu is installed" in detail, detail
    assert [r["abi"] for r in found["results"]] == [[], []]  # the .so rows are torch's (abi_check reads torch)


FAKE_TORCH = """
__version__ = "2.6.0"
__file__ = __file__
class version:
    git_version, cuda, hip = "abc", None, None
class _C:
    _GLIBCXX_USE_CXX11_ABI = 1
class cuda:
    @staticmethod
    def get_arch_list():
        return []
"""


def test_abi_check_reads_the_installed_torch_from_inside_a_source_tree(tmp_path, monkeypatch):
    """The extensions step runs where the framework was built: PyTorch's source root, whose torch/
    folder an `import torch` in `python -c` (the cwd first on sys.path) would take instead of the
    installed one ("...or by running Python from a different directory"). Seen on the first real
    torch + PyG build; the facts must come from the installed torch."""
    from buildctl.in_container import abi_check

    site = tmp_path / "site" / "torch"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(FAKE_TORCH)
    source_root = tmp_path / "pytorch"
    (source_root / "torch").mkdir(parents=True)
    (source_root / "torch" / "__init__.py").write_text(
        "raise ImportError('Failed to load PyTorch C extensions: ... or by running Python from a different directory.')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    monkeypatch.chdir(source_root)
    facts = abi_check.torch_facts(sys.executable)
    assert facts["version"] == "2.6.0" and facts["dir"] == str(site), facts
