"""ROCm without an engine: the code-object reader of the probe, the arch-coverage expectation, the
preflight table of gfx targets, the apt provider's rendering, and demofw's hipify step.

The binaries here are built byte by byte in the layout clang 17 writes (checked against a real
demo-rocm build in tests/integration/test_rocm_integration.py, where LLVM's clang-offload-bundler reads the same
library): an ELF whose .hip_fatbin section holds a `__CLANG_OFFLOAD_BUNDLE__` with one entry per
target (`hipv4-amdgcn-amd-amdhsa--gfx90a`, ...) plus an empty host entry, each target entry an
AMDGPU ELF whose e_flags name the target (EF_AMDGPU_MACH: gfx90a 0x3f, gfx942 0x4c).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from invoke_here import invoke_here

from buildctl import recipe, render
from buildctl.errors import RecipeError
from buildctl.in_container import probe_arch
from buildctl.recipe import compat, preflight
from buildctl.verify.expectations import Expectations, evaluate, failed, summary_line

ROOT = Path(__file__).resolve().parents[2]
DEMOFW = ROOT / "examples" / "demofw"
MACH = {"gfx90a": 0x3F, "gfx942": 0x4C, "gfx908": 0x30}


# ---------------------------------------------------------------------------------------------- binaries


def amdgpu_code_object(target: str, body: bytes = b"\x00" * 200) -> bytes:
    """An AMDGPU ELF header (EM_AMDGPU 224, e_flags = mach | xnack/sramecc 'any' bits) and a body."""
    header = bytearray(64)
    header[:4] = b"\x7fELF"
    header[4:7] = bytes([2, 1, 1])  # 64-bit, little-endian, version 1
    header[7] = 64  # ELFOSABI_AMDGPU_HSA
    struct.pack_into("<HHI", header, 16, 3, 224, 1)  # ET_DYN, EM_AMDGPU, EV_CURRENT
    struct.pack_into("<I", header, 48, MACH[target] | 0x500)
    return bytes(header) + body


def offload_bundle(entries: list[tuple[str, bytes]]) -> bytes:
    """A clang offload bundle: magic, entry count, (offset, size, id length, id) records, then the
    entries' data at 4096-aligned offsets (as clang 17 lays it out)."""
    records = sum(24 + len(i.encode()) for i, _ in entries)
    offset = (32 + records + 4095) // 4096 * 4096
    head = bytearray(probe_arch.OFFLOAD_BUNDLE_MAGIC + struct.pack("<Q", len(entries)))
    data = bytearray()
    for bundle_id, blob in entries:
        head += struct.pack("<QQQ", offset + len(data), len(blob), len(bundle_id)) + bundle_id.encode()
        if blob:
            data += blob + b"\x00" * (-len(blob) % 4096)
    return bytes(head) + b"\x00" * (offset - len(head)) + bytes(data)


def elf_with_section(name: str, content: bytes) -> bytes:
    """A minimal ELF64 file with sections: null, `name` (the content), .shstrtab."""
    shstrtab = b"\x00" + name.encode() + b"\x00.shstrtab\x00"
    content_off = 64
    strtab_off = content_off + len(content)
    shoff = (strtab_off + len(shstrtab) + 7) // 8 * 8
    header = bytearray(64)
    header[:7] = b"\x7fELF" + bytes([2, 1, 1])
    struct.pack_into("<HHI", header, 16, 3, 62, 1)  # ET_DYN, EM_X86_64
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HHHHHH", header, 0x34, 64, 0, 0, 64, 3, 2)
    sections = b"\x00" * 64
    sections += struct.pack("<IIQQQQIIQQ", 1, 1, 0, 0, content_off, len(content), 0, 0, 4096, 0)
    sections += struct.pack("<IIQQQQIIQQ", 2 + len(name), 3, 0, 0, strtab_off, len(shstrtab), 0, 0, 1, 0)
    body = bytes(header) + content + shstrtab
    return body + b"\x00" * (shoff - len(body)) + sections


