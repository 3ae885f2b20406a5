"""`invoke verify --image` against the real engine, on a PyTorch that neither pip nor buildctl built:
Debian trixie's own python3-torch 2.6.0, apt-installed into the trixie base image. Its report carries the
torch.compile matrix on four axes (issue 34): four cells run (two inductor ones, failing there as
before), two are skipped on a CPU; the matrix takes about as long as the five cells it replaced.

The image keeps a stable tag and no session label, so the engine's layer cache makes a rerun take
seconds (the apt install takes about two minutes once); it is labelled buildctl.role=test-image so
that it can be found. The tests remove only what they create per run: the verify containers (removed
by buildctl itself, which the tests check) and the reports (in tmp_path).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import DEBIAN_TORCH, containers_made_since, default_sigint
from rich.console import Console
from verify_fixtures import cpu_probe, make_report

from buildctl import engine
from buildctl.verify import report as rep
from buildctl.verify.options import VerifyOptions

ROOT = Path(__file__).resolve().parents[2]
SMALL = ("--sizes", "8:64K", "--iters", "5")

pytestmark = pytest.mark.integration


def invoke_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "BUILDCTL_DEBUG": "", "COLUMNS": "200", "BUILDCTL_ARTIFACTS": str(tmp_path / "artifacts")}


def invoke(tmp_path: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=invoke_env(tmp_path))


def test_verify_debian_torch_image_and_diff_it_against_a_pypi_wheel(debian_torch, docker_client, tmp_path):
    started = time.time()
    proc = invoke(tmp_path, "verify", "--image", DEBIAN_TORCH, "--json", *SMALL,
                  "--expect", "torch=2.6.0", "--expect", "cuda=none", "--expect", "USE_MPI=on")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)  # --json: the report on stdout, nothing else
    assert report["ok"] is True and report["mode"] == "image" and report["wheel"] is None
    assert report["image"] == {"reference": DEBIAN_TORCH, "id": debian_torch, "python": "python3"}
    assert debian_torch.startswith("sha256:")
    probe = report["probe"]
    assert probe["python"]["executable"] == "/usr/bin/python3"  # the image's own Python, nothing installed
    assert probe["import"]["file"] == "/usr/lib/python3/dist-packages/torch/__init__.py"
    assert probe["framework"]["version"] == "2.6.0+debian" and probe["framework"]["cuda"] is None

    # torch.__config__ in full, and the facts a user reads off it.
    config = probe["config"]
    assert config["text"].startswith("PyTorch built with:")
    settings = config["build_settings"]
    assert settings["TORCH_VERSION"] == "2.6.0" and settings["BLAS_INFO"] == "generic"
    assert settings["BUILD_TYPE"] == "RelWithDebInfo" and settings["USE_MPI"] == "ON"
    cpu = probe["cpu"]
    assert cpu["state"] == "ok" and cpu["blas"] == "generic" and cpu["lapack"] == "generic"
    assert cpu["capability"] and f"CPU capability usage: {cpu['capability']}" in config["text"]
    assert any("libblas.so" in p for p in cpu["libraries"])  # the BLAS a matmul really loaded

    # Debian builds torch without libuv: TCPStore's default since 2.4 fails, the ranks run with USE_LIBUV=0.
    store = probe["distributed"]["tcpstore"]
    assert store["state"] == "fallback" and store["use_libuv_env"] == "0" and "without libuv" in store["reason"]

    sweep = probe["sweep"]
    assert sweep["state"] == "ok", sweep.get("reason")
    assert (sweep["backend"], sweep["device"], sweep["world_size"]) == ("gloo", "cpu", 2)
    assert [r["size"] for r in sweep["rows"]] == [8 << i for i in range(14)]
    assert all(r["wrong"] == 0 and r["time_us"] > 0 for r in sweep["rows"])
    checks = {c["name"]: c for c in report["checks"]}
    for name in ("import", "version", "CUDA", "USE_MPI", "all-reduce correctness", "DDP step (2 ranks, gloo)",
                 "numerics vs NumPy"):
        assert checks[name]["ok"] is True, checks[name]
    assert "passed:" in proc.stderr and "gloo on CPU, 2 processes" in proc.stderr
    # The torch.compile matrix on four axes (issue 34): backend x mode x fullgraph x dynamic; reduce-overhead
    # and the cudagraphs backend on a CPU are skipped with the reason, never passed; a dynamic cell ran a
    # second shape without recompiling, a static one recompiled for it.
    matrix = probe["checks"]["compile"]
    assert matrix["device"] == "cpu" and matrix["matrix"] == "smoke", matrix
    cells = {(c["backend"], c["mode"], c["fullgraph"], c["dynamic"]): c for c in matrix["cells"]}
    for key in (("inductor", "reduce-overhead", False, False), ("cudagraphs", "default", False, False)):
        assert cells[key]["state"] == "skipped" and "skipping cudagraphs due to cpu device" in cells[key]["reason"]
    eager, aot = cells[("eager", "default", True, False)], cells[("aot_eager", "default", False, True)]
    assert eager["state"] == aot["state"] == "pass", (eager, aot)
    assert eager["recompiled"] is True and aot["recompiled"] is False, (eager, aot)
    assert {("inductor", "default", False, False), ("inductor", "default", True, True)} <= set(cells)
    assert checks["torch.compile eager fullgraph"]["ok"] is True and checks["torch.compile aot_eager dynamic"]["ok"]
    assert not [name for name in checks if "reduce-overhead" in name]  # shown in the table, never a passed check
    md = (tmp_path / "artifacts" / "verify" / "images" / f"buildctl-test_debian-torch_trixie-{debian_torch[7:19]}"
          / "report.md").read_text()
    assert "| inductor | reduce-overhead | - | skipped |" in md and "| aot_eager | default | dynamic | pass |" in md

    # Debian's torch is built with NDEBUG: a kernel that breaks aten::neg's contract goes through (shown)
    debug_only = checks["debug-only assertion (aten::neg kernel returning its input)"]
    assert (debug_only["ok"], debug_only["actual"]) == (None, "did not fire (the aliased result went through)")

    out = tmp_path / "artifacts" / "verify" / "images" / f"buildctl-test_debian-torch_trixie-{debian_torch[7:19]}"
    assert report["files"]["json"] == str(out / "report.json")
    assert (out / "report.png").read_bytes()[:4] == b"\x89PNG"
    assert containers_made_since(docker_client, started, image=debian_torch) == []  # the verify container is gone

    # Against the PyPI torch 2.13.0 CPU wheel's report (a real probe, tests/verify_fixtures.py).
    pypi = tmp_path / "pypi" / "report.json"
    rep.write_json(make_report(cpu_probe()), pypi)
    proc = invoke(tmp_path, "diff", str(out / "report.json"), str(pypi), timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert any(" image " in ln and " wheel " in ln for ln in text.splitlines() if "verified" in ln), text
    for words in (DEBIAN_TORCH, "2.6.0+debian", "2.13.0+cpu", "CPU and BLAS", "generic",
                  "mkl", "reference BLAS (netlib)", "-gsplit-dwarf", "RelWithDebInfo", "USE_LIBUV=0",
                  "latency headline"):
        assert words in text, words


def test_missing_image_and_missing_python_are_one_line_exit_2(debian_torch, docker_client, test_labels, tmp_path):
    started = time.time()
    proc = invoke(tmp_path, "verify", "--image", "buildctl-test/no-such-image:never", timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("error:") == 1, proc.stderr
    assert ("image buildctl-test/no-such-image:never is not in the Docker engine, and buildctl never pulls; "
            "fix: `docker pull buildctl-test/no-such-image:never`") in proc.stderr
    assert not docker_client.images.list(name="buildctl-test/no-such-image")  # never pulled

    # An ENTRYPOINT is not in the way: before, /bin/false ran with the probe's command as its arguments
    # ("verification ... failed (exit 1)"); now the command runs as given, and the missing Python is named.
    with tempfile.TemporaryDirectory(prefix="buildctl-test-entrypoint-") as ctx:
        Path(ctx, "Dockerfile").write_text(f'FROM {DEBIAN_TORCH}\nENTRYPOINT ["/bin/false"]\n')
        with_entrypoint = engine.build_image(
            docker_client,
            engine.ImageSpec(Path(ctx), "buildctl-test/debian-torch:entrypoint-false", labels=test_labels),
        )
    for image, image_id in ((DEBIAN_TORCH, debian_torch), ("buildctl-test/debian-torch:entrypoint-false",
                                                            with_entrypoint)):
        proc = invoke(tmp_path, "verify", "--image", image, "--python", "/opt/venv/bin/python", timeout=120)
        assert proc.returncode == 2, proc.stderr
        error = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
        assert len(error) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert error[0].startswith(f"error: image {image} has no Python at /opt/venv/bin/python (exec: "), error
        assert "fix: give the image's interpreter with --python" in error[0]
        assert containers_made_since(docker_client, started, image=image_id) == []
    assert not (tmp_path / "artifacts").exists()  # nothing written


def test_ctrl_c_removes_the_verify_container(debian_torch, docker_client, tmp_path):
    """Interrupted while the probe runs in the container: exit 130, and the container is gone."""
    started = time.time()
    p = subprocess.Popen([sys.executable, "-m", "invoke", "verify", "--image", DEBIAN_TORCH, "--json", *SMALL],
                         cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=invoke_env(tmp_path), preexec_fn=default_sigint)
    try:
        assert p.stderr is not None
        seen = []
        for line in p.stderr:  # the probe's own log, streamed from inside the container
            seen.append(line)
            if "[probe] importing torch" in line:
                break
        assert containers_made_since(docker_client, started, image=debian_torch), "".join(seen)[-2000:]  # it runs now
        p.send_signal(signal.SIGINT)
        rest = p.stderr.read()
        assert p.wait(timeout=120) == 130, rest[-2000:]
    finally:
        if p.poll() is None:
            p.kill()
    assert "interrupted" in rest
    assert containers_made_since(docker_client, started, image=debian_torch) == []
    assert not (tmp_path / "artifacts").exists()


def test_gpus_are_the_engines_fact_not_this_hosts(docker_client, base_image, tmp_path, monkeypatch):
    """A host whose NVML sees a GPU (simulated: this machine has none) and an engine without the NVIDIA
    runtime (this one: `docker info` lists no nvidia): the verification container asks for no GPU and
    runs (here to say the base image has no Python). Before, the GPU request went to the engine, which
    refused to start the container (could not select device driver "" with capabilities: [[gpu]])."""
    from buildctl.errors import InputError
    from buildctl.host import gpus
    from buildctl.verify import image as image_verify

    started = time.time()
    assert "nvidia" not in (docker_client.info().get("Runtimes") or {})
    monkeypatch.setattr(gpus, "inventory", lambda: gpus.GpuReport(
        "550.54.15", "12.4", [gpus.GpuInfo(0, "NVIDIA H100 80GB HBM3", "9.0", 80 << 30)]))
    with pytest.raises(InputError, match=f"image {base_image} has no Python at python3 "):
        image_verify.verify_image(base_image, out_dir=tmp_path / "report", options=VerifyOptions(sweep=False),
                                  client=docker_client, console=Console(file=io.StringIO()))
    assert containers_made_since(docker_client, started, image=docker_client.images.get(base_image).id,
                                 labels=("buildctl.role=verify",)) == []
