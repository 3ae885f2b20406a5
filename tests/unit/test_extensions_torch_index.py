"""Extensions for the torch a team already runs (issue 44), without an engine: a prebuilt torch from an index
installed with its dependencies into both images, the CUDA toolchain matched to that torch, the checks each
extension wheel passes before anything is published (in_container/cuda_checks.py), and the local version label
that lets one index serve a set per torch. The builds: tests/integration/test_extensions_integration.py."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from buildctl import recipe
from buildctl import render as render_mod
from buildctl.in_container import abi_check, cuda_checks, pin_requires
from buildctl.pipeline.stages import artifact as artifact_stage
from buildctl.recipe.schema import Spec
from buildctl.store import key as key_mod

SCATTER = {"name": "torch-scatter", "source": {"pypi": "torch-scatter==2.1.2", "sha256": "69b3" + "0" * 60}}
CU130 = {"version": "13.0", "install": "pip", "pip_release": "13.0.88"}


def spec_with(**changes) -> Spec:
    data = recipe.load("ext-torch2.6-debian").model_dump(mode="json")
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        holder = data
        for p in parents:
            holder = holder[p]
        holder[last] = value
    return Spec.model_validate(data)


def pypi_torch(pin="torch==2.14.1", index="https://download.pytorch.org/whl/cu130", cuda=CU130, **more) -> Spec:
    source = {"pypi": pin, **({"index_url": index} if index else {})}
    changes = {"framework__source": {"prebuilt": source}, "packages__runtime": [], "packages__build": []}
    if cuda:
        changes.update(toolchain__cuda=cuda, build__cuda_arch=["8.0", "9.0"])
    return spec_with(**changes, **more)


def stage(dockerfile: str, name: str) -> str:
    return dockerfile.split(f" AS {name}\n")[1].split("\nFROM ")[0]


# --- 1. a prebuilt torch from an index, with its dependencies, in both images -------------------------


def test_a_torch_from_an_index_is_installed_with_its_dependencies_in_the_builder_and_the_runtime_image():
    files = render_mod.render(pypi_torch()).files
    dockerfile, script = files["Dockerfile"], files["build.sh"]
    for name in ("venv", "runtime-venv"):
        venv = stage(dockerfile, name)
        assert "torch==2.14.1" in venv and "--extra-index-url https://download.pytorch.org/whl/cu130" in venv
        assert "--no-deps" not in venv
    assert "--system-site-packages" not in dockerfile
    # the build script installs nothing of it: the image has it; it says which torch it found
    assert "pip install --no-deps" not in script and 'print("buildctl: prebuilt torch"' in script


def test_a_prebuilt_torch_wheel_reaches_the_runtime_image_too():
    wheel = {"url": "https://wheels.example/torch-2.6.0-cp313-cp313-linux_x86_64.whl", "sha256": "a" * 64}
    dockerfile = render_mod.render(spec_with(framework__source={"prebuilt": wheel})).files["Dockerfile"]
    for name in ("venv", "runtime-venv"):
        venv = stage(dockerfile, name)
        assert "buildctl-fetch https://wheels.example/torch-2.6.0-cp313-cp313-linux_x86_64.whl " + "a" * 64 in venv
        assert "pip install --no-cache-dir /tmp/torch-2.6.0-cp313-cp313-linux_x86_64.whl" in venv  # with its deps


def test_a_locked_torch_from_another_index_is_installed_from_that_index_and_a_wheel_is_never_locked():
    """The lock names torch's files; the index that serves them reaches the locked pip line. A wheel by URL is
    outside every lock (pip resolves its dependencies): the recipe's lock does not cover that request."""
    cu130 = recipe.load("ext-pyg-pypi-torch2.14").model_dump(mode="json")
    cu130["framework"]["source"]["prebuilt"]["index_url"] = "https://download.pytorch.org/whl/cu130"
    venv = stage(render_mod.render(Spec.model_validate(cu130)).files["Dockerfile"], "venv")
    assert ("--require-hashes --no-deps --extra-index-url https://download.pytorch.org/whl/cu130 -r "
            "/usr/local/share/buildctl/pip.lock") in venv
    wheel = {"url": "https://wheels.example/torch-2.6.0-cp313-cp313-linux_x86_64.whl", "sha256": "a" * 64}
    assert recipe.load("ext-torch2.6-debian").python.lock  # the recipe is locked, the request is not covered
    assert "pip.lock" not in render_mod.render(spec_with(framework__source={"prebuilt": wheel})).files


