"""demo-rocm against the real engine: real HIP code from Debian's ROCm 5.7 for gfx90a and gfx942.

* `invoke build --recipe demo-rocm` (through the CLI, --json, a temporary artifacts root, the source a
  snapshot of examples/demofw) compiles the hipified kernel for both targets with no GPU present,
  publishes the wheel and verifies it in a fresh container of the runtime image: the report lists the
  code objects per gfx target read from the binary, the RCCL version read at run time through the
  NCCL API, and says that there is no GPU;
* LLVM's own clang-offload-bundler, in the builder image, reads the same targets and sizes from the
  wheel's library as the probe's reader;
* the wheel imports and answers in a fresh runtime container (no network);
* `invoke verify` prints the coverage table, RCCL and the missing GPU;
* the same recipe with PYTORCH_ROCM_ARCH narrowed to gfx90a in build.env (the recipe asks for two
  targets in toolchain.rocm.arch) is refused: by preflight in one line before any Docker call, and,
  under --no-preflight, by the configure gate after CMake's configure (ROCm archs compared with
  toolchain.rocm.arch, the override reported), nothing compiled and nothing published (issue 43, item 12:
  before, the gate compared with the override, and the build was published as for both targets).

Hygiene: both builds carry a session marker (build.env.BUILDCTL_TEST_RUN), so their artifact keys,
build-dir volumes and image tags are this session's own: all are removed at the end. The shared layers
(apt, venv) and the compile-cache volume stay, as after any build. Budget on 2 busy cores with buildctl/base:trixie
present: the first cold run about 15-25 minutes (apt of ~280 MB of ROCm packages, then the build),
later runs a few minutes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE
from docker import errors as derr

from buildctl import engine
from buildctl.pipeline import engine_names
from buildctl.verify import report as rep

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
NETWORK = os.environ.get("BUILDCTL_TEST_NETWORK", "host")
TIMEOUT = 60 * 60
SESSION = uuid.uuid4().hex[:8]
TARGETS = ["gfx90a", "gfx942"]
# The verification wheelhouse is cached between sessions (as in test_build_integration).
VERIFY_CACHE = ROOT / ".cache" / "buildctl-test" / "verify-wheelhouse"


@dataclass
class Run:
    args: list[str]
    proc: subprocess.CompletedProcess
    payload: dict

    def explain(self) -> str:
        return (f"`invoke {' '.join(self.args)}` exit {self.proc.returncode}\n--- stderr\n{self.proc.stderr[-6000:]}"
                f"\n--- stdout\n{self.proc.stdout[-3000:]}")

    @property
    def artifact(self) -> Path:
        return Path(self.payload["artifact"])

    @property
    def manifest(self) -> dict:
        return json.loads((self.artifact / "manifest.json").read_text())

    @property
    def wheel(self) -> Path:
        return self.artifact / self.manifest["wheels"][0]["file"]


class Workspace:
    def __init__(self, root: Path):
        self.root = root
        for d in ("cwd", "tmp"):
            (root / d).mkdir(exist_ok=True)
        self.src = root / "demofw"
        shutil.copytree(ROOT / "examples" / "demofw", self.src,
                        ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so", "hip"))
        self.keys: list[str] = []

    def invoke(self, *args: str, json_out: bool = True, artifacts: str = "artifacts") -> Run:
        exe = Path(sys.executable).with_name("invoke")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "invoke"]
        env = {**os.environ, "BUILDCTL_ARTIFACTS": str(self.root / artifacts), "BUILDCTL_CACHE": str(VERIFY_CACHE),
               "TMPDIR": str(self.root / "tmp"), "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
        for var in ("BUILDCTL_NO_VERIFY", "BUILDCTL_KEEP_CONTAINER", "BUILDCTL_JOBS"):
            env.pop(var, None)
        full = [*args, *(["--json"] if json_out else [])]
        proc = subprocess.run([*cmd, "-r", str(ROOT), *full], cwd=self.root / "cwd", env=env, capture_output=True,
                              text=True, timeout=TIMEOUT)
        payload = {}
        if json_out:
            with contextlib.suppress(ValueError):
                payload = json.loads(proc.stdout) if proc.stdout.strip() else {}
            if payload.get("key"):
                self.keys.append(payload["key"])
        return Run(full, proc, payload)

    def build(self, *extra: str, artifacts: str = "artifacts") -> Run:
        # the session marker gives this session its own artifact key, build-dir volume and image tags
        # (the compile cache is shared: a C++ unit compiled before is a ccache hit, the lines remain)
        return self.invoke("build", "--recipe", "demo-rocm", "--network", NETWORK, "--ca-cert", CA_BUNDLE,
                           "--set", f"framework.source.path={self.src}", "--set", f"build.env.BUILDCTL_TEST_RUN={SESSION}",
                           *extra, artifacts=artifacts)


@pytest.fixture(scope="module")
def ws(tmp_path_factory, docker_client, trixie_base_image) -> Iterator[Workspace]:
    before = {v.name for v in docker_client.volumes.list()}
    w = Workspace(tmp_path_factory.mktemp("rocm"))
    yield w
    for key in set(w.keys):
        vol = engine_names.work_volume_name("demo-rocm", key, TEST_NAMESPACE)  # the session's namespace
        if vol not in before:
            with contextlib.suppress(derr.NotFound, derr.APIError):
                docker_client.api.remove_volume(vol)
        for tag in (engine_names.image_tag("demo-rocm", key, TEST_NAMESPACE),
                    engine_names.image_tag("demo-rocm", key, TEST_NAMESPACE, "runtime")):
            with contextlib.suppress(derr.NotFound, derr.APIError):
                docker_client.images.remove(tag)  # not forced: a layer other tags use stays


@pytest.fixture(scope="module")
def demo_rocm(ws) -> Run:
    return ws.build()


@pytest.fixture(scope="module")
def narrowed(ws, demo_rocm) -> Run:
    """demo-rocm with PYTORCH_ROCM_ARCH=gfx90a in build.env (it wins in the build script) while the recipe
    asks for both targets in toolchain.rocm.arch; past preflight, so that CMake's configure runs."""
    # its own artifacts root: `invoke verify --recipe demo-rocm` keeps finding the full build
    return ws.build("--no-preflight", "--set", "build.env.PYTORCH_ROCM_ARCH=gfx90a", artifacts="artifacts-narrowed")


