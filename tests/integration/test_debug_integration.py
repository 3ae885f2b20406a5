"""`invoke debug` on the demo Debug build: the deliberate crash chased to its source line.

demo-cpu is built once for this module with build.type=Debug through the real CLI (a snapshot of
examples/demofw, a temporary artifacts root, the session's namespace); `invoke debug` then runs
`demofw.take([1.0], [1 << 50])` (an unchecked index 2^50 elements past a one-element buffer: SIGSEGV inside
take_kernel, csrc/ops/take.cpp) under gdb in a fresh container of the recipe's runtime image, and code
that does not crash.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE
from docker import errors as derr

from buildctl.pipeline import engine_names

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
NETWORK = os.environ.get("BUILDCTL_TEST_NETWORK", "host")
VERIFY_CACHE = ROOT / ".cache" / "buildctl-test" / "verify-wheelhouse"
DEBUG = ("--recipe", "demo-cpu", "--set", "build.type=Debug", "--network", NETWORK)
# Settings of the caller's shell that would change the build
UNSET = ("BUILDCTL_NO_VERIFY", "BUILDCTL_JOBS", "BUILDCTL_MEMORY", "BUILDCTL_KEEP_CONTAINER")


def invoke(*args: str, env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in UNSET}
    return subprocess.run([str(Path(sys.executable).with_name("invoke")), "-r", str(ROOT), *args], capture_output=True,
                          text=True, cwd=cwd, env={**full, **env}, timeout=timeout)


@pytest.fixture(scope="module")
def demo_debug(tmp_path_factory, docker_client, base_image) -> dict:
    """`invoke build --recipe demo-cpu --set build.type=Debug` of a source snapshot; where it ran. Removes
    the build-dir volume it made (the images go with the session's namespace)."""
    work = tmp_path_factory.mktemp("debug-integration")
    src = work / "demofw"
    shutil.copytree(ROOT / "examples" / "demofw", src,
                    ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    env = {"BUILDCTL_ARTIFACTS": str(work / "artifacts"), "BUILDCTL_CACHE": str(VERIFY_CACHE), "PYTHONUNBUFFERED": "1"}
    proc = invoke("build", *DEBUG, "--ca-cert", CA_BUNDLE, "--set", f"framework.source.path={src}", "--json",
                  env=env, cwd=work, timeout=45 * 60)
    payload = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    assert proc.returncode == 0 and payload.get("ok"), f"build failed (exit {proc.returncode}):\n{proc.stderr[-5000:]}"
    yield {"env": env, "work": work}
    with contextlib.suppress(derr.NotFound, derr.APIError):
        docker_client.api.remove_volume(engine_names.work_volume_name("demo-cpu", payload["key"], TEST_NAMESPACE))


def test_debug_chases_the_demo_crash_to_its_source_line_and_says_when_nothing_crashed(demo_debug, docker_client):
    env, work = demo_debug["env"], demo_debug["work"]
    crash = invoke("debug", *DEBUG, "--code", "import demofw\ndemofw.take([1.0], [1 << 50])", "--json",
                   env=env, cwd=work, timeout=900)
    assert crash.returncode == 0, crash.stderr[-3000:]
    report = json.loads(crash.stdout)
    assert report["signal"] == "SIGSEGV" and report["exit_code"] == 139 and report["build_type"] == "Debug"
    top = report["frames"][0]
    assert "take_kernel" in top["function"], report["frames"][:3]
    assert top["file"] == "csrc/ops/take.cpp" and isinstance(top["line"], int), top  # as -ffile-prefix-map left it
    assert top["object"].endswith(".so") and "/demofw/" in top["object"]
    assert {"file": "<string>", "line": 2, "function": "<module>"} in report["python_stack"]

    calm = invoke("debug", *DEBUG, "--code", "import demofw\nprint(demofw.take([1.0, 2.0], [1]))",
                  env=env, cwd=work, timeout=900)
    assert calm.returncode == 1, calm.stderr[-3000:]
    assert calm.stdout == ""
    assert calm.stderr.splitlines()[-1] == "the code did not crash: it exited with status 0 under gdb"
    assert "[2.0]" in calm.stderr  # the program's own output, in the log of the run
    ours = {"label": ["buildctl.role=debug", f"buildctl.namespace={TEST_NAMESPACE}"]}
    assert docker_client.containers.list(all=True, filters=ours) == []  # no container left behind


def test_debug_shell_opens_the_container_with_gdb_and_the_build_sources(demo_debug, docker_client):
    """`--shell` under a pseudo-terminal (util-linux's `script`): the commands a person would type, then
    their exit code is the command's. gdb lists the crashing line from the build directory's sources."""
    env, work = demo_debug["env"], demo_debug["work"]
    typed = ("gdb -q -batch -ex run -ex list --args /opt/venv/bin/python /debug/program/code.py\n"
             "touch /work/src/x\n"
             "exit 3\n")
    cmd = shlex.join([str(Path(sys.executable).with_name("invoke")), "-r", str(ROOT), "debug", *DEBUG, "--shell",
                      "--code", "import demofw\ndemofw.take([1.0], [1 << 50])"])
    full = {k: v for k, v in os.environ.items() if k not in UNSET}
    proc = subprocess.run(["script", "-qec", cmd, "/dev/null"], input=typed, capture_output=True, text=True,
                          cwd=work, env={**full, **env}, timeout=900)
    assert proc.returncode == 3, proc.stdout[-3000:]
    assert "the sources: /work/src (read-only)" in proc.stdout
    assert "take_kernel<double>" in proc.stdout and "out[i] = in[k];  // unchecked, see above" in proc.stdout, \
        proc.stdout[-3000:]
    assert "Read-only file system" in proc.stdout  # the build directory is the user's to read, not to change
    ours = {"label": ["buildctl.role=debug", f"buildctl.namespace={TEST_NAMESPACE}"]}
    assert docker_client.containers.list(all=True, filters=ours) == []


def test_the_shells_mounts_read_as_given_by_the_docker_cli(base_image, test_labels, tmp_path):
    """Issue 35, suspicion (proved): `--shell` gave the docker CLI `-v SRC:DST:ro`, which it splits at every ':',
    so an artifacts path holding one (a time in a folder name) failed or mounted the wrong source. The
    mount arguments `shell_command` makes, given to the real docker CLI with a path holding ':', ',' and '"':
    the file is there, read-only. About 2 s (one container of the base image)."""
    from buildctl.verify.debug import shell_command

    folder = tmp_path / 'ci 12:30' / 'a,b"c'
    folder.mkdir(parents=True)
    (folder / "w.whl").write_text("the wheel\n")
    cmd = shell_command(base_image, "cat /verify/in/w.whl && ! touch /verify/in/w.whl 2>/dev/null",
                        mounts={str(folder / "w.whl"): "/verify/in/w.whl"}, env={}, labels=test_labels, network=None)
    cmd.remove("-it")  # no terminal here
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and done.stdout == "the wheel\n", done.stderr
