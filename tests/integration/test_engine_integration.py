"""buildctl.engine and buildctl.secrets against the real Docker engine (never skipped).

What needs no engine (connect errors, canned build streams, masking) is in tests/unit/test_engine.py.
The tests marked `engines` are part of the engine matrix (docs/engines.md): they hold on Docker 20.10,
Docker 26 and rootless Podman alike, and where an engine differs they assert what buildctl does about
it (a refusal in one line, or the documented difference)."""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from conftest import default_sigint

from buildctl import engine
from buildctl.errors import EngineError, InputError

integration = pytest.mark.integration
engines = pytest.mark.engines
# The first line of a build step: Docker's classic builder "Step 1/3 : FROM ...", Podman's buildah
# "STEP 1/3: FROM ..." ("[1/2] STEP 1/3: ..." in a multi-stage build).
STEP_HEADER = re.compile(r"^(Step|(\[\d+/\d+\] )?STEP) 1/\d+ ?:")
ROOT = Path(__file__).resolve().parents[2]


def write_context(ctx: Path, dockerfile: str) -> Path:
    ctx.mkdir(parents=True, exist_ok=True)
    (ctx / "Dockerfile").write_text(textwrap.dedent(dockerfile).lstrip())
    return ctx


def tag_for(name: str, labels: dict[str, str]) -> str:
    return f"buildctl-test/{name}:{labels['buildctl.test']}"


# ---------------------------------------------------------------------------------------------- connect


FAKE_SSH = """#!/bin/sh
# Stands in for ssh: drops the options and the host, runs the remote command here.
while [ "$1" != "--" ]; do shift; done
shift 2
exec env -u DOCKER_HOST "$@"  # the remote side talks to its local engine
"""