def hip_library(tmp_path: Path, targets: list[str], name: str = "_C.so") -> Path:
    # clang 17's order: the empty host entry first (at the first data offset), then the targets
    entries = [("host-x86_64-unknown-linux--", b"")]
    entries += [(f"hipv4-amdgcn-amd-amdhsa--{t}", amdgpu_code_object(t)) for t in targets]
    path = tmp_path / name
    path.write_bytes(elf_with_section(".hip_fatbin", offload_bundle(entries)))
    return path


# ---------------------------------------------------------------------------------------------- probe reader


def test_code_objects_are_listed_per_target_from_the_elf_of_each_entry(tmp_path):
    lib = hip_library(tmp_path, ["gfx90a", "gfx942"])
    got = probe_arch.rocm_code_objects(str(lib))
    assert got["error"] is None
    assert got["code_objects"] == {"gfx90a": {"count": 1, "bytes": 264}, "gfx942": {"count": 1, "bytes": 264}}


def test_one_bundle_per_translation_unit_is_counted_per_target(tmp_path):
    """A library with two HIP units has two bundles back to back in .hip_fatbin."""
    one = [("hipv4-amdgcn-amd-amdhsa--gfx90a", amdgpu_code_object("gfx90a")), ("host-x86_64-unknown-linux--", b"")]
    two = [("hipv4-amdgcn-amd-amdhsa--gfx90a", amdgpu_code_object("gfx90a", b"\x01" * 1000)),
           ("hipv4-amdgcn-amd-amdhsa--gfx942", amdgpu_code_object("gfx942")), ("host-x86_64-unknown-linux--", b"")]
    lib = tmp_path / "two.so"
    lib.write_bytes(elf_with_section(".hip_fatbin", offload_bundle(one) + offload_bundle(two)))
    got = probe_arch.rocm_code_objects(str(lib))
    assert got["code_objects"] == {"gfx90a": {"count": 2, "bytes": 264 + 1064}, "gfx942": {"count": 1, "bytes": 264}}


def test_a_bundle_id_that_disagrees_with_its_code_object_is_not_counted(tmp_path):
    """The id says gfx942 but the ELF inside was compiled for gfx90a: the target is not covered."""
    entries = [("hipv4-amdgcn-amd-amdhsa--gfx942", amdgpu_code_object("gfx90a")), ("host-x86_64-unknown-linux--", b"")]
    lib = tmp_path / "lying.so"
    lib.write_bytes(elf_with_section(".hip_fatbin", offload_bundle(entries)))
    got = probe_arch.rocm_code_objects(str(lib))
    assert got["code_objects"] == {}
    assert got["error"] == "bundle hipv4-amdgcn-amd-amdhsa--gfx942 holds a code object for gfx90a"


@pytest.mark.parametrize("blob, error", [
    (probe_arch.OFFLOAD_BUNDLE_MAGIC + struct.pack("<Q", 1) + struct.pack("<QQQ", 4096, 999, 5) + b"hipv4",
     ".hip_fatbin: offload bundle at 0: entry 'hipv4' runs past the end of the section"),
    (probe_arch.OFFLOAD_BUNDLE_MAGIC + struct.pack("<Q", 1), ".hip_fatbin: unpack_from requires a buffer of at least"),
    (b"CCOB" + b"\x00" * 60, "compressed offload bundle (CCOB, --offload-compress): not read by this probe"),
])
def test_damaged_or_unreadable_sections_are_reported_not_raised(tmp_path, blob, error):
    lib = tmp_path / "bad.so"
    lib.write_bytes(elf_with_section(".hip_fatbin", blob))
    got = probe_arch.rocm_code_objects(str(lib))
    assert got["code_objects"] == {} and got["error"].startswith(error)