def test_the_index_form_is_refused_without_a_pin_and_keyed_by_what_it_names():
    with pytest.raises(ValueError, match="pattern"):
        pypi_torch(pin="torch>=2")
    a = render_mod.render(pypi_torch()).files
    b = render_mod.render(pypi_torch(pin="torch==2.14.0")).files
    assert a["Dockerfile"] != b["Dockerfile"]
    digests = {key_mod.source_digest(s) for s in (pypi_torch(), pypi_torch(pin="torch==2.14.0"),
                                                   pypi_torch(index="https://download.pytorch.org/whl/cu129"))}
    assert len(digests) == 3
    assert artifact_stage._prebuilt(pypi_torch().framework.source) == {
        "prebuilt": "torch==2.14.1", "prebuilt_index": "https://download.pytorch.org/whl/cu130"}


# --- 2. the CUDA toolchain matched to that torch ---------------------------------------------------


def test_a_recipe_pinning_another_cuda_major_than_its_torch_is_refused_at_load():
    with pytest.raises(ValueError) as e:
        pypi_torch(pin="torch==2.9.1+cu128", index="https://download.pytorch.org/whl/cu128")
    line = str(e.value).splitlines()[-1]
    assert "torch==2.9.1+cu128 is a CUDA 12 build" in str(e.value) and "toolchain.cuda" in str(e.value)
    assert "fix:" in str(e.value)
    pypi_torch(pin="torch==2.9.1+cu128", cuda={"version": "12.4", "install": "apt"})  # a minor below: allowed
    assert line


@pytest.mark.parametrize("torch_cuda, nvcc, ok, words", [
    ("13.0", "13.0", True, "nvcc 13.0 for torch's CUDA 13.0"),
    ("12.8", "12.4", True, "a minor below torch's 12.8: allowed"),
    ("13.0", "13.2", True, "a minor above torch's 13.0"),
    ("13.0", "12.4", False, "nvcc is CUDA 12.4, torch 2.14.1 was built with CUDA 13.0"),
    (None, "13.0", False, "torch 2.14.1 has no CUDA"),
])
def test_after_torch_is_installed_its_cuda_decides_the_nvcc(torch_cuda, nvcc, ok, words):
    good, line = cuda_checks.toolchain_match({"version": "2.14.1", "cuda": torch_cuda}, nvcc)
    assert good is ok and words in line and "\n" not in line
    if not ok:
        assert "fix:" in line


def test_the_match_runs_in_the_build_before_any_extension_compiles():
    script = render_mod.render(pypi_torch()).files["build.sh"]
    match = script.index("cuda_checks.py match")
    assert script.index("abi_check.py --facts") < match < script.index("--- torch-scatter")


# --- 3. CUDA kernels for the recipe's archs ----------------------------------------------------------


def test_cuda_extensions_get_force_cuda_the_arch_list_and_the_compile_cache_through_nvcc():
    script = render_mod.render(pypi_torch()).files["build.sh"]
    assert "export TORCH_CUDA_ARCH_LIST='8.0;9.0'" in script
    assert "export FORCE_CUDA=1" in script[script.index("--- torch-scatter"):]
    assert 'export PYTORCH_NVCC="ccache $CUDA_HOME/bin/nvcc"' in script


def test_an_extension_patch_is_applied_to_its_source_and_keyed(tmp_path):
    patch = tmp_path / "scatter.patch"
    patch.write_text("--- a/setup.py\n+++ b/setup.py\n@@ -1 +1 @@\n-a\n+b\n")
    files = render_mod.render(pypi_torch(extensions=[{**SCATTER, "patches": [{"file": str(patch)}]}])).files
    [name] = [n for n in files if n.startswith("patches/ext-torch-scatter-")]
    assert files[name] == patch.read_text()
    block = files["build.sh"][files["build.sh"].index("--- torch-scatter"):]
    assert f'buildctl-patch file "$dir" 1 /usr/local/share/buildctl/{name}' in block


