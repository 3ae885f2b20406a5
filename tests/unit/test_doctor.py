"""buildctl.host.gpus (NVML inventory) and buildctl.host.doctor (the pure report + its rendering)."""

from __future__ import annotations

import io
import json
import sys
import types

import pytest
from rich.console import Console

from buildctl.host import gpus
from buildctl.host.doctor import disk_needed, disk_parts, doctor, print_doctor
from buildctl.host.gpus import GpuInfo, GpuReport, decode_cuda_driver_version, inventory
from buildctl.recipe.schema import Spec

GiB = 1024**3
SHA = "a" * 64

# --- gpus -----------------------------------------------------------------------------------------


def test_decode_cuda_driver_version():
    assert decode_cuda_driver_version(12020) == "12.2"
    assert decode_cuda_driver_version(13000) == "13.0"
    assert decode_cuda_driver_version(11080) == "11.8"


def test_inventory_without_driver_on_this_host():
    """Real pynvml call: this machine has no NVIDIA driver, so a normal report, never an exception."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        pass
    else:  # pragma: no cover - only on a GPU host
        pynvml.nvmlShutdown()
        pytest.skip("this host has an NVIDIA driver")
    r = inventory()
    assert r == GpuReport(None, None, [], "no NVIDIA driver")


class _FakeNVMLError(Exception):
    pass


def _fake_pynvml(driver_loaded=True):
    m = types.ModuleType("pynvml")
    m.NVMLError = _FakeNVMLError
    m.NVMLError_LibraryNotFound = type("NVMLError_LibraryNotFound", (_FakeNVMLError,), {})
    m.NVMLError_DriverNotLoaded = type("NVMLError_DriverNotLoaded", (_FakeNVMLError,), {})
    m.calls = []

    def init():
        if not driver_loaded:
            raise m.NVMLError_DriverNotLoaded("Driver Not Loaded")
        m.calls.append("init")

    m.nvmlInit = init
    m.nvmlShutdown = lambda: m.calls.append("shutdown")
    m.nvmlSystemGetDriverVersion = lambda: b"550.54.15"
    m.nvmlSystemGetCudaDriverVersion = lambda: 12040
    m.nvmlDeviceGetCount = lambda: 2
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = lambda h: ["NVIDIA H200", "NVIDIA A10"][h]
    m.nvmlDeviceGetCudaComputeCapability = lambda h: [(9, 0), (8, 6)][h]
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=[141 * GiB, 24 * GiB][h])
    return m


def test_inventory_with_fake_nvml(monkeypatch):
    fake = _fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    r = inventory()
    assert r.driver == "550.54.15" and r.cuda_driver_max == "12.4"
    assert r.gpus == [GpuInfo(0, "NVIDIA H200", "9.0", 141 * GiB), GpuInfo(1, "NVIDIA A10", "8.6", 24 * GiB)]
    assert fake.calls == ["init", "shutdown"]


def test_inventory_driver_not_loaded(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(driver_loaded=False))
    assert inventory().note == gpus.NO_DRIVER


def test_inventory_device_error_is_a_note(monkeypatch):
    fake = _fake_pynvml()

    def broken(h):
        raise _FakeNVMLError("GPU is lost")

    fake.nvmlDeviceGetMemoryInfo = broken
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    r = inventory()
    assert r.gpus == [] and "GPU 0 unreadable" in r.note and fake.calls[-1] == "shutdown"


# --- doctor ---------------------------------------------------------------------------------------

ENGINE = {  # the shape engine.engine_facts() returns
    "kind": "Docker",
    "server_version": "27.3.1",
    "os": "Ubuntu 24.04.1 LTS",
    "storage_driver": "overlay2",
    "docker_root_dir": "/var/lib/docker",
    "cpus": 16,
    "memory_bytes": 64 * GiB,
    "runtimes": ["io.containerd.runc.v2", "nvidia", "runc"],
    "nvidia_runtime": True,
    "rootless": False,
    "memory_limits": True,
    "memory_limits_note": "",
    "local": True,
    "free_bytes": 200 * GiB,
}

CPU = Spec.model_validate({
    "name": "cpu",
    "base": {"image": "debian:bookworm", "distro": "bookworm"},
    "python": {"version": "3.11"},
    "framework": {"name": "pytorch", "source": {"git": "https://github.com/pytorch/pytorch", "ref": "v2.5.1"}},
})

CUDA = Spec.model_validate({
    "name": "cu124",
    "base": {"image": "ubuntu:22.04", "distro": "jammy"},
    "python": {"version": "3.10"},
    "framework": {"name": "pytorch", "source": {"git": "https://github.com/pytorch/pytorch", "ref": "v2.5.1"}},
    "toolchain": {
        "cuda": {"version": "12.4.1", "install": "runfile", "runfile": {
            "url": "https://developer.download.nvidia.com/compute/cuda/12.4.1/local_installers/cuda_12.4.1_550.54.15_linux.run",
            "sha256": SHA}},
        "nccl": {"version": "2.21.5", "install": "pip"},
    },
    "build": {"cuda_arch": ["8.0", "9.0"]},
})

BAD = Spec.model_validate({  # arch 10.0 needs CUDA 12.8
    "name": "bad",
    "base": {"image": "ubuntu:22.04", "distro": "jammy"},
    "python": {"version": "3.10"},
    "framework": {"name": "pytorch", "source": {"git": "https://github.com/pytorch/pytorch", "ref": "v2.5.1"}},
    "toolchain": {"cuda": {"version": "12.4", "install": "base-image"}, "nccl": {"version": "2.21.5", "install": "pip"}},
    "build": {"cuda_arch": ["10.0"]},
})

NO_GPU = GpuReport(None, None, [], "no NVIDIA driver")
H200 = GpuReport("550.54.15", "12.4", [GpuInfo(0, "NVIDIA H200", "9.0", 141 * GiB)], "1 GPU(s)")


def test_doctor_report_no_gpu():
    r = doctor([("recipes/cpu.yaml", CPU), ("recipes/cu124.yaml", CUDA)], engine_facts=ENGINE, engine_error=None,
               gpu_report=NO_GPU)
    json.dumps(r)  # --json prints it as is
    assert r["ok"] is True
    assert r["engine"]["version"] == "27.3.1" and r["engine"]["storage_driver"] == "overlay2"
    assert r["gpus"]["note"] == "no NVIDIA driver"
    cpu, cuda = r["recipes"]
    assert cpu["build"]["ok"] and cpu["build"]["max_jobs"] == 16 and cpu["verify"]["mode"] == "cpu"
    assert cuda["build"]["ok"] and cuda["build"]["max_jobs"] == 12  # (64 - 2) / 5
    assert cuda["verify"] == {"ok": True, "mode": "cpu", "reason": "no NVIDIA driver/GPU: verification runs on CPU (gloo) only"}


def test_doctor_report_gpu_and_refusal():
    r = doctor([("recipes/cu124.yaml", CUDA), ("recipes/bad.yaml", BAD)], engine_facts=ENGINE, engine_error=None,
               gpu_report=H200)
    cuda, bad = r["recipes"]
    assert cuda["verify"]["ok"] and cuda["verify"]["mode"] == "gpu"
    assert not bad["build"]["ok"] and "build.cuda_arch" in bad["build"]["reasons"][0]
    assert not bad["verify"]["ok"] and "GPU arch 9.0 not in build.cuda_arch" in bad["verify"]["reason"]
    assert r["ok"] is False


def test_doctor_old_driver():
    old = GpuReport("470.82.01", "11.4", [GpuInfo(0, "Tesla V100", "7.0", 16 * GiB)], "1 GPU(s)")
    r = doctor([("c.yaml", CUDA)], engine_facts=ENGINE, engine_error=None, gpu_report=old)
    v = r["recipes"][0]["verify"]
    assert not v["ok"] and "525.60.13" in v["reason"]


def test_doctor_low_disk_and_raw_docker_info():
    facts = {"ServerVersion": "24.0.7", "Driver": "overlay2", "DockerRootDir": "/data/docker", "NCPU": 4,
             "MemTotal": 16 * GiB, "Runtimes": {"runc": {}}, "DataRootFreeBytes": 20 * GiB}
    r = doctor([("c.yaml", CUDA), ("cpu.yaml", CPU)], engine_facts=facts, engine_error=None, gpu_report=NO_GPU)
    cuda, cpu = r["recipes"]
    assert not cuda["build"]["ok"] and "20.0 GiB free on /data/docker" in cuda["build"]["reasons"][0]
    assert cpu["build"]["ok"] and cpu["build"]["max_jobs"] == 4


def _with_build(spec: Spec, **build) -> Spec:
    return Spec.model_validate({**spec.model_dump(), "build": {**spec.build.model_dump(), **build}})


def test_doctor_disk_estimates_are_the_measured_parts():
    """The figures a user checks (docs/compatibility.md, "Doctor"): a CUDA Release build fits on the 63 GiB a
    host had free (the rule of thumb said 80 GiB), a Debug build needs far more than a Release one."""
    debug_cpu, debug_cuda = _with_build(CPU, type="Debug"), _with_build(CUDA, type="Debug")
    need = {spec.name + " " + spec.build.type: disk_needed(spec) for spec in (CPU, debug_cpu, CUDA, debug_cuda)}
    assert need["cpu Release"] == pytest.approx(8.6 * GiB, abs=0.05 * GiB)
    assert need["cpu Debug"] == pytest.approx(26.6 * GiB, abs=0.05 * GiB)
    assert need["cu124 Release"] == pytest.approx(30.8 * GiB, abs=0.05 * GiB)
    assert need["cu124 Debug"] == pytest.approx(48.8 * GiB, abs=0.05 * GiB)
    assert need["cpu Debug"] > 3 * need["cpu Release"]
    # the measured parts, as docs/evidence/ reports them
    parts = disk_parts(debug_cpu)
    assert (parts["image"], parts["build directory"], parts["artifact"]) == (1.75e9, 16e9, 711.8e6)
    assert parts["margin"] == pytest.approx(0.25 * (need["cpu Debug"] - parts["margin"]), abs=1)
    assert disk_parts(CPU)["compile cache"] == 1.2e9 and disk_parts(CUDA)["image"] == 3.8e9
    assert disk_parts(_with_build(CPU, cache="none"))["compile cache"] == 0
    assert disk_parts(_with_build(CPU, type="RelWithDebInfo")) == parts

    host_63 = dict(ENGINE, free_bytes=63 * GiB)
    r = doctor([("c.yaml", CUDA), ("d.yaml", debug_cuda)], engine_facts=host_63, engine_error=None, gpu_report=H200)
    assert [e["build"]["ok"] for e in r["recipes"]] == [True, True]
    assert r["recipes"][0]["build"]["disk_needed_bytes"] == need["cu124 Release"]
    assert r["recipes"][0]["build"]["disk_needed_parts"] == disk_parts(CUDA)


def test_doctor_disk_shortfall_names_the_parts():
    facts = dict(ENGINE, free_bytes=20 * GiB, docker_root_dir="/var/lib/docker")
    r = doctor([("d.yaml", _with_build(CPU, type="Debug"))], engine_facts=facts, engine_error=None, gpu_report=NO_GPU)
    [reason] = r["recipes"][0]["build"]["reasons"]
    assert reason.startswith("20.0 GiB free on /var/lib/docker, a cpu Debug build needs ~26.6 GiB (image 1.6 + "
                             "build directory 14.9 + compile cache 4.1 + artifact 0.7 + margin 5.3 GiB); ")
    assert r["recipes"][0]["build"]["max_jobs_explanation"] == (
        "min(16 cpus, (64.0 GiB - 2.0 GiB reserve) / 5.8 GiB per cpu Debug job = 10), limited by memory")


def test_doctor_unknown_disk_is_not_fatal():
    facts = dict(ENGINE, free_bytes=None, local=False)
    r = doctor([("c.yaml", CUDA)], engine_facts=facts, engine_error=None, gpu_report=H200)
    e = r["recipes"][0]
    assert e["build"]["ok"] and "remote engine" in e["build"]["reasons"][0]
    assert "remote" in e["verify"]["reason"]


def test_doctor_engine_error():
    r = doctor([("cpu.yaml", CPU)], engine_facts=None, engine_error="cannot reach /var/run/docker.sock",
               gpu_report=NO_GPU)
    assert r["engine"] == {"ok": False, "error": "cannot reach /var/run/docker.sock"}
    assert not r["recipes"][0]["build"]["ok"] and r["ok"] is False


def test_doctor_default_gpu_inventory_runs():
    r = doctor([], engine_facts=ENGINE, engine_error=None)
    assert "note" in r["gpus"]


def test_print_doctor():
    buf = io.StringIO()
    con = Console(file=buf, width=200, color_system=None)
    print_doctor(doctor([("cpu.yaml", CPU), ("bad.yaml", BAD)], engine_facts=ENGINE, engine_error=None,
                        gpu_report=NO_GPU), console=con)
    out = buf.getvalue()
    assert "overlay2" in out and "no NVIDIA driver" in out and "bad" in out and "problems found" in out

    buf = io.StringIO()
    print_doctor(doctor([("c.yaml", CUDA)], engine_facts=None, engine_error="engine down", gpu_report=H200),
                 console=Console(file=buf, width=200, color_system=None))
    out = buf.getvalue()
    assert "engine down" in out and "NVIDIA H200" in out


# rootless Podman 4.3 on cgroup v1, as engine.engine_facts() reads it (/info and the libpod API)
PODMAN = dict(ENGINE, kind="Podman", server_version="4.3.1", storage_driver="overlay", nvidia_runtime=False,
              runtimes=["crun", "kata", "runc"], rootless=True, memory_limits=False,
              memory_limits_note="rootless Podman on cgroup v1 ignores resource limits")


def test_doctor_names_the_engine_and_what_it_supports():
    r = doctor([("recipes/cu124.yaml", CUDA)], engine_facts=PODMAN, engine_error=None, gpu_report=H200)
    eng = r["engine"]
    assert (eng["kind"], eng["version"], eng["rootless"]) == ("Podman", "4.3.1", True)
    assert eng["supports"] == {
        "memory_limits": False, "memory_limits_note": "rootless Podman on cgroup v1 ignores resource limits",
        "gpus": False, "gpus_note": "Podman's Docker API ignores --gpus (containers/podman#22645)"}
    assert "Podman's Docker API ignores --gpus" in r["recipes"][0]["verify"]["reason"]
    con = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    print_doctor(r, console=con)
    text = con.export_text()
    assert "Podman 4.3.1 (rootless)" in text
    assert "memory limits  │ no: rootless Podman on cgroup v1 ignores resource limits" in text
    assert "GPUs (--gpus)  │ no: Podman's Docker API ignores --gpus (containers/podman#22645)" in text
    docker = doctor([], engine_facts=ENGINE, engine_error=None, gpu_report=NO_GPU)["engine"]
    assert (docker["kind"], docker["rootless"], docker["supports"]["memory_limits"], docker["supports"]["gpus"]) == (
        "Docker", False, True, True)


def _table_rows(text: str, title: str) -> list[str]:
    """The body lines of the table titled `title` in rendered console text (between ┡…┩ and └…┘)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == title)
    head = next(i for i in range(start, len(lines)) if lines[i].startswith("┡"))
    end = next(i for i in range(head, len(lines)) if lines[i].startswith("└"))
    return lines[head + 1:end]


