"""Containers: create → copy inputs in → start → stream logs → wait → copy outputs out → remove.

The container is removed on every exit path: errors, Ctrl-C and SIGTERM (turned into KeyboardInterrupt
by `terminate_as_interrupt`). Named volumes hold what must persist between runs (build dir, compiler
cache). oom_killed is the engine's own OOMKilled, never guessed from an exit code.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import docker
import requests
from docker import errors as derr
from docker.types import DeviceRequest

from buildctl.engine.failures import (
    NO_SPACE,
    ContainerNameInUse,
    api_error,
    connection_lost,
    display_name,
    one_line,
    pull_hint,
)
from buildctl.engine.kind import kind_of, refuse_memory_limit
from buildctl.engine.labels import KEEP_LABEL, OWNER_LABEL, buildctl_labels, network_mode_for, process_owner
from buildctl.engine.lines import LineSink, LineSplitter, StepLog
from buildctl.engine.signals import signals_deferred, terminate_as_interrupt
from buildctl.engine.transfer import Snapshot, Tree, get_output, owner_of, put_credentials, put_input
from buildctl.errors import EngineError
from buildctl.secrets import Credentials, Masker, secret_values_from_env

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ContainerResult:
    exit_code: int
    oom_killed: bool  # the engine's State.OOMKilled: the kernel's OOM killer hit the container
    log: str
    container_id: str
    missing_outputs: tuple[str, ...] = ()  # container paths of `outputs` that did not exist
    timed_out: bool = False  # stopped (killed) by run_container's timeout

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.oom_killed

    @property
    def disk_full(self) -> bool:
        return self.exit_code != 0 and bool(NO_SPACE.search(self.log[-20000:]))


def _ensure_volume(client: docker.DockerClient, name: str, labels: Mapping[str, str]) -> None:
    if not name or "/" in name:
        raise EngineError(
            f"volume {name!r} is not a volume name (host paths are not mounted; use inputs/outputs)"
        )
    try:
        client.api.inspect_volume(name)
    except derr.NotFound:
        try:
            client.api.create_volume(name, labels=dict(labels))
        except derr.APIError as e:
            raise api_error(e, f"creating volume {name}") from e


def _refuse_what_the_engine_ignores(client: docker.DockerClient, mem_limit: str | int | None,
                                    gpus: bool) -> None:
    """A memory limit or GPUs that the engine would silently drop: refused before anything is created."""
    kind = kind_of(client)
    if mem_limit:
        refuse_memory_limit(kind, mem_limit)
    if gpus and kind.podman:
        raise EngineError(
            "Podman's Docker API accepts --gpus and starts the container without GPUs "
            "(containers/podman#22645); fix: verify on a Docker engine with the NVIDIA Container Toolkit, "
            "or with `invoke verify --host`"
        )


def refuse_in_clear(client: docker.DockerClient) -> None:
    """Credentials go into a container through the Engine API (put_archive): refused, before anything is
    created, when that API is plain HTTP to another host (tcp:// without TLS: anyone on the way reads
    them), as Docker itself refuses a daemon listening on tcp:// without TLS. A unix socket (ssh:// is
    one, the bridge's), the loopback and TLS are fine."""
    base = str(client.api.base_url)
    if not base.startswith("http://"):
        return
    host = urlsplit(base).hostname or ""
    if host == "localhost" or host == "::1" or host.startswith("127."):
        return
    raise EngineError(
        f"this build's credentials would travel to the engine at {display_name(base.replace('http://', 'tcp://', 1))} "
        "unencrypted (tcp:// without TLS); fix: reach it over TLS (tcp://HOST:2376 with DOCKER_TLS_VERIFY=1 and "
        "DOCKER_CERT_PATH) or ssh://USER@HOST, or build with URLs that carry no credentials")


def container_state(client: docker.DockerClient, ref: str) -> dict[str, Any] | None:
    """The State of container `ref` (a name or id), None when there is none."""
    try:
        return client.api.inspect_container(ref).get("State") or {}
    except derr.NotFound:
        return None
    except derr.APIError as e:
        raise api_error(e, f"looking up container {ref}") from e


def remove_container(client: docker.DockerClient, ref: str) -> None:
    """Remove container `ref` (forced, with its anonymous volumes); absent is fine. Signals wait for it."""
    with signals_deferred():
        for _ in range(3):
            try:
                client.api.remove_container(ref, force=True, v=True)
                return
            except derr.NotFound:
                return
            except derr.APIError as e:
                if "already in progress" in str(e):
                    return
                last: BaseException = e
            except (requests.exceptions.RequestException, OSError) as e:
                last = e
        log.warning("could not remove container %s: %s", ref, one_line(str(last), 200))