# --- 4. the checks each wheel passes before publish ----------------------------------------------------

LIST_ELF = """
ELF file    1: _scatter_cuda.1.sm_80.cubin
ELF file    2: _scatter_cuda.2.sm_90.cubin
"""
LIST_PTX = "PTX file    1: _scatter_cuda.1.sm_90.ptx\n"


def test_device_code_is_read_per_arch_and_a_missing_arch_is_refused():
    found = cuda_checks.device_code(LIST_ELF, LIST_PTX)
    assert found == {"sass": ["80", "90"], "ptx": ["90"]}
    assert cuda_checks.missing_archs(found, "8.0;9.0") == []
    assert cuda_checks.missing_archs(found, "8.0;9.0+PTX") == []
    assert cuda_checks.missing_archs(found, "8.0+PTX;9.0;10.0") == ["PTX compute_80", "SASS sm_100"]
    assert cuda_checks.missing_archs(cuda_checks.device_code("", ""), "9.0a") == ["SASS sm_90a"]


@pytest.mark.parametrize("needed, torch_cuda, words", [
    (["libcudart.so.12", "libc10_cuda.so"], "13.0", "needs libcudart.so.12 (CUDA 12), torch is CUDA 13.0"),
    (["libcudart.so.13"], "13.0", None),
    (["libc10_cuda.so", "libc10.so"], "13.0", None),
])
def test_the_cuda_major_of_every_so_is_torchs(needed, torch_cuda, words):
    assert abi_check.cuda_major_differs(needed, torch_cuda) == words


def test_a_wheel_without_the_exact_pin_is_refused_in_one_line():
    assert cuda_checks.pin_problem(["torch==2.14.1", "scipy"], "torch", "2.14.1") is None
    assert cuda_checks.pin_problem(['torch==2.14.1 ; python_version >= "3.9"'], "torch", "2.14.1") is None
    assert "no Requires-Dist: torch==2.14.1" in cuda_checks.pin_problem(["scipy"], "torch", "2.14.1")
    assert "torch>=2.0" in cuda_checks.pin_problem(["torch>=2.0"], "torch", "2.14.1")


def test_a_wheel_is_checked_as_a_whole_and_refused_with_the_reason(tmp_path, monkeypatch):
    wheel = _wheel(tmp_path, "torch_scatter", "2.1.2", ["torch==2.14.1"], so=b"\x7fELF fake")
    monkeypatch.setattr(cuda_checks, "needed", lambda path: ["libcudart.so.13", "libc10_cuda.so"])
    monkeypatch.setattr(cuda_checks, "cuobjdump", lambda path: (LIST_ELF, ""))
    facts = {"version": "2.14.1", "cuda": "13.0"}
    report = cuda_checks.check_wheel(str(wheel), facts, "torch", "8.0;9.0")
    assert report["refused"] == [] and report["so"][0]["sass"] == ["80", "90"]
    report = cuda_checks.check_wheel(str(wheel), facts, "torch", "8.0;9.0+PTX")
    assert report["refused"] == ["torch_scatter/_scatter_cuda.so: no device code for PTX compute_90 "
                                 "(TORCH_CUDA_ARCH_LIST 8.0;9.0+PTX)"]
    monkeypatch.setattr(cuda_checks, "cuobjdump", lambda path: ("", ""))
    monkeypatch.setattr(cuda_checks, "needed", lambda path: ["libc10.so"])
    report = cuda_checks.check_wheel(str(wheel), facts, "torch", "8.0;9.0")
    assert report["refused"] == ["torch_scatter 2.1.2: no .so has CUDA device code; fix: build with FORCE_CUDA=1 "
                                 "(a GPU-less builder builds CPU-only ops otherwise)"]