def report_of(run: Run) -> rep.Report:
    return rep.load_report(run.artifact / "report.json")


def test_demo_rocm_compiles_real_hip_for_two_targets_and_passes_verification(demo_rocm):
    run = demo_rocm
    assert run.proc.returncode == 0 and run.payload.get("ok") is True, run.explain()
    m = run.manifest
    assert m["accelerator"] == "rocm" and m["rocm_arch"] == TARGETS
    tc = m["toolchain"]
    assert tc["rocm"] == "5.7.1" and tc["hip"].startswith("5.7.31921") and tc["rccl"] == "2.13.4", tc
    assert m["pins"]["rocm"] == "5.7"
    log = (run.artifact / "build.log").read_text()
    assert "csrc/cuda/kernels.cu -> csrc/hip/kernels.hip [ok]" in log  # hipify ran before configure
    assert "-- HIP targets (PYTORCH_ROCM_ARCH): gfx90a;gfx942" in log
    assert "-- Found HIP 5.7.31921: /usr/bin/clang++-17" in log
    assert "-- Found NCCL (include: /usr/include/rccl, library: /usr/lib/x86_64-linux-gnu/librccl.so)" in log
    assert re.search(r"^\[\d+/\d+\] Building HIP object CMakeFiles/_C\.dir/csrc/hip/kernels\.hip\.o$", log, re.M)
    report = report_of(run)
    assert report.ok, [c for c in report.checks if c.ok is False]
    cov = report.probe["arch_coverage"]
    assert cov["state"] == "ok" and cov["gfx"] == TARGETS
    (lib,) = cov["libraries"]
    assert set(lib["code_objects"]) == set(TARGETS) and all(co["bytes"] > 1000 for co in lib["code_objects"].values())
    fw = report.probe["framework"]
    assert fw["nccl"] == "2.13.4" and fw["nccl_raw"] == [2, 13, 4]  # ncclGetVersion of librccl at run time
    assert fw["hip"].startswith("5.7.31921") and fw["cuda"] is None and fw["arch_list"] == TARGETS
    assert report.verdict.startswith("ROCm 5.7.31921") and "no AMD GPU: /dev/kfd is absent" in report.verdict
    checks = {c.name: c for c in report.checks}
    assert checks["arch coverage (binary)"].ok is True and checks["RCCL"].ok is True and checks["HIP"].ok is True


def test_llvms_bundler_reads_the_same_code_objects(demo_rocm, docker_client, test_labels):
    """clang-offload-bundler-17 (in the builder image) on the .hip_fatbin section of the published
    wheel's library: the same targets, and per target the same size as the probe's reader found."""
    assert demo_rocm.proc.returncode == 0, demo_rocm.explain()
    wheel = demo_rocm.wheel
    script = (
        "set -e; cd /tmp; python -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); "
        "n = next(x for x in z.namelist() if x.endswith(\".so\")); open(\"lib.so\", \"wb\").write(z.read(n))' "
        f"/in/{wheel.name}\n"
        "objcopy --dump-section .hip_fatbin=fatbin.o lib.so\n"
        "clang-offload-bundler-17 --list --type=o --input=fatbin.o | sort > ids.txt; cat ids.txt\n"
        "for id in $(grep ^hip ids.txt); do clang-offload-bundler-17 --unbundle --type=o --input=fatbin.o "
        "--targets=$id --output=co.o && echo \"size $id $(stat -c %s co.o)\"; done\n"
    )
    res = engine.run_container(
        docker_client,
        engine.ContainerSpec(
            demo_rocm.manifest["images"]["builder"],
            ["/bin/bash", "-c", script],
            inputs={f"/in/{wheel.name}": wheel},
            network_mode="none",
            labels=test_labels,
        ),
    )
    assert res.exit_code == 0, res.log[-3000:]
    ids = [ln for ln in res.log.splitlines() if ln.startswith(("hipv4-", "host-"))]
    assert ids == ["hipv4-amdgcn-amd-amdhsa--gfx90a", "hipv4-amdgcn-amd-amdhsa--gfx942", "host-x86_64-unknown-linux--"]
    sizes = {ln.split()[1].rsplit("--", 1)[1]: int(ln.split()[2]) for ln in res.log.splitlines() if ln.startswith("size ")}
    (lib,) = report_of(demo_rocm).probe["arch_coverage"]["libraries"]
    assert sizes == {t: co["bytes"] for t, co in lib["code_objects"].items()}