@dataclass(frozen=True)
class ContainerSpec:
    """What one container is: its image, command and how it runs (run_container's request).

    inputs {container path: host path}: copied in before start (a directory's contents land at the
    container path, a file at that path), owned by `user` when numeric, else root, mtimes kept.
    outputs {container path: host dir}: copied out after exit, also when the command failed; a
    directory's contents (or a file) replace the host dir; only regular files and folders within
    OUTPUT_CAPS are accepted (else InputError, nothing written); absent ones are listed in missing_outputs.
    volumes {volume name: container path}: named volumes, created (labelled) when missing.
    cpuset_cpus: the CPUs the container may run on (docker's --cpuset-cpus, e.g. "0" or "0-3").
    keep: keeps the container, only after a normal finish.
    timeout: seconds from start; then the container is killed and the result says timed_out.
    entrypoint: replaces the image's ENTRYPOINT; [""] runs `command` as it is, whatever the image sets.
    name: a fixed name makes the run exclusive: while a container of that name exists, run_container
    raises EngineError (ContainerNameInUse) and leaves the other container alone.
    """

    image: str
    command: Sequence[str]
    env: Mapping[str, str] | None = None
    inputs: Mapping[str, Path | Tree | Snapshot] | None = None
    outputs: Mapping[str, Path] | None = None
    volumes: Mapping[str, str] | None = None
    network_mode: str | None = None
    mem_limit: str | int | None = None
    cpuset_cpus: str | None = None
    gpus: bool = False
    workdir: str | None = None
    user: str | None = None
    keep: bool = False
    name: str | None = None
    labels: Mapping[str, str] | None = None
    shm_size: str | None = None
    ipc_mode: str | None = None
    timeout: float | None = None
    entrypoint: list[str] | None = None


def run_container(
    client: docker.DockerClient,
    spec: ContainerSpec,
    *,
    on_line: LineSink | None = None,
    secrets: Iterable[str] = (),
    credentials: Credentials | None = None,
    on_interrupt: Callable[[str], None] | None = None,
) -> ContainerResult:
    """Run `spec.command` in a fresh container of `spec.image`; its exit code, OOM flag and (masked) log.

    credentials: copied in as /run/buildctl-secrets before start (never in the container's config);
    the command takes them with templates/secrets.sh, which removes the file.
    The container is removed on every path (errors, Ctrl-C, SIGTERM); `spec.keep` keeps it only after a
    normal finish. A non-zero exit is a result, not an exception; engine problems raise EngineError.
    oom_killed is the engine's OOMKilled, never guessed from exit code 137 (a `docker kill` gives 137).
    on_interrupt(container id): called on Ctrl-C/SIGTERM while the container still runs, before it is
    removed (e.g. to record what was in flight); its own errors are ignored.
    """
    if credentials:
        refuse_in_clear(client)
    env = {str(k): str(v) for k, v in (spec.env or {}).items()}
    masker = Masker([*secrets, *secret_values_from_env(env), *(credentials.values() if credentials else ())])
    labels = buildctl_labels(spec.labels)
    name = spec.name or f"buildctl-{uuid.uuid4().hex[:12]}"
    doing = f"running container {name}"
    _refuse_what_the_engine_ignores(client, spec.mem_limit, spec.gpus)
    for vol in spec.volumes or {}:
        _ensure_volume(client, vol, labels)

    emit = StepLog(masker, on_line)

    cid: str | None = None
    finished = False
    name_taken = False
    engine_gone = False
    timer: threading.Timer | None = None
    stopped_by_timeout = threading.Event()
    with terminate_as_interrupt():
        try:
            cid = _create_container(client, spec, name, env, labels)
            _copy_inputs_in(client, cid, spec, credentials)
            # Attach before start (as `docker run` does): nothing is missed, no log driver is needed,
            # and stdout/stderr arrive apart, so a partial line of one is never glued to the other.
            attached = client.api.attach(cid, stdout=True, stderr=True, stream=True, logs=True, demux=True)
            client.api.start(cid)
            if spec.timeout is not None:
                timer = _kill_after(client, cid, spec.timeout, stopped_by_timeout)
            _stream_lines(attached, emit)
            status = client.api.wait(cid, timeout=None)
            if timer is not None:
                timer.cancel()
                timer.join()
            code = int(status.get("StatusCode", -1))
            state = client.api.inspect_container(cid).get("State") or {}
            oom = bool(state.get("OOMKilled"))
            missing = _copy_outputs_out(client, cid, spec.outputs)
            finished = True
            return ContainerResult(code, oom, "\n".join(emit.lines), cid, missing, stopped_by_timeout.is_set())
        except ContainerNameInUse:
            name_taken = True  # the name is someone else's container: never remove it
            raise
        except derr.APIError as e:
            raise api_error(e, doing, masker) from e
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as e:
            engine_gone = True  # nothing can be removed there now: the next build of the key removes it
            raise connection_lost(e, doing, client, left=name) from e
        except KeyboardInterrupt:
            if on_interrupt is not None and cid:
                with contextlib.suppress(Exception):
                    on_interrupt(cid)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            if not (spec.keep and finished) and not name_taken and not engine_gone:
                remove_container(client, cid or name)