def test_the_pin_checked_is_the_installed_distributions_version_not_torch_dunder_version(tmp_path, monkeypatch):
    """PyPI's CUDA torch 2.14.1 says torch.__version__ 2.14.1+cu130 (the facts' version), its distribution is
    2.14.1: the pin (pin_requires --version, importlib.metadata's) is torch==2.14.1, which pip's torch 2.14.1
    satisfies and ==2.14.1+cu130 would not. Seen refusing every wheel of the real ext-pyg-pypi-torch2.14 build."""
    wheel = _wheel(tmp_path, "torch_scatter", "2.1.2+pt214cu130", ["torch==2.14.1"], so=b"\x7fELF fake")
    monkeypatch.setattr(cuda_checks, "needed", lambda path: ["libcudart.so.13", "libc10_cuda.so"])
    monkeypatch.setattr(cuda_checks, "cuobjdump", lambda path: (LIST_ELF, ""))
    facts = tmp_path / "built-against.json"
    facts.write_text('{"version": "2.14.1+cu130", "cuda": "13.0"}')
    checked = ["wheel", str(wheel), "--facts", str(facts), "--dist", "torch", "--archs", "8.0;9.0"]
    assert cuda_checks.main([*checked, "--version", "2.14.1"]) == 0
    assert cuda_checks.main([*checked, "--version", "2.14.1+cu130"]) == 1


# --- 5. one index, a set per torch ---------------------------------------------------------------------


@pytest.mark.parametrize("dist, version, cuda, label", [
    ("torch", "2.14.1", "13.0", "pt214cu130"),
    ("torch", "2.14.1+cu130", "13.0", "pt214cu130"),
    ("torch", "2.9.1", "12.8", "pt29cu128"),
    ("torch", "2.6.0+debian", None, "pt26cpu"),
])
def test_the_local_label_names_torch_and_cuda_as_pyg_does(dist, version, cuda, label):
    assert cuda_checks.local_label(dist, {"version": version, "cuda": cuda}) == label


def test_the_label_rewrites_the_wheels_version_name_and_record(tmp_path):
    wheel = _wheel(tmp_path, "torch_scatter", "2.1.2", [])
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([sys.executable, pin_requires.__file__, str(wheel), "--dist", "torch", "--version", "2.14.1",
                           "--label", "pt214cu130", "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    labelled = out / "torch_scatter-2.1.2+pt214cu130-cp313-cp313-linux_x86_64.whl"
    assert done.stdout.strip() == str(labelled) and [p.name for p in out.iterdir()] == [labelled.name]
    with zipfile.ZipFile(labelled) as z:
        names = z.namelist()
        meta = z.read("torch_scatter-2.1.2+pt214cu130.dist-info/METADATA").decode()
        record = z.read("torch_scatter-2.1.2+pt214cu130.dist-info/RECORD").decode()
    assert "torch_scatter/_scatter_cuda.so" in names and not any(n.startswith("torch_scatter-2.1.2.dist") for n in names)
    assert "Version: 2.1.2+pt214cu130\n" in meta and "Requires-Dist: torch==2.14.1" in meta
    rows = {r.split(",")[0]: r for r in record.splitlines()}
    assert set(rows) == set(names)
    digest = base64.urlsafe_b64encode(hashlib.sha256(meta.encode()).digest()).rstrip(b"=").decode()
    assert rows["torch_scatter-2.1.2+pt214cu130.dist-info/METADATA"].split(",")[1] == f"sha256={digest}"


def test_the_build_labels_each_extension_for_its_torch():
    script = render_mod.render(pypi_torch()).files["build.sh"]
    assert "EXT_LABEL=$(python /usr/local/share/buildctl/cuda_checks.py label" in script
    assert "--label \"$EXT_LABEL\"" in script
    assert "cuda_checks.py wheel" in script  # each wheel checked after it is pinned and labelled


def _wheel(tmp_path: Path, name: str, version: str, requires: list[str], so: bytes = b"") -> Path:
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires) + "\n"
    files = {f"{name}/__init__.py": b"", f"{name}/_scatter_cuda.so": so, f"{info}/METADATA": meta.encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp313-cp313-linux_x86_64\n"}
    record = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},"
                     f"{len(d)}\n" for n, d in files.items()) + f"{info}/RECORD,,\n"
    path = tmp_path / f"{name}-{version}-cp313-cp313-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w") as z:
        for n, d in {**files, f"{info}/RECORD": record.encode()}.items():
            z.writestr(n, d)
    return path