def test_print_doctor_at_80_columns_keeps_one_line_per_recipe():
    """At 80 columns the reasons (a recipe error, the disk shortfall) were folded into 10-line cells; now
    each recipe is one table row and every reason is printed in full under the table."""
    facts = dict(ENGINE, free_bytes=7 * GiB, docker_root_dir="/var/lib/docker")
    report = doctor([("recipes/cpu.yaml", CPU), ("recipes/bad.yaml", BAD), ("recipes/cu124.yaml", CUDA)],
                    engine_facts=facts, engine_error=None, gpu_report=H200)
    con = Console(file=io.StringIO(), width=80, record=True, color_system=None)
    print_doctor(report, console=con)
    text = con.export_text()
    rows = _table_rows(text, "Recipes")
    assert [row.split("│")[1].strip() for row in rows] == ["cpu", "bad", "cu124"]  # one line each
    assert all(len(line) <= 80 for line in text.splitlines())
    flat = " ".join(text.split())
    for entry in report["recipes"]:
        for reason in entry["build"]["reasons"]:
            assert f"{entry['name']} build: " + " ".join(reason.split()) in flat
        assert f"{entry['name']} verify: " + " ".join(entry["verify"]["reason"].split()) in flat
    bad = report["recipes"][1]
    assert len(" ".join(bad["build"]["reasons"])) > 200  # long enough to have wrapped a cell before