def _create_container(client: docker.DockerClient, spec: ContainerSpec, name: str, env: dict[str, str],
                      labels: dict[str, str]) -> str:
    """Create (not start) the container `name` of `spec`; its id. ContainerNameInUse when the name is taken."""
    host_config = client.api.create_host_config(
        binds={vol: {"bind": path, "mode": "rw"} for vol, path in (spec.volumes or {}).items()},
        network_mode=network_mode_for(spec.network_mode),
        mem_limit=spec.mem_limit,
        memswap_limit=spec.mem_limit,  # no swap on top: a limit is a limit
        cpuset_cpus=spec.cpuset_cpus,
        device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])] if spec.gpus else None,
        shm_size=spec.shm_size,
        ipc_mode=spec.ipc_mode,
    )
    try:
        return client.api.create_container(
            spec.image,
            command=list(spec.command),
            entrypoint=spec.entrypoint,
            environment=env,
            working_dir=spec.workdir,
            user=spec.user,
            labels={**labels, OWNER_LABEL: process_owner(), **({KEEP_LABEL: "1"} if spec.keep else {})},
            host_config=host_config,
            name=name,
            detach=True,
        )["Id"]
    except derr.ImageNotFound as e:
        raise EngineError(pull_hint(spec.image)) from e
    except derr.APIError as e:
        # Docker answers 409; Podman 500 "... is already in use by <id>. You have to remove that container ..."
        if e.status_code == 409 or "is already in use" in str(e.explanation or ""):
            raise ContainerNameInUse(
                f"a container named {name} exists already ({one_line(e.explanation or str(e), 200)}); "
                f"fix: wait for the run that owns it, or remove it (docker rm -f {name}) if nothing runs it"
            ) from e
        raise


def _copy_inputs_in(client: docker.DockerClient, cid: str, spec: ContainerSpec,
                    credentials: Credentials | None) -> None:
    """The credentials and `spec.inputs` into the created container, owned by `spec.user` when numeric."""
    owner = owner_of(spec.user)
    if credentials:
        put_credentials(client, cid, credentials, owner)
    for container_path, host_path in (spec.inputs or {}).items():
        put_input(client, cid, container_path, host_path, owner)


def _kill_after(client: docker.DockerClient, cid: str, timeout: float, killed: threading.Event) -> threading.Timer:
    """A started timer that kills container `cid` after `timeout` seconds and then sets `killed`."""

    def stop() -> None:
        try:
            client.api.kill(cid)
        except (derr.APIError, requests.exceptions.RequestException, OSError):
            return  # it finished meanwhile: not a timeout
        killed.set()

    timer = threading.Timer(max(0.0, timeout), stop)
    timer.daemon = True
    timer.start()
    return timer


def _stream_lines(attached: Iterable[tuple[bytes | None, bytes | None]], emit: LineSink) -> None:
    """The attached container's stdout and stderr frames, each stream decoded and split into lines on
    its own, to `emit` as they come; the last partial lines when the streams end."""
    streams = [(codecs.getincrementaldecoder("utf-8")(errors="replace"), LineSplitter()) for _ in range(2)]
    for frame in attached:
        for (decoder, splitter), data in zip(streams, frame, strict=True):
            if data:
                for ln in splitter.feed(decoder.decode(data)):
                    emit(ln)
    for decoder, splitter in streams:
        for ln in splitter.feed(decoder.decode(b"", final=True)) + splitter.flush():
            emit(ln)


def _copy_outputs_out(client: docker.DockerClient, cid: str, outputs: Mapping[str, Path] | None) -> tuple[str, ...]:
    """Copy `outputs` {container path: host dir} out of the exited container; the container paths absent."""
    return tuple(cpath for cpath, hdir in (outputs or {}).items() if not get_output(client, cid, cpath, Path(hdir)))