def test_verification_refuses_an_extension_without_a_pin_on_its_framework():
    """A wheel whose Requires-Dist names no torch lets pip take any torch for it (sglang#36462): in the runtime
    image, beside the set or in it, it is refused in one line with the fix."""
    from buildctl.in_container import ext_set

    [line] = ext_set.unmet([], "torch", "2.14.1")
    assert "no Requires-Dist on torch" in line and "fix: pin it (torch==2.14.1)" in line
    assert ext_set.unmet(["torch==2.14.1"], "torch", "2.14.1") == []


def test_a_cuda_extension_build_has_cuobjdump_of_torchs_major():
    pip_build = render_mod.render(pypi_torch()).files["Dockerfile"]
    assert "nvidia-cuda-cuobjdump~=13.0" in stage(pip_build, "venv")
    assert "cuobjdump" not in render_mod.render(recipe.load("demo-cuda13")).files["Dockerfile"]


def test_a_pip_cuda_toolchain_leaves_the_cuda_runtime_to_the_index_torch():
    """PyPI's torch 2.14.1 pins its CUDA runtime (cuda-toolkit==13.0.3: nvidia-cuda-runtime 13.0.96, cccl 13.0.85);
    the toolchain pins only the compiler's packages and takes the runtime and headers of torch's major."""
    venv = stage(render_mod.render(pypi_torch()).files["Dockerfile"], "venv")
    assert "nvidia-cuda-nvcc==13.0.88" in venv and "nvidia-cuda-crt==13.0.88" in venv
    assert "nvidia-cuda-runtime~=13.0" in venv and "nvidia-cuda-cccl~=13.0" in venv
    assert "nvidia-cuda-runtime" not in stage(render_mod.render(pypi_torch()).files["Dockerfile"], "runtime-venv")


def test_a_prebuilt_torch_is_not_warned_about_how_pytorch_builds_nccl():
    """PyTorch >= 2.7's build git-clones NCCL; a torch from an index builds nothing of PyTorch."""
    from buildctl.recipe import preflight

    assert not [w for w in preflight.preflight(recipe.load("ext-pyg-pypi-torch2.14"), source="x.yaml") if "NCCL" in w]


def test_a_prebuilt_torchs_cuda_and_archs_are_its_own_not_the_extensions_toolchains():
    """The recipe's toolchain.cuda and build.cuda_arch are what the extensions are compiled with; PyPI's torch
    2.14.1 lists more archs than 8.0;9.0 and torch 2.9.1 is CUDA 12.8 beside Debian's nvcc 12.4: its verification
    compares neither (cuda_checks.py match compared the majors before anything compiled)."""
    from buildctl.verify.expectations.expected import Expectations

    exp = Expectations.from_spec(pypi_torch())
    assert exp.arch is None and exp.cuda is None and exp.accelerator == "cuda"
    built_here = Expectations.from_spec(recipe.load("demo-cuda13"))
    assert built_here.arch is not None and built_here.cuda == "13.2"


def test_a_refusal_is_the_line_a_failed_build_quotes(tmp_path):
    """The build's failure message shows the log's first error line (diagnose.first_error): a refusal must be one."""
    from buildctl.failure import diagnose

    facts = tmp_path / "facts.json"
    facts.write_text('{"version": "2.98.0", "cuda": "12.8"}')
    done = subprocess.run([sys.executable, cuda_checks.__file__, "match", "--facts", str(facts), "--nvcc", "13.2"],
                          capture_output=True, text=True)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert "another major" in diagnose.first_error(f"buildctl: step extensions\n{line}\n")[-1]


def test_the_pip_lock_resolves_the_index_torch_with_the_builders_packages():
    """With a lock the builder's venv is installed from it alone (--require-hashes): torch and its dependencies
    must be in what `invoke lock` resolves."""
    from buildctl.render.rendering import builder_requirements

    requirements, _ = builder_requirements(pypi_torch(index=None))
    assert "torch==2.14.1" in requirements and "nvidia-cuda-nvcc==13.0.88" in requirements