def test_a_library_without_device_code_has_nothing_to_report(tmp_path):
    lib = tmp_path / "cpu.so"
    lib.write_bytes(elf_with_section(".text", b"\x90" * 64))
    assert probe_arch.rocm_code_objects(str(lib)) == {"code_objects": {}, "error": None}
    (tmp_path / "not-elf.so").write_text("hello")
    assert probe_arch.rocm_code_objects(str(tmp_path / "not-elf.so")) == {"code_objects": {}, "error": None}


def test_bundle_target_keeps_features_and_skips_the_host_entry():
    assert probe_arch.bundle_target("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-") == "gfx90a:xnack-"
    assert probe_arch.bundle_target("hip-amdgcn-amd-amdhsa--gfx908") == "gfx908"
    assert probe_arch.bundle_target("host-x86_64-unknown-linux--") is None
    assert probe_arch.bundle_target("openmp-amdgcn-amd-amdhsa--gfx90a") is None


def test_coverage_of_a_package_lists_targets_and_libraries(tmp_path):
    pkg = tmp_path / "demofw"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    hip_library(pkg, ["gfx942", "gfx90a"], "_C.cpython-313-x86_64-linux-gnu.so")

    class Mod:
        __file__ = str(pkg / "__init__.py")

    cov = probe_arch.rocm_arch_coverage(Mod)
    assert cov["state"] == "ok" and cov["gfx"] == ["gfx90a", "gfx942"]
    assert [lib["path"] for lib in cov["libraries"]] == ["_C.cpython-313-x86_64-linux-gnu.so"]
    (pkg / "_C.cpython-313-x86_64-linux-gnu.so").unlink()
    cov = probe_arch.rocm_arch_coverage(Mod)
    assert cov["state"] == "unavailable" and cov["gfx"] == []


# ---------------------------------------------------------------------------------------------- expectations


def rocm_probe(targets: list[str], arch_list: list[str]) -> dict:
    """A probe report of a demo-rocm wheel (the shape probe.py writes), code objects for `targets`."""
    return {
        "import": {"ok": True, "seconds": 0.4, "smoke": "ok"},
        "framework": {"version": "0.1.0+rocm5.7", "hip": "5.7.31921", "cuda": None, "nccl": "2.13.4", "debug": False,
                      "arch_list": arch_list},
        "config": {"build_settings": {"BUILD_TYPE": "Release", "USE_ROCM": "ON", "USE_NCCL": "ON"}},
        "distributed": {"available": False},
        "gpus": {"state": "unavailable", "reason": "pynvml not importable"},
        "amd_gpus": {"state": "no-driver", "devices": 0, "reason": "no AMD GPU: /dev/kfd is absent (no amdgpu driver here)"},
        "arch_coverage": {"state": "ok", "gfx": targets, "sass": [], "ptx": [], "libraries": [
            {"path": "_C.so", "code_objects": {t: {"count": 1, "bytes": 4528} for t in targets}, "error": None}]},
        "sweep": {"state": "skipped", "reason": "demofw has no (available) distributed module"},
    }


def demo_rocm_expectations() -> Expectations:
    return Expectations.from_spec(recipe.load("demo-rocm"))


def test_demo_rocm_expects_hip_rccl_and_both_targets():
    exp = demo_rocm_expectations()
    assert (exp.accelerator, exp.hip, exp.nccl, exp.arch) == ("rocm", "5.7", "2.13.4", ("gfx90a", "gfx942"))


def test_full_coverage_passes_and_says_no_gpu():
    checks = evaluate(demo_rocm_expectations(), rocm_probe(["gfx90a", "gfx942"], ["gfx90a", "gfx942"]))
    assert not failed(checks), summary_line(checks)
    by_name = {c.name: c for c in checks}
    assert by_name["arch coverage (binary)"].detail == "code objects: gfx90a 4528 B, gfx942 4528 B"
    assert by_name["RCCL"].actual == "2.13.4" and by_name["HIP"].ok
    assert by_name["GPUs here"].ok is None and "no AMD GPU" in by_name["GPUs here"].detail