def test_the_wheel_works_in_a_fresh_runtime_container(demo_rocm, docker_client, test_labels):
    assert demo_rocm.proc.returncode == 0, demo_rocm.explain()
    wheel = demo_rocm.wheel
    probe = ("import json, demofw, demofw.cuda as c\n"
             "print('RESULT ' + json.dumps({'add': demofw.add([1, 2], [3, 4]), 'hip': demofw.version.hip,\n"
             "    'cuda': demofw.version.cuda, 'built': c.is_built(), 'available': c.is_available(),\n"
             "    'reason': c.unavailable_reason(), 'arch': c.get_arch_list(), 'rccl': list(c.nccl.version()),\n"
             "    'config': demofw.__config__.show()}))\n")
    script = f"set -e; python -m pip install -q --no-index --no-deps --no-compile /in/{wheel.name}; cd /tmp; python -c \"$PROBE\""
    runtime = engine_names.image_tag("demo-rocm", demo_rocm.payload["key"], TEST_NAMESPACE, "runtime")
    res = engine.run_container(
        docker_client,
        engine.ContainerSpec(
            runtime,
            ["/bin/sh", "-c", script],
            env={"PROBE": probe},
            inputs={f"/in/{wheel.name}": wheel},
            network_mode="none",
            labels=test_labels,
        ),
    )
    assert res.exit_code == 0, res.log[-3000:]
    got = json.loads(next(ln for ln in reversed(res.log.splitlines()) if ln.startswith("RESULT "))[len("RESULT "):])
    assert got["add"] == [4, 6] and got["cuda"] is None and got["hip"].startswith("5.7.31921")
    assert got["built"] is True and got["available"] is False and got["reason"].startswith("hipError")
    assert got["arch"] == TARGETS and got["rccl"] == [2, 13, 4]
    assert "  - HIP Runtime 5.7.31921\n" in got["config"] and "  - RCCL: NCCL API 2.13.4 (header)\n" in got["config"]
    assert "PYTORCH_ROCM_ARCH=gfx90a;gfx942, " in got["config"] and "USE_ROCM=ON, " in got["config"]


def test_invoke_verify_prints_code_objects_rccl_and_no_gpu(ws, demo_rocm):
    assert demo_rocm.proc.returncode == 0, demo_rocm.explain()
    # the artifact this build made, by its key (verify takes the request's artifact, never the newest)
    run = ws.invoke("verify", "--recipe", "demo-rocm", "--set", f"framework.source.path={ws.src}",
                    "--key", demo_rocm.payload["key"], json_out=False)
    out = run.proc.stdout + run.proc.stderr
    assert run.proc.returncode == 0, run.explain()
    assert "arch coverage (probe.py (.hip_fatbin offload-bundle reader))" in out
    rows = [ln for ln in out.splitlines() if "_C.cpython-313-x86_64-linux-gnu.so" in ln]
    assert len(rows) == 2 and "gfx90a" in rows[0] and "gfx942" in rows[1]
    assert "RCCL" in out and "2.13.4" in out
    assert "no AMD GPU: /dev/kfd is absent" in out


def test_preflight_refuses_an_arch_list_narrowed_in_build_env_in_one_line(ws):
    # a recipe that contradicts itself is bad input: exit 2, one error line, before any engine call
    run = ws.build("--set", "build.env.PYTORCH_ROCM_ARCH=gfx90a", artifacts="artifacts-refused")
    assert run.proc.returncode == 2, run.explain()
    errors = [line for line in run.proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "build.env.PYTORCH_ROCM_ARCH=gfx90a overrides toolchain.rocm.arch" in errors[0], \
        run.explain()


def test_the_configure_gate_refuses_a_build_compiling_fewer_targets_than_the_recipe_asks(narrowed):
    run = narrowed
    assert run.proc.returncode == 1 and run.payload.get("ok") is False, run.explain()
    assert run.payload["error"] == "build of demo-rocm failed in step configure (exit 1)", run.explain()
    diagnosis = run.payload["diagnosis"]  # the gate's mismatches: what the recipe's field asked, and the override
    assert diagnosis["id"] == "configure-gate", diagnosis
    assert "ROCm archs: asked gfx90a;gfx942 (toolchain.rocm.arch), CMake decided gfx90a" in diagnosis["cause"], diagnosis
    assert "build.env.PYTORCH_ROCM_ARCH" in diagnosis["cause"], diagnosis
    assert not run.payload.get("published"), run.payload  # nothing compiled, nothing published