# --- base images (issue 37: "build: yes" for a recipe whose base image the engine lacks and cannot pull) --

DEMO = CPU.model_copy(update={"name": "demo", "base": CPU.base.model_copy(update={"image": "buildctl/base:bookworm"})})


def test_doctor_says_which_base_images_are_present_pullable_or_missing_and_refuses_the_builds_of_a_missing_one():
    from buildctl.engine.pull import fix_for
    from buildctl.host.doctor import base_images_needed

    recipes = [("cpu.yaml", CPU), ("c.yaml", CUDA), ("demo.yaml", DEMO)]
    assert base_images_needed(recipes) == {"debian:bookworm": "bookworm", "ubuntu:22.04": "jammy",
                                           "buildctl/base:bookworm": "bookworm"}
    states = {"debian:bookworm": {"state": "pullable", "detail": "its registry has it", "fix": None},
              "ubuntu:22.04": {"state": "missing", "detail": "no registry answered",
                               "fix": fix_for("ubuntu:22.04", "jammy")},
              "buildctl/base:bookworm": {"state": "present", "detail": "in the engine", "fix": None}}
    r = doctor(recipes, engine_facts={**ENGINE, "base_images": states}, engine_error=None, gpu_report=H200)
    assert r["engine"]["base_images"] == states
    by_name = {e["name"]: e["build"] for e in r["recipes"]}
    assert by_name["cpu"]["ok"] and by_name["demo"]["ok"] and not r["ok"]
    assert not by_name["cu124"]["ok"]
    assert by_name["cu124"]["reasons"] == [
        "base image ubuntu:22.04 missing; fix: `docker pull ubuntu:22.04` where a registry is reachable, "
        "`docker load -i FILE` of a saved copy, or `invoke base-image --distro jammy` and --base-image "
        "buildctl/base:jammy"]
    buf = io.StringIO()
    print_doctor(r, console=Console(file=buf, width=80, soft_wrap=True))
    text = buf.getvalue()
    assert "Base images" in text and "pullable" in text and "missing" in text
    assert "base image ubuntu:22.04: no registry answered; fix: `docker pull ubuntu:22.04`" in text
    assert "c.yaml" not in text and "cu124 build: base image ubuntu:22.04 missing; fix: " in text