def test_a_binary_missing_a_target_fails_with_one_line():
    """The build compiled gfx90a only (PYTORCH_ROCM_ARCH narrowed); the recipe asks for gfx942 too."""
    checks = evaluate(demo_rocm_expectations(), rocm_probe(["gfx90a"], ["gfx90a"]))
    cov = next(c for c in checks if c.name == "arch coverage (binary)")
    assert cov.ok is False
    assert cov.detail == ("requested but not in the binary: gfx942 (recipe pins gfx90a, gfx942; "
                          "code objects only for gfx90a)")
    line = summary_line(checks)
    assert "\n" not in line and "requested but not in the binary: gfx942" in line


def test_the_binary_is_checked_even_when_the_arch_list_claims_every_target():
    """The compiled-in list says both, the fat binary holds one: only the binary check catches it."""
    checks = evaluate(demo_rocm_expectations(), rocm_probe(["gfx90a"], ["gfx90a", "gfx942"]))
    assert [c.name for c in failed(checks)] == ["arch coverage (binary)"]


# ---------------------------------------------------------------------------------------------- preflight


def load(name: str, sets: list[str]):
    spec = recipe.load(name, sets)
    return spec, preflight.preflight(spec, source=f"recipes/{name}.yaml")


def test_demo_rocm_passes_preflight_without_warnings():
    assert load("demo-rocm", [])[1] == []


def test_a_target_rocm_5_7_cannot_compile_is_refused_in_one_line():
    with pytest.raises(RecipeError) as e:
        load("demo-rocm", ["toolchain.rocm.arch=[gfx90a, gfx950]"])
    text = str(e.value)
    assert text == ("recipes/demo-rocm.yaml: toolchain.rocm.arch: gfx950 is not a target ROCm 5.7's compiler knows "
                    "(clang: invalid target ID); fix: drop gfx950 or use a newer ROCm (5.7 knows 42 targets, "
                    "e.g. gfx90a, gfx942; docs/rocm.md lists them)")
    assert e.value.exit_code == 2


def test_invoke_build_refuses_the_target_before_any_docker_call():
    """Through the CLI: exit 2 and the one line, with no engine needed (preflight runs first)."""
    proc = invoke_here("-r", str(ROOT), "build", "--recipe", "demo-rocm", "--set", "toolchain.rocm.arch=[gfx90a, gfx950]",
                       env={"DOCKER_HOST": "unix:///nonexistent.sock"})
    assert proc.returncode == 2
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: recipes/demo-rocm.yaml: toolchain.rocm.arch: gfx950 ")


@pytest.mark.parametrize("sets, field", [
    (["base.distro=bookworm", "base.image=buildctl/base:bookworm", "python.version=3.11"], "toolchain.rocm.install"),
    (["toolchain.rocm.version=6.2"], "toolchain.rocm.version"),
    (["toolchain.rocm.rccl=2.18.1"], "toolchain.rocm.rccl"),
])
def test_apt_rocm_must_be_what_the_distro_ships(sets, field):
    with pytest.raises(RecipeError) as e:
        load("demo-rocm", sets)
    assert f": {field}: " in str(e.value) and "\n" not in str(e.value)


def test_the_table_is_the_compilers_own_list():
    """Every target the table lists has an EF_AMDGPU_MACH in the probe (both read from LLVM 17)."""
    assert compat.ROCM_OFFLOAD_ARCH["5.7"] == set(probe_arch.AMDGPU_MACH.values())
    assert {"gfx90a", "gfx942"} <= compat.ROCM_OFFLOAD_ARCH["5.7"]
    assert not {"gfx950", "gfx1200", "gfx1201"} & compat.ROCM_OFFLOAD_ARCH["5.7"]


