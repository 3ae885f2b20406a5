"""Image builds through the engine's API, streamed line by line and masked, base images checked first
(never pulled), credentials served to the RUN steps from this machine for the duration of the build.

Which builder, deliberately: Docker's classic builder through the Engine API, also on Docker 23-28
where BuildKit is the CLI's default. The API still serves it (only `docker build` prints the
deprecation), and it is the one builder docker-py drives (BuildKit's session protocol is not in it,
docker/docker-py#2230): the stream, the labels and the run-time credentials (an extra /etc/hosts
entry, never a layer, the history or a cache key) behave the same on every engine, local, tcp:// or
ssh://, with no docker CLI or buildx plugin on this machine. On Podman the same call is Podman's own
builder (buildah) behind its Docker API; its differences are handled below (docs/engines.md).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import docker
import requests
from docker import errors as derr

from buildctl.engine.connection import engine_on_this_machine
from buildctl.engine.dockerfile import base_image_refs
from buildctl.engine.failures import CLEAN_FIX, NO_SPACE, api_error, connection_lost, one_line, pull_hint
from buildctl.engine.kind import kind_of
from buildctl.engine.labels import buildctl_labels, network_mode_for
from buildctl.engine.lines import LineSink, LineSplitter, StepLog
from buildctl.engine.objects import image_exists
from buildctl.engine.signals import terminate_as_interrupt
from buildctl.errors import EngineError, StepFailed
from buildctl.secrets import Credentials, Masker, SecretServer, url_secrets


@dataclass(frozen=True)
class ImageSpec:
    """What one image build is: the context folder, the tag and how it is built (build_image's request).
    allow_pull: let the engine pull a base image the Dockerfile names (else an absent one is refused)."""

    context_dir: Path
    tag: str
    buildargs: Mapping[str, str] | None = None
    network_mode: str | None = None
    target: str | None = None
    labels: Mapping[str, str] | None = None
    nocache: bool = False
    dockerfile: str = "Dockerfile"
    allow_pull: bool = False


def build_image(
    client: docker.DockerClient,
    spec: ImageSpec,
    *,
    on_line: LineSink | None = None,
    secrets: Iterable[str] = (),
    credentials: Credentials | None = None,
) -> str:
    """Build `spec.context_dir` (Docker's classic builder, Podman's buildah), streaming the log line by
    line; the image id.

    A failing step raises StepFailed(step="image") with the masked log; a full disk raises EngineError.
    Proxy build args (HTTP_PROXY & co.) are left out of the image history by Docker itself.
    `credentials` are served to the RUN steps for the duration of the build (`_credential_hosts`).
    """
    context_dir = Path(spec.context_dir)
    buildargs = {str(k): str(v) for k, v in (spec.buildargs or {}).items()}
    masker = Masker([*secrets, *(s for v in buildargs.values() for s in url_secrets(v)),
                     *(credentials.values() if credentials else ())])
    _refuse_an_absent_dockerfile_or_base_image(client, spec, context_dir, buildargs)

    emit = StepLog(masker, on_line)

    doing = f"building {spec.tag}"
    with terminate_as_interrupt(), _credential_hosts(client, credentials, spec.network_mode) as extra_hosts:
        try:
            stream = client.api.build(
                path=str(context_dir),
                dockerfile=spec.dockerfile,
                tag=spec.tag,
                buildargs=buildargs,
                extra_hosts=_extra_hosts(client, extra_hosts),
                network_mode=network_mode_for(spec.network_mode),
                target=spec.target,
                labels=_labels(client, buildctl_labels(spec.labels)),
                nocache=spec.nocache,
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
            )
            end = _follow_build(stream, emit)
        except derr.APIError as e:
            raise api_error(e, doing, masker) from e
        except (requests.exceptions.ConnectionError, derr.DockerException) as e:
            raise connection_lost(e, doing, client) from e
        except BaseException:
            # Drop the connection so that the daemon cancels the build (and, with forcerm, its container).
            with contextlib.suppress(Exception):
                client.api.close()
            raise

    error = end.error
    if error is None and end.built is None:  # no error and no end: never a stage's image taken for the build's
        last = next((ln for ln in reversed(emit.lines) if ln.strip()), "")
        error = ("the engine's build stream ended before the build did, without an error (the connection closed "
                 f"or the engine stopped the build; see the engine's log); last line: {last}")
    if error is not None:
        _raise_build_failure(masker(one_line(error, 400)), end.error_detail, emit, doing)
    image_id = end.image_id
    if image_id is None or not _short_id(image_id).startswith(end.built or ""):
        try:
            image_id = str(client.api.inspect_image(spec.tag)["Id"])
        except derr.APIError as e:
            raise api_error(e, f"inspecting the built image {spec.tag}") from e
    return image_id


def _refuse_an_absent_dockerfile_or_base_image(client: docker.DockerClient, spec: ImageSpec, context_dir: Path,
                                               buildargs: Mapping[str, str]) -> None:
    """EngineError when the context has no `spec.dockerfile`, or (unless `spec.allow_pull`) a base image it
    names is not in the engine: buildctl never pulls one."""
    df = context_dir / spec.dockerfile
    if not df.is_file():
        raise EngineError(f"no {spec.dockerfile} in the build context {context_dir}")
    if not spec.allow_pull:
        for ref in base_image_refs(df.read_text(errors="replace"), buildargs):
            if not image_exists(client, ref):
                raise EngineError(pull_hint(ref))


@dataclass
class _BuildEnd:
    """What the build stream said by its end."""

    image_id: str | None = None  # the last aux ID: the classic builder sends one as each stage ends
    built: str | None = None  # "Successfully built <short id>": the build, not a stage, ended
    error: str | None = None  # the engine's last error
    error_detail: dict[str, Any] = field(default_factory=dict)


def _follow_build(stream: Iterable[Mapping[str, Any]], emit: LineSink) -> _BuildEnd:
    """Each line of the build's stream to `emit` as it comes; what the stream said by its end."""
    end = _BuildEnd()
    splitter = LineSplitter()
    for chunk in stream:
        if "stream" in chunk:
            for ln in splitter.feed(str(chunk["stream"])):
                emit(ln)
                if m := _BUILT.match(ln):
                    end.built = m.group(1)
        elif "status" in chunk:  # pull progress and the like
            emit(" ".join(str(chunk.get(k, "")) for k in ("status", "id") if chunk.get(k)))
        aux = chunk.get("aux")
        if isinstance(aux, dict) and aux.get("ID"):
            end.image_id = str(aux["ID"])
        if "error" in chunk or "errorDetail" in chunk:
            end.error, end.error_detail = _error_text(chunk)
    for ln in splitter.flush():
        emit(ln)
        if m := _BUILT.match(ln):
            end.built = m.group(1)
    return end


def _raise_build_failure(message: str, error_detail: Mapping[str, Any], emit: StepLog, doing: str) -> NoReturn:
    """The failed build's error (`message`, masked) as EngineError (a full disk, an absent base image) or
    StepFailed with the step's exit code; the message goes into the build's log first."""
    emit(f"error: {message}")  # the engine's words in the build's log: build.log, first_error, the diagnosis
    if NO_SPACE.search(message) or any(NO_SPACE.search(ln) for ln in emit.lines[-50:]):
        raise EngineError(f"the Docker engine ran out of disk space while {doing}; {CLEAN_FIX}")
    if re.search(r"pull access denied|manifest unknown|registry-1\.docker\.io|repository does not exist", message):
        raise EngineError(f"{message}; fix: the base image must be in the engine already (buildctl never pulls)")
    code = error_detail.get("code")
    if not isinstance(code, int) or code == 0:
        # Docker: "returned a non-zero code: 3"; Podman (buildah): "while running runtime: exit status 3"
        m = re.search(r"non-zero code: (\d+)|exit status (\d+)", message)
        code = int(m.group(1) or m.group(2)) if m else 1
    # The build's RUN container is gone and its OOMKilled unknown: exit 137 alone is any SIGKILL.
    raise StepFailed("image", code, "\n".join(emit.lines), detail=message)


# Docker's classic builder and Podman's Docker API end a build with `Successfully built <12 hex digits>`
_BUILT = re.compile(r"^Successfully built ([0-9a-f]{12,64})\s*$")


def _short_id(image_id: str) -> str:
    return image_id.removeprefix("sha256:")


def _error_text(chunk: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The engine's error as it wrote it: `error`, else errorDetail's message; never empty."""
    detail = chunk.get("errorDetail")
    detail = detail if isinstance(detail, dict) else {}
    text = str(chunk.get("error") or detail.get("message") or "").strip()
    if not text:
        text = f"the engine reported an error without text (errorDetail: {json.dumps(detail, sort_keys=True)[:200]})"
    return text, detail


def _labels(client: docker.DockerClient, labels: dict[str, str]) -> Any:
    """The image's labels as the engine takes them in a fixed order: Podman's Docker API turns a JSON
    object into one LABEL step per key in Go's map order, which changes from build to build, and with it
    the image id of two builds of one context; a JSON list of k=v keeps the order given."""
    return [f"{k}={v}" for k, v in sorted(labels.items())] if kind_of(client).podman else labels


def _extra_hosts(client: docker.DockerClient, hosts: Mapping[str, str]) -> Any:
    """The build's extra /etc/hosts entries as the engine reads them: Docker takes `name:ip` values
    (docker-py sends one per entry), Podman's Docker API one JSON list (its compat build decodes
    `extrahosts` with json.Unmarshal and answers 400 Bad Request to anything else)."""
    if not hosts:
        return None
    if kind_of(client).podman:
        return json.dumps([f"{name}:{ip}" for name, ip in sorted(hosts.items())])
    return dict(hosts)


@contextlib.contextmanager
def _credential_hosts(
    client: docker.DockerClient, credentials: Credentials | None, network_mode: str | None
) -> Iterator[dict[str, str]]:
    """Serve `credentials` to the RUN steps of one image build; yields the extra /etc/hosts entries.

    A SecretServer on this machine (loopback for host networking, the bridge's gateway otherwise),
    announced by the host name buildctl-secrets-<port>-<token>: host entries are no part of an image,
    its history or the build cache key, so layers are reused whatever the credentials. Docker builds
    a fresh /etc/hosts when there are extra entries, so on host networking this host's own entries
    go along (as Docker would have copied them).
    """
    mode = network_mode_for(network_mode)
    if not credentials or mode == "none":
        yield {}
        return
    if not engine_on_this_machine(client):
        raise EngineError(
            f"this recipe has credentials in its URLs, which an image build gets from a server on this "
            f"machine, and the engine at {client.api.base_url} is on another; fix: build on the engine's "
            "host, or use a mirror, index or proxy that needs none"
        )
    kind = kind_of(client)
    if mode != "host" and kind.podman and kind.rootless:
        # rootless Podman's networks live in its own network namespace (slirp4netns): no address on
        # this machine's side is their gateway, and the engine's user cannot reach this machine's loopback
        raise EngineError(
            "this recipe has credentials in its URLs, which an image build gets from a server on this "
            f"machine, and rootless Podman's {mode or 'default'} network cannot reach one (it lives in the "
            "engine's own network namespace); fix: build with --network host"
        )
    address = "127.0.0.1" if mode == "host" else _bridge_gateway(client)
    try:
        server = SecretServer(credentials.payload().encode(), address)
    except OSError as e:
        raise EngineError(
            f"cannot serve the build's credentials on {address}: {one_line(str(e), 120)}; "
            "fix: build with --network host"
        ) from e
    with server:
        hosts = _host_entries() if mode == "host" else {}
        hosts[server.host_name] = address
        yield hosts


def _bridge_gateway(client: docker.DockerClient) -> str:
    """The host's address on Docker's default bridge, where containers of a plain build reach it."""
    try:
        config = (client.api.inspect_network("bridge").get("IPAM") or {}).get("Config") or [{}]
    except derr.APIError as e:
        raise api_error(e, "looking up the bridge network") from e
    gateway, subnet = config[0].get("Gateway"), config[0].get("Subnet")
    if gateway:
        return str(gateway).split("/")[0]
    if subnet:
        return str(next(ipaddress.ip_network(subnet, strict=False).hosts()))
    raise EngineError("the engine's bridge network has no gateway address; fix: build with --network host")


def _host_entries(path: str = "/etc/hosts") -> dict[str, str]:
    """{name: IPv4 address} of this machine's hosts file (Docker adds its own localhost lines)."""
    entries: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            words = line.split("#", 1)[0].split()
            if len(words) >= 2 and re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", words[0]):
                for name in words[1:]:
                    entries.setdefault(name, words[0])
    return entries