class _FakeApi:
    """The two Engine API calls the probe makes: an image in the engine, a registry asked for a manifest."""

    def __init__(self, present=(), in_registry=(), registry_error="dial tcp: lookup registry-1.docker.io: no such host"):
        self.present, self.in_registry, self.registry_error = set(present), set(in_registry), registry_error
        self.timeout, self.asked = 600, []

    def inspect_image(self, ref):
        from docker import errors as derr

        if ref not in self.present:
            raise derr.NotFound(f"No such image: {ref}")
        return {"Id": "sha256:" + "0" * 64}

    def inspect_distribution(self, ref):
        from docker import errors as derr

        self.asked.append((ref, self.timeout))
        if ref not in self.in_registry:
            raise derr.APIError("500 Server Error", explanation=f'Get "https://registry-1.docker.io/v2/": '
                                f"{self.registry_error}")
        return {"Descriptor": {"digest": "sha256:" + "1" * 64}}


def test_the_base_image_probe_asks_a_registry_only_for_what_the_engine_lacks_and_could_pull():
    from buildctl.engine.pull import REGISTRY_PROBE_TIMEOUT, base_image_states

    api = _FakeApi(present={"debian:bookworm"}, in_registry={"rocm/dev-ubuntu-22.04:6.2"})
    client = types.SimpleNamespace(api=api)
    states = base_image_states(client, {"debian:bookworm": "bookworm", "ubuntu:22.04": "jammy",
                                        "rocm/dev-ubuntu-22.04:6.2": "jammy", "buildctl/base:trixie": "trixie"})
    assert {ref: s["state"] for ref, s in states.items()} == {
        "debian:bookworm": "present", "ubuntu:22.04": "missing", "rocm/dev-ubuntu-22.04:6.2": "pullable",
        "buildctl/base:trixie": "missing"}
    assert sorted(api.asked) == [("rocm/dev-ubuntu-22.04:6.2", REGISTRY_PROBE_TIMEOUT),
                                 ("ubuntu:22.04", REGISTRY_PROBE_TIMEOUT)]  # bounded; never buildctl/base:*
    assert api.timeout == 600  # the client's own again
    assert "no such host" in states["ubuntu:22.04"]["detail"]
    assert states["ubuntu:22.04"]["fix"].startswith("fix: `docker pull ubuntu:22.04`")
    assert states["buildctl/base:trixie"]["fix"] == "fix: make it with `invoke base-image --distro trixie`"
    assert states["debian:bookworm"]["fix"] is None and states["rocm/dev-ubuntu-22.04:6.2"]["fix"] is None