def test_base_image_rocm_keeps_its_behaviour():
    """rocm6.2 (AMD's image): no table for 6.2, so targets are not refused; the build is unchanged."""
    spec, warnings = load("rocm6.2", [])
    assert spec.toolchain.rocm.install == "base-image" and warnings == []
    build = render.render(spec).files["build.sh"]
    assert "export ROCM_PATH=/opt/rocm\n" in build and "HIPCXX" not in build


# ---------------------------------------------------------------------------------------------- rendering


def test_apt_provider_renders_pytorchs_rocm_contract():
    rendered = render.render(recipe.load("demo-rocm"))
    build, dockerfile = rendered.files["build.sh"], rendered.files["Dockerfile"]
    for line in ("export USE_ROCM=1", "export USE_CUDA=0", "export ROCM_PATH=/usr",
                 "export PYTORCH_ROCM_ARCH='gfx90a;gfx942'", "export HIPCXX=/usr/bin/clang++-17",
                 "export HIP_DEVICE_LIB_PATH=/usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode",
                 "export USE_SYSTEM_NCCL=1", "export NCCL_INCLUDE_DIR=/usr/include/rccl",
                 "export NCCL_LIB_DIR=/usr/lib/x86_64-linux-gnu", "export CMAKE_HIP_COMPILER_LAUNCHER=ccache"):
        assert line + "\n" in build, line
    # hipify runs after the source step and before configure, as PyTorch's CI runs build_amd.py
    assert build.index("step source") < build.index("python tools/amd_build/build_amd.py") < build.index("step configure")
    builder = dockerfile[dockerfile.index("FROM base AS builder"):]
    for pkg in ("hipcc", "libamdhip64-dev", "librccl-dev", "rocm-device-libs-17", "clang-17", "lld-17", "llvm-17",
                "libclang-rt-17-dev"):
        assert f" {pkg} " in builder, pkg
    runtime = dockerfile[dockerfile.index("FROM base AS runtime\n"):dockerfile.index("FROM base AS builder")]
    assert "apt-get install -y --no-install-recommends libamdhip64-5 librccl1" in runtime
    assert "HIP_DEVICE_LIB_PATH=/usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode" in runtime
    assert "recipe pins rccl 2.13.4" in builder and "cannot compile for $a" in builder


# ---------------------------------------------------------------------------------------------- hipify


def hipify(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(tree / "tools" / "amd_build" / "build_amd.py"), "--root", str(tree), *args],
                          capture_output=True, text=True)


def test_hipify_writes_hip_sources_once(tmp_path):
    tree = tmp_path / "demofw"
    shutil.copytree(DEMOFW, tree, ignore=shutil.ignore_patterns("build", "hip", "__pycache__"))
    first = hipify(tree)
    assert first.returncode == 0, first.stderr
    kernels = (tree / "csrc/hip/kernels.hip").read_text()
    assert "#include <hip/hip_runtime.h>" in kernels and "hipMalloc(&da, bytes)" in kernels
    assert "cudaMalloc" not in kernels and "cuda_runtime.h" not in kernels
    assert "#include <rccl.h>" in (tree / "csrc/hip/nccl.cpp").read_text()
    assert "#ifdef DFW_USE_ROCM" in (tree / "csrc/hip/cuda_hooks.cpp").read_text()
    again = hipify(tree, "--check")
    assert again.returncode == 0 and "[skipped, unchanged]" in again.stdout and "(0 written)" in again.stdout


def test_hipify_refuses_a_cuda_name_it_cannot_map(tmp_path):
    tree = tmp_path / "demofw"
    shutil.copytree(DEMOFW, tree, ignore=shutil.ignore_patterns("build", "hip", "__pycache__"))
    with (tree / "csrc/cuda/kernels.cu").open("a") as fh:
        fh.write("\nvoid sync() { cudaDeviceSynchronize(); }\n")
    proc = hipify(tree)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("hipify: csrc/cuda/kernels.cu: no HIP mapping for cudaDeviceSynchronize; "
                                   "add them to IDENTIFIERS in build_amd.py")
    assert not (tree / "csrc/hip/kernels.hip").exists()