@integration
def test_connect_over_ssh_without_paramiko(monkeypatch, tmp_path, base_image, test_labels):
    """ssh:// goes through the ssh binary and `docker system dial-stdio`, attach included."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ssh").write_text(FAKE_SSH)
    (bindir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DOCKER_HOST", "ssh://builder@gpu-host:2222")
    client = engine.connect(environ=os.environ)
    try:
        assert engine.engine_facts(client)["local"] is False
        (tmp_path / "in.txt").write_text("over-ssh\n")
        res = engine.run_container(
            client,
            engine.ContainerSpec(
                base_image,
                ["bash", "-c", "cat /in.txt; cp /in.txt /out/copy.txt; exit 4"],
                inputs={"/in.txt": tmp_path / "in.txt"},
                outputs={"/out": tmp_path / "out"},
                volumes={f"buildctl-test-ssh-{test_labels['buildctl.test']}": "/out"},
                labels=test_labels,
            ),
        )
        assert (res.exit_code, res.log) == (4, "over-ssh")
        assert (tmp_path / "out" / "copy.txt").read_text() == "over-ssh\n"
    finally:
        client.close()


@integration
@engines
def test_connect_and_engine_facts(docker_client):
    facts = engine.engine_facts(docker_client)
    assert facts["server_version"] and facts["api_version"]
    # the engine's kind as `docker version` shows it: Podman lists itself among the components
    components = [c.get("Name") for c in docker_client.version().get("Components") or []]
    assert facts["kind"] == ("Podman" if "Podman Engine" in components else "Docker")
    assert isinstance(facts["rootless"], bool) and isinstance(facts["memory_limits"], bool)
    assert facts["storage_driver"] and facts["docker_root_dir"].startswith("/")
    assert facts["os_type"] == "linux" and facts["arch"]
    if facts["local"]:
        assert facts["free_bytes"] is None or facts["free_bytes"] > 0


# ---------------------------------------------------------------------------------------------- build


@integration
@engines
def test_build_streams_lines_and_labels_the_image(docker_client, base_image, test_labels, tmp_path):
    ctx = write_context(
        tmp_path / "ctx",
        f"""
        FROM {base_image}
        ARG GREETING
        RUN echo "greeting=$GREETING" && echo "proxy=$HTTP_PROXY" && echo "run={test_labels['buildctl.test']}"
        """,
    )
    lines: list[str] = []
    proxy = "http://builder:s3cr3t-pw@proxy.corp:3128"
    tag = tag_for("build", test_labels)
    image_id = engine.build_image(
        docker_client,
        engine.ImageSpec(
            ctx,
            tag,
            buildargs={"GREETING": "hello-visible", "HTTP_PROXY": proxy, "https_proxy": proxy},
            labels=test_labels,
        ),
        on_line=lines.append,
    )
    assert image_id.startswith("sha256:")
    assert any(STEP_HEADER.match(ln) for ln in lines), lines
    assert "greeting=hello-visible" in lines
    # The proxy reached the RUN step, and its password was masked in the streamed log.
    assert "proxy=http://***@proxy.corp:3128" in lines
    assert not any("s3cr3t-pw" in ln for ln in lines)

    attrs = docker_client.api.inspect_image(tag)
    assert attrs["Config"]["Labels"]["buildctl"] == "1"
    assert attrs["Config"]["Labels"]["buildctl.test"] == test_labels["buildctl.test"]
    # Docker leaves its predefined proxy args out of the history; an ordinary build arg shows (control).
    history = subprocess.run(
        ["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", tag],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "GREETING=hello-visible" in history
    everything = history + json.dumps(docker_client.api.history(tag)) + json.dumps(attrs)
    assert "s3cr3t-pw" not in everything and "proxy.corp" not in everything


@integration
@engines
def test_failing_run_step_raises_step_failed_with_the_log(docker_client, base_image, test_labels, tmp_path):
    ctx = write_context(
        tmp_path / "ctx",
        f"""
        FROM {base_image}
        RUN echo "before the failure" && echo "compiler says no" >&2 && exit 3
        """,
    )
    lines: list[str] = []
    with pytest.raises(engine.StepFailed) as info:
        engine.build_image(
            docker_client,
            engine.ImageSpec(ctx, tag_for("fail", test_labels), labels=test_labels),
            on_line=lines.append,
        )
    err = info.value
    assert err.step == "image" and err.returncode == 3 and not err.oom_killed
    assert err.exit_code == 1  # the command's exit code stays buildctl's "a run failed"
    assert "before the failure" in err.log and "compiler says no" in err.log
    assert err.log.splitlines() == lines
    assert "\n" not in str(err) and "exit code 3" in str(err)


@integration
@engines
def test_build_refuses_to_pull_a_missing_base(docker_client, test_labels, tmp_path):
    ctx = write_context(tmp_path / "ctx", "FROM buildctl-test/absent-image:never\nRUN true\n")
    with pytest.raises(EngineError, match="never pulls"):
        engine.build_image(
            docker_client, engine.ImageSpec(ctx, tag_for("nopull", test_labels), labels=test_labels)
        )


# ---------------------------------------------------------------------------------------------- run


@integration
@engines
def test_run_container_inputs_outputs_volumes_round_trip(docker_client, base_image, test_labels, tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.txt").write_text("alpha\n")
    (src / "run.sh").write_text("#!/bin/sh\necho from-script\n")
    (src / "run.sh").chmod(0o755)
    stamp_ns = 1_577_880_000_123_456_789
    os.utime(src / "pkg" / "a.txt", ns=(stamp_ns, stamp_ns))
    single = tmp_path / "single.cfg"
    single.write_text("k=v\n")
    out = tmp_path / "out"
    volume = f"buildctl-test-{test_labels['buildctl.test']}"
    script = """
        set -e
        cat /work/src/pkg/a.txt
        /work/src/run.sh
        cat /etc/buildctl/single.cfg
        stat -c 'mtime=%.9Y owner=%u:%g' /work/src/pkg/a.txt
        cat /cache/count 2>/dev/null || echo 0 > /cache/count
        echo $(( $(cat /cache/count) + 1 )) > /cache/count
        mkdir -p /out/wheels/sub
        echo wheel > /out/wheels/pkg-1.0.whl
        echo nested > /out/wheels/sub/n.txt
    """
    run = dict(
        inputs={"/work/src": src, "/etc/buildctl/single.cfg": single},
        outputs={"/out/wheels": out, "/out/absent": tmp_path / "absent"},
        volumes={volume: "/cache"},
        labels=test_labels,
    )
    first = engine.run_container(docker_client, engine.ContainerSpec(base_image, ["bash", "-c", script], **run))
    assert first.exit_code == 0, first.log
    assert first.ok and not first.oom_killed
    log = first.log.splitlines()
    assert log[:3] == ["alpha", "from-script", "k=v"]
    # mtimes to the nanosecond; Podman's archive API keeps microseconds (docs/engines.md)
    exact = f"mtime={stamp_ns // 10**9}.{stamp_ns % 10**9:09d} owner=0:0"
    micro = f"mtime={stamp_ns // 10**9}.{round(stamp_ns % 10**9, -3):09d} owner=0:0"
    assert (micro if engine.kind_of(docker_client).podman else exact) in log
    assert (out / "pkg-1.0.whl").read_text() == "wheel\n"
    assert (out / "sub" / "n.txt").read_text() == "nested\n"
    assert first.missing_outputs == ("/out/absent",)
    assert not (tmp_path / "absent").exists()
    # The named volume persists between runs and carries our labels; the container is gone.
    second = engine.run_container(
        docker_client,
        engine.ContainerSpec(
            base_image, ["cat", "/cache/count"], volumes={volume: "/cache"}, labels=test_labels
        ),
    )
    assert second.log.strip() == "1"
    vol = docker_client.api.inspect_volume(volume)
    assert vol["Labels"]["buildctl"] == "1"
    assert engine.list_buildctl_containers(docker_client, test_labels) == []
    assert engine.remove_volume(docker_client, volume) is True
    assert engine.remove_volume(docker_client, volume) is False


@integration
@engines
def test_inputs_belong_to_a_numeric_user(docker_client, base_image, test_labels, tmp_path):
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "sub" / "f").write_text("x")
    res = engine.run_container(
        docker_client,
        engine.ContainerSpec(
            base_image,
            ["bash", "-c", "stat -c '%u:%g' /src /src/sub/f && touch /src/sub/new && echo wrote"],
            inputs={"/src": tmp_path / "src"},
            user="1234:1234",
            labels=test_labels,
        ),
    )
    assert res.log.splitlines() == ["1234:1234", "1234:1234", "wrote"], res.log


@integration
@engines
def test_exit_code_propagates_and_log_is_streamed(docker_client, base_image, test_labels):
    lines: list[str] = []
    res = engine.run_container(docker_client, engine.ContainerSpec(base_image, [
            "bash",
            "-c",
            "echo out; printf 'half-'; echo err >&2; sleep 0.2; echo line; printf 'no-newline'; exit 7",
        ], labels=test_labels), on_line=lines.append)
    assert res.exit_code == 7 and not res.oom_killed and not res.ok
    # stdout and stderr are separate streams: their relative order is not guaranteed, but a partial
    # line of one is never glued to the other.
    assert sorted(lines) == ["err", "half-line", "no-newline", "out"]
    assert lines.index("out") < lines.index("half-line") < lines.index("no-newline")
    assert res.log == "\n".join(lines)


@integration
@engines
def test_keep_keeps_a_finished_container(docker_client, base_image, test_labels):
    res = engine.run_container(
        docker_client, engine.ContainerSpec(base_image, ["true"], keep=True, labels=test_labels)
    )
    kept = engine.list_buildctl_containers(docker_client, test_labels)
    assert [c.id for c in kept] == [res.container_id]
    kept[0].remove(force=True)


@integration
@engines
def test_oom_is_detected(docker_client, base_image, test_labels):
    # bash holds 200 MB in a variable; the 64 MiB limit kills it.
    cmd = ["bash", "-c", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived ${#x}"]
    if not engine.kind_of(docker_client).memory_limits:  # rootless Podman on cgroup v1: refused, not ignored
        with pytest.raises(InputError, match=r"^--memory 64m: this \w+ engine cannot limit a container's memory"):
            engine.run_container(
                docker_client, engine.ContainerSpec(base_image, cmd, mem_limit="64m", labels=test_labels)
            )
        assert engine.list_buildctl_containers(docker_client, test_labels) == []
        return
    res = engine.run_container(
        docker_client, engine.ContainerSpec(base_image, cmd, mem_limit="64m", labels=test_labels)
    )
    assert res.oom_killed, res
    assert res.exit_code != 0 and "survived" not in res.log


@integration
@engines
def test_secrets_in_env_are_masked_in_the_log(docker_client, base_image, test_labels):
    env = {"HF_TOKEN": "hf_abcdefghijkl", "PIP_INDEX_URL": "https://ci:pypi-pass-123@pypi.corp/simple"}
    lines: list[str] = []
    res = engine.run_container(
        docker_client,
        engine.ContainerSpec(
            base_image,
            ["bash", "-c", 'echo "token=$HF_TOKEN index=$PIP_INDEX_URL other=extra-secret-9"'],
            env=env,
            labels=test_labels,
        ),
        secrets=["extra-secret-9"],
        on_line=lines.append,
    )
    assert lines == ["token=*** index=https://***@pypi.corp/simple other=***"]
    assert "hf_abc" not in res.log and "pypi-pass" not in res.log


@integration
@engines
def test_container_removed_when_the_caller_raises(docker_client, base_image, test_labels):
    def boom(line: str) -> None:
        raise RuntimeError("consumer failed")

    with pytest.raises(RuntimeError, match="consumer failed"):
        engine.run_container(
            docker_client,
            engine.ContainerSpec(base_image, ["bash", "-c", "echo hi; sleep 60"], labels=test_labels),
            on_line=boom,
        )
    assert engine.list_buildctl_containers(docker_client, test_labels) == []


@integration
@engines
def test_missing_image_is_an_engine_error(docker_client, test_labels):
    with pytest.raises(EngineError, match="never pulls"):
        engine.run_container(
            docker_client,
            engine.ContainerSpec("buildctl-test/absent-image:never", ["true"], labels=test_labels),
        )
    assert engine.list_buildctl_containers(docker_client, test_labels) == []


CHILD = """
import os
import sys
from buildctl import engine
client = engine.connect(environ=os.environ)
engine.run_container(
    client, engine.ContainerSpec(sys.argv[1], ["bash", "-c", "echo ready; exec sleep 300"],
                                 labels={"buildctl.test": sys.argv[2]}),
    on_line=lambda line: print(line, flush=True),
)
print("finished", flush=True)
"""


def _read_until(proc: subprocess.Popen, wanted: str, deadline: float) -> None:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    while time.monotonic() < deadline:
        if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
            break
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"child exited early: rc={proc.wait()} stderr={proc.stderr.read()}")
        if line.strip() == wanted:
            return
    raise AssertionError(f"child did not print {wanted!r} in time")


# Only a guard against a hang: every wait below ends on an event (a line, the child's exit).
HANG_GUARD_S = 600




@integration
@engines
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_removes_the_container(docker_client, base_image, sig):
    mark = f"sig-{uuid.uuid4().hex[:10]}"
    labels = {"buildctl.test": mark}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, base_image, mark],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        _read_until(proc, "ready", time.monotonic() + HANG_GUARD_S)
        assert len(engine.list_buildctl_containers(docker_client, labels)) == 1
        proc.send_signal(sig)
        rc = proc.wait(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc != 0
    assert "finished" not in proc.stdout.read()
    assert engine.list_buildctl_containers(docker_client, labels) == []


BUILD_CHILD = """
import os
import sys
from pathlib import Path
from buildctl import engine
client = engine.connect(environ=os.environ)
engine.build_image(client, engine.ImageSpec(Path(sys.argv[1]), sys.argv[2], nocache=True),
                   on_line=lambda line: print(line, flush=True))
