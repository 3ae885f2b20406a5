"""engine.run_container against the real engine: what kills a container, and exclusive names.

* A `docker kill` (SIGKILL from outside) gives exit code 137 and is NOT reported as OOM. The old
  code took every 137 for OOM (`oom = State.OOMKilled or code == 137`), so a killed compile was
  "retried with fewer jobs" and diagnosed as memory.
* A real OOM kill (a child process over the container's memory limit) is reported from the engine's
  State.OOMKilled, even when the command itself survives it and exits 0.
* A timeout kills the container, says timed_out, is not OOM, and leaves no container behind.
* A fixed container name is exclusive: a second run with the name fails with one line naming the fix
  and leaves the first run's container alone (the old code then force-removed it by name).

Every wait ends on an event (a line from the container, its exit); nothing sleeps to synchronise.
All of them are part of the engine matrix (docs/engines.md). An engine that cannot limit memory (rootless
Podman on cgroup v1) is asked for no limit it would ignore: the run is refused in one line. Podman
answers a taken name with 500, not 409: the other container is kept all the same.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from buildctl import engine
from buildctl.errors import InputError

pytestmark = [pytest.mark.integration, pytest.mark.engines]


def _name(tag: str) -> str:
    return f"buildctl-test-{tag}-{uuid.uuid4().hex[:10]}"


def test_docker_kill_gives_137_and_is_not_oom(docker_client, base_image, test_labels):
    name = _name("kill")

    def on_line(line: str) -> None:
        if line == "ready":  # the command runs: kill it from outside, as `docker kill` does
            docker_client.api.kill(name)

    res = engine.run_container(
        docker_client,
        engine.ContainerSpec(
            base_image, ["bash", "-c", "echo ready; exec sleep 300"], name=name, labels=test_labels
        ),
        on_line=on_line,
    )
    assert res.exit_code == 137
    assert res.oom_killed is False and res.timed_out is False and not res.ok
    assert engine.container_state(docker_client, name) is None  # removed


def test_oom_of_a_child_is_reported_even_when_the_command_exits_0(docker_client, base_image, test_labels):
    script = "bash -c 'x=$(head -c 200000000 /dev/zero | tr \"\\0\" a)'; echo child exit $?; exit 0"
    if not engine.kind_of(docker_client).memory_limits:
        with pytest.raises(InputError, match="cannot limit a container's memory"):
            engine.run_container(
                docker_client,
                engine.ContainerSpec(base_image, ["bash", "-c", script], mem_limit="64m", labels=test_labels),
            )
        assert engine.list_buildctl_containers(docker_client, test_labels) == []
        return
    res = engine.run_container(
        docker_client,
        engine.ContainerSpec(base_image, ["bash", "-c", script], mem_limit="64m", labels=test_labels),
    )
    assert res.exit_code == 0 and "child exit 137" in res.log
    assert res.oom_killed is True and not res.ok


def test_timeout_kills_the_container_and_says_so(docker_client, base_image, test_labels):
    name = _name("timeout")
    t0 = time.monotonic()
    res = engine.run_container(
        docker_client,
        engine.ContainerSpec(
            base_image, ["bash", "-c", "echo ready; exec sleep 300"], name=name, timeout=3, labels=test_labels
        ),
    )
    assert res.timed_out is True and res.oom_killed is False and not res.ok
    assert res.exit_code == 137 and "ready" in res.log
    assert time.monotonic() - t0 < 120  # stopped at the timeout, long before the command would end
    assert engine.container_state(docker_client, name) is None


def test_a_command_that_ends_in_time_is_not_timed_out(docker_client, base_image, test_labels):
    res = engine.run_container(
        docker_client, engine.ContainerSpec(base_image, ["true"], timeout=300, labels=test_labels)
    )
    assert res.ok and res.timed_out is False


def test_a_taken_name_is_refused_and_the_other_container_kept(docker_client, base_image, test_labels):
    name = _name("exclusive")
    ready = threading.Event()
    release = threading.Event()
    first: dict = {}

    def on_line(line: str) -> None:
        if line == "ready":
            ready.set()
            release.wait(timeout=600)  # hold the first run in its stream until the second has tried

    def run_first() -> None:
        first["result"] = engine.run_container(
            docker_client,
            engine.ContainerSpec(
                base_image, ["bash", "-c", "echo ready; sleep 1; echo done"], name=name, labels=test_labels
            ),
            on_line=on_line,
        )

    t = threading.Thread(target=run_first)
    t.start()
    try:
        assert ready.wait(timeout=600)
        with pytest.raises(engine.ContainerNameInUse) as info:
            engine.run_container(
                docker_client, engine.ContainerSpec(base_image, ["true"], name=name, labels=test_labels)
            )
        assert "\n" not in str(info.value) and f"docker rm -f {name}" in str(info.value)
        assert (engine.container_state(docker_client, name) or {}).get("Running") is True  # untouched
    finally:
        release.set()
        t.join(timeout=600)
    assert first["result"].ok and "done" in first["result"].log
    assert engine.container_state(docker_client, name) is None