"""


@integration
@engines
def test_signal_during_build_leaves_no_container(docker_client, base_image, test_labels, tmp_path):
    token = f"started-{uuid.uuid4().hex[:10]}"
    ctx = write_context(tmp_path / "ctx", f"FROM {base_image}\nRUN echo {token} && sleep 300\n")
    proc = subprocess.Popen(
        [sys.executable, "-c", BUILD_CHILD, str(ctx), tag_for("interrupted", test_labels)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def build_containers():
        # The list's own rows: containers.list() inspects each container after listing, and one that another
        # session removed in between raised NotFound here (the engine matrix, CI of e53f267's fixes).
        return [c["Id"] for c in docker_client.api.containers(all=True) if token in c.get("Command", "")]

    # Podman's build containers are its builder's own (buildah), never listed through the Docker API
    podman = engine.kind_of(docker_client).podman
    try:
        _read_until(proc, token, time.monotonic() + 60)
        assert len(build_containers()) == (0 if podman else 1)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc != 0
    # The daemon cancels the build when the client goes away; forcerm removes its container. Podman
    # runs the RUN step on to its end and then drops the build (containers/podman#10295, docs/engines.md):
    # no container to see, and no image is tagged.
    deadline = time.monotonic() + 30
    while build_containers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert build_containers() == []
    assert not engine.image_exists(docker_client, tag_for("interrupted", test_labels))
