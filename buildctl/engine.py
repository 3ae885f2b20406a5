"""Docker Engine API: connect, build an image (streamed), run a container (streamed, always removed).

Everything buildctl creates in the engine carries the label `buildctl=1` (plus the caller's labels),
so that `invoke clean` and the tests can find it. Nothing is ever pulled implicitly: a missing image
is an error with the fix, because buildctl targets hosts without a registry.

Containers go through create → copy inputs in (put_archive) → start → stream logs → wait → copy outputs
out (get_archive) → remove. Copying instead of bind-mounting host paths keeps remote engines
(tcp://, ssh://) working; named volumes hold what must persist between runs (build dir, compiler
cache). The container is removed on every exit path: errors, Ctrl-C and SIGTERM (turned into
KeyboardInterrupt by `terminate_as_interrupt`).
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import io
import ipaddress
import logging
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import requests
from docker import errors as derr
from docker.types import DeviceRequest

from . import archive
from .errors import EngineError, StepFailed
from .secrets import Credentials, Masker, SecretServer, mask_url, secret_values_from_env, url_secrets

log = logging.getLogger(__name__)

LABEL = "buildctl"
LABEL_VALUE = "1"
# On containers: the process that made one (host:pid:start time) and whether it is kept on purpose, so
# that `invoke clean` can tell an orphan (its process is gone) from a running build.
OWNER_LABEL = "buildctl.owner"
KEEP_LABEL = "buildctl.keep"
# The recipe an object was made for, and the namespace of the build (see artifacts.namespace).
RECIPE_LABEL = "buildctl.recipe"
NAMESPACE_LABEL = "buildctl.namespace"
LineSink = Callable[[str], None]

# Docker's predefined build args: usable without ARG and left out of `docker history`.
PROXY_BUILD_ARGS = frozenset(
    n
    for base in ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY")
    for n in (base, base.lower())
)

CONNECT_TIMEOUT = 20  # seconds to reach the engine at all
API_TIMEOUT = 600  # seconds for one ordinary API call (a big put_archive included); streams have none
_MAX_LINE = 1 << 20  # a "line" without newline longer than this is emitted anyway
_NO_SPACE = re.compile(r"no space left on device", re.IGNORECASE)
# Outputs copied out of a container: a wheel is GBs (PyTorch with CUDA: 1-3 GB), the rest is small.
OUTPUT_CAPS = archive.Caps(total_bytes=32 << 30, members=10_000, file_bytes=16 << 30)
_CLEAN_FIX = "fix: free space with `invoke clean` (or `docker system prune` / `docker builder prune`)"


class ContainerNameInUse(EngineError):
    """run_container was given a fixed name that another container holds."""


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
        return self.exit_code != 0 and bool(_NO_SPACE.search(self.log[-20000:]))


# ---------------------------------------------------------------------------------------------- signals


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """For the duration of the block, SIGTERM and SIGHUP raise KeyboardInterrupt (as Ctrl-C does).

    So `finally:` blocks run when a CI runner or `timeout` stops the command. A no-op outside the
    main thread and when the signals already have a handler (nested use, the caller's own, SIG_IGN).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"terminated by signal {signal.Signals(signum).name}")

    previous: dict[int, Any] = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, signal.SIG_DFL if old is None else old)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP during cleanup; a signal that came in is raised afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in sigs}

    def restore() -> None:
        for s, h in old.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)

    try:
        yield
    except BaseException:
        restore()
        raise
    restore()
    if pending:
        raise KeyboardInterrupt(f"interrupted by signal {signal.Signals(pending[0]).name}")


# ---------------------------------------------------------------------------------------------- connect


class _SshBridge:
    """A local unix socket whose connections are piped through `ssh HOST docker system dial-stdio`.

    This is how the docker CLI reaches ssh:// engines, and it needs only the ssh binary (docker-py's
    own ssh transport imports paramiko even with use_ssh_client=True). The remote needs the docker CLI.
    Every HTTP connection is one ssh process, in its own session so that Ctrl-C does not cut the
    connection that removes the container afterwards.
    """

    @staticmethod
    def parse(url: str) -> tuple[str, str]:
        """ssh://[user@]host[:port] → ("[user@]host", "port" or "")."""
        rest = url[len("ssh://") :].split("/", 1)[0]
        user, _, hostport = rest.rpartition("@")
        host, port = hostport, ""
        if hostport.startswith("["):
            host, _, tail = hostport[1:].partition("]")
            port = tail.lstrip(":")
        elif hostport.count(":") == 1:
            host, port = hostport.split(":")
        if not host:
            raise EngineError(f"DOCKER_HOST={url!r} names no host; fix: use ssh://user@host[:port]")
        return (f"{user}@{host}" if user else host), port

    @staticmethod
    def ssh_words(url: str) -> list[str]:
        target, port = _SshBridge.parse(url)
        return [*(["-p", port] if port else []), target]

    def __init__(self, url: str):
        self.url = url
        self.command = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15"]
        *opts, target = self.ssh_words(url)
        self.command += [*opts, "--", target, "docker", "system", "dial-stdio"]
        self.last_error = ""
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self._dir = tempfile.mkdtemp(prefix="buildctl-ssh-")
        self.path = os.path.join(self._dir, "docker.sock")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(32)
        self._closed = False
        threading.Thread(target=self._serve, name="buildctl-ssh-bridge", daemon=True).start()
        atexit.register(self.close)

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._pipe, args=(conn,), daemon=True).start()

    def _pipe(self, conn: socket.socket) -> None:
        try:
            proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                start_new_session=True,
            )
        except OSError as e:
            self.last_error = f"cannot run ssh: {e}"
            conn.close()
            return
        with self._lock:
            self._procs.add(proc)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr

        def upstream() -> None:
            try:
                while chunk := conn.recv(1 << 16):
                    stdin.write(chunk)
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    stdin.close()

        def errors() -> None:
            for raw in stderr:
                line = raw.decode(errors="replace").strip()
                if line:
                    self.last_error = line

        threading.Thread(target=upstream, daemon=True).start()
        err_thread = threading.Thread(target=errors, daemon=True)
        err_thread.start()
        try:
            while chunk := stdout.read(1 << 16):
                conn.sendall(chunk)
        except OSError:
            pass
        finally:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            err_thread.join(timeout=5)  # ssh's complaint is known before the client sees the close
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
            with self._lock:
                self._procs.discard(proc)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._server.close()
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            with contextlib.suppress(OSError):
                proc.kill()
        shutil.rmtree(self._dir, ignore_errors=True)


def connect(*, environ: Mapping[str, str] | None = None) -> docker.DockerClient:
    """A client for the engine named by DOCKER_HOST (unix://, tcp://, ssh://) or the local default.

    ssh:// goes through the `ssh` binary and the remote's `docker system dial-stdio` (no paramiko).
    Failures are EngineError one-liners with the fix.
    """
    env = dict(os.environ if environ is None else environ)
    host = env.get("DOCKER_HOST", "").strip()
    scheme = host.split("://", 1)[0].lower() if "://" in host else ""
    if host and scheme not in ("unix", "tcp", "ssh", "http", "https"):
        raise EngineError(
            f"DOCKER_HOST={host!r} is not an engine address; fix: use unix:///path/docker.sock, "
            "tcp://host:2376 or ssh://user@host, or unset it"
        )
    if scheme == "unix":
        sock = host[len("unix://") :]
        if not os.path.exists(sock):
            raise EngineError(_no_socket(sock, explicit=True))
    bridge: _SshBridge | None = None
    try:
        if scheme == "ssh":
            if not shutil.which("ssh"):
                raise EngineError(
                    f"cannot reach the Docker engine at {host}: the ssh client is missing; "
                    "fix: apt-get install openssh-client"
                )
            bridge = _SshBridge(host)
            client = docker.DockerClient(base_url=f"unix://{bridge.path}", timeout=CONNECT_TIMEOUT)
            client._buildctl_ssh_bridge = bridge  # type: ignore[attr-defined]  # lives as long as the client
            _close = client.close

            def close() -> None:
                _close()
                bridge.close()

            client.close = close  # type: ignore[method-assign]
        else:
            client = docker.DockerClient.from_env(timeout=CONNECT_TIMEOUT, environment=env)
        client.ping()
    except (derr.DockerException, requests.exceptions.RequestException, OSError) as e:
        detail = bridge.last_error if bridge is not None else ""
        if bridge is not None:
            bridge.close()
        raise EngineError(_explain_connect_error(e, host, env, detail)) from e
    client.api.timeout = API_TIMEOUT
    return client


def _no_socket(sock: str, explicit: bool) -> str:
    if not explicit and not (shutil.which("dockerd") or shutil.which("docker")):
        return (
            f"no Docker engine installed: {sock} does not exist and there is no dockerd; fix: install one "
            "(apt-get install docker.io) and start dockerd, or set DOCKER_HOST to a remote engine"
        )
    where = "DOCKER_HOST" if explicit else "the default socket"
    return (
        f"the Docker engine is not running: {sock} ({where}) does not exist; fix: start dockerd "
        "(systemctl start docker, or `dockerd &` as root) or set DOCKER_HOST to a running engine"
    )


def _exception_chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[Any] = [exc]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or any(e is s for s in seen) or len(seen) > 30:
            continue
        seen.append(e)
        todo.extend([e.__cause__, e.__context__, getattr(e, "reason", None), *e.args])
    return seen


def _explain_connect_error(
    exc: BaseException, host: str, env: Mapping[str, str] | None = None, ssh_detail: str = ""
) -> str:
    chain = _exception_chain(exc)
    text = " ".join(str(e) for e in chain)
    where = host or "unix:///var/run/docker.sock"
    scheme = where.split("://", 1)[0].lower()
    env = os.environ if env is None else env

    def has(kind: type[BaseException], words: str) -> bool:
        return any(isinstance(e, kind) for e in chain) or words.lower() in text.lower()

    if scheme == "ssh":
        why = ssh_detail or _one_line(str(exc), 200)
        try:
            words = " ".join(_SshBridge.ssh_words(host))
        except EngineError:
            words = host[len("ssh://") :]
        return (
            f"cannot reach the Docker engine over ssh at {host}: {_one_line(why, 200)}; fix: make "
            f"`ssh {words} docker system dial-stdio` work (keys or agent, known_hosts, docker CLI on the "
            "remote, remote user in the docker group)"
        )
    if scheme == "unix":
        sock = where[len("unix://") :]
        if has(PermissionError, "Permission denied"):
            return (
                f"permission denied on the Docker socket {sock}; fix: add your user to the docker group "
                "(sudo usermod -aG docker $USER, then log in again) or use sudo"
            )
        if has(FileNotFoundError, "No such file or directory"):
            return _no_socket(sock, explicit=bool(host))
        if has(ConnectionRefusedError, "Connection refused"):
            return (
                f"the Docker engine is not running: nothing listens on {sock}; fix: start dockerd "
                "(systemctl start docker, or `dockerd &` as root) or set DOCKER_HOST"
            )
    if has(requests.exceptions.SSLError, "SSL"):
        return (
            f"TLS to the Docker engine at {where} failed: {_one_line(str(exc), 160)}; fix: check "
            "DOCKER_TLS_VERIFY / DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem)"
        )
    if has(ConnectionRefusedError, "Connection refused"):
        return (
            f"the Docker engine at {where} is unreachable: connection refused; fix: start dockerd listening "
            "there (dockerd -H tcp://0.0.0.0:2376 --tlsverify …) or correct DOCKER_HOST"
        )
    proxy = next(
        (env[k] for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy") if env.get(k)), None
    )
    http_error = re.search(r"\b([45]\d\d) (?:Client|Server) Error", text)
    if proxy and http_error and scheme in ("tcp", "http", "https"):
        return (
            f"the Docker engine at {where} answered through the HTTP proxy {mask_url(proxy)} with "
            f"HTTP {http_error.group(1)}; fix: add the engine's host to NO_PROXY"
        )
    if http_error:
        return (
            f"something at {where} answered HTTP {http_error.group(1)} but is not a Docker "
            "engine (a proxy in between?); fix: correct DOCKER_HOST, or add the host to NO_PROXY"
        )
    if (
        "Name or service not known" in text
        or "nodename nor servname" in text
        or "Temporary failure in name" in text
    ):
        return f"the Docker engine at {where} is unreachable: unknown host name; fix: correct DOCKER_HOST"
    if has(TimeoutError, "timed out"):
        return (
            f"the Docker engine at {where} did not answer within {CONNECT_TIMEOUT}s; fix: check the host, "
            "port and firewall, or correct DOCKER_HOST"
        )
    return (
        f"cannot connect to the Docker engine at {where}: {_one_line(str(exc), 200)}; fix: check that "
        "`docker info` works with the same DOCKER_HOST"
    )


# ---------------------------------------------------------------------------------------------- helpers


def _one_line(text: str, limit: int = 400) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def buildctl_labels(extra: Mapping[str, str] | None = None, *, recipe: str | None = None,
           namespace: str | None = None) -> dict[str, str]:
    """The labels of an engine object buildctl makes: buildctl=1 (what `invoke clean` selects), the
    recipe and namespace when given, then `extra`."""
    own = {LABEL: LABEL_VALUE, **({RECIPE_LABEL: recipe} if recipe is not None else {}),
           **({NAMESPACE_LABEL: namespace} if namespace is not None else {})}
    return {**own, **{str(k): str(v) for k, v in (extra or {}).items()}}


def process_start(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot (/proc/PID/stat field 22); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def process_owner() -> str:
    """host:pid:start of this process: a pid reused by another process does not match."""
    return f"{socket.gethostname()}:{os.getpid()}:{process_start(os.getpid()) or 0}"


def network_mode_for(mode: str | None) -> str | None:
    """The engine's network mode for a site's `network` setting: "default" (or none) is the engine's own, None."""
    return None if mode in (None, "", "default") else mode


def _api_error(e: derr.APIError, doing: str, mask: Callable[[str], str] = lambda s: s) -> EngineError:
    why = mask(_one_line(e.explanation or str(e), 300))
    if _NO_SPACE.search(why):
        return EngineError(f"the Docker engine ran out of disk space while {doing}: {why}; {_CLEAN_FIX}")
    if "could not select device driver" in why and "gpu" in why:
        return EngineError(
            f"the Docker engine cannot give containers GPUs while {doing}; fix: install the NVIDIA "
            "Container Toolkit (nvidia-ctk runtime configure --runtime=docker) and restart dockerd"
        )
    return EngineError(f"docker failed while {doing}: {why}")


def _connection_lost(e: BaseException, doing: str) -> EngineError:
    return EngineError(
        f"lost the connection to the Docker engine while {doing}: {_one_line(str(e), 200)}; fix: check "
        "that dockerd is still running (`docker info`) and retry"
    )


def _pull_hint(ref: str) -> str:
    return (
        f"image {ref} is not in the engine and buildctl never pulls; fix: make it with "
        "`invoke base-image` (debootstrap), `docker load` it, or `docker pull` it yourself"
    )


class _LineSplitter:
    """Cuts a stream of text pieces into lines; progress-bar carriage returns keep the last state."""

    def __init__(self) -> None:
        self._buf = ""

    def feed(self, text: str) -> list[str]:
        self._buf += text
        if "\n" not in self._buf:
            if len(self._buf) > _MAX_LINE:
                out, self._buf = self._buf, ""
                return [self._clean(out)]
            return []
        *lines, self._buf = self._buf.split("\n")
        return [self._clean(ln) for ln in lines]

    def flush(self) -> list[str]:
        out, self._buf = self._buf, ""
        return [self._clean(out)] if out else []

    @staticmethod
    def _clean(line: str) -> str:
        line = line.rstrip("\r")
        if "\r" in line:
            line = line.rsplit("\r", 1)[-1]
        return line


def image_exists(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.api.inspect_image(ref)
        return True
    except derr.NotFound:
        return False
    except derr.APIError as e:
        raise _api_error(e, f"looking up image {ref}") from e


_VAR = re.compile(r"\$\{(\w+)(?:(:?[-+?])([^}]*))?\}|\$(\w+)")


def _substitute(word: str, args: Mapping[str, str]) -> str:
    """Docker's variable substitution in a FROM or --from word: $V, ${V}, ${V:-x}, ${V-x}, ${V:+x}, ${V+x};
    an unset variable is the empty string (so `${UNSET}alpine` is `alpine`)."""

    def one(m: re.Match[str]) -> str:
        value = args.get(m.group(1) or m.group(4))
        op, alt = m.group(2), m.group(3) or ""
        is_set = value is not None and (value != "" or not (op or "").startswith(":"))
        if op and op.endswith("-"):
            return value if is_set and value is not None else alt
        if op and op.endswith("+"):
            return alt if is_set else ""
        return value or ""

    return _VAR.sub(one, word)


def _from_refs(dockerfile_text: str, buildargs: Mapping[str, str]) -> list[str]:
    """Images a build would take from the engine (and pull when missing): FROM lines and COPY --from
    words that are not stages, after ARG defaults and build args are substituted as Docker does.
    A word that cannot be resolved here is refused rather than let through unchecked."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    refs: list[str] = []
    seen_from = False
    text = re.sub(r"\\\r?\n", " ", dockerfile_text)

    def resolve(word: str, line: str) -> str:
        ref = _substitute(word, args)
        if any(c in ref for c in "${}\\"):
            shown = "".join(c if c.isprintable() else "?" for c in _one_line(line, 120))
            raise EngineError(
                f"cannot tell which image `{shown}` names (it would be pulled if missing); "
                "fix: name the image literally or with a plain ${ARG} that has a default"
            )
        return ref

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "ARG" and not seen_from:
            for decl in rest.split():
                name, eq, default = decl.partition("=")
                value = buildargs.get(name, _substitute(default.strip("\"'"), args) if eq else None)
                if value is not None:
                    args[name] = value
        elif word == "FROM":
            seen_from = True
            parts = [p for p in rest.split() if not p.startswith("--")]
            if not parts:
                continue
            ref = resolve(parts[0], line)
            if len(parts) >= 3 and parts[1].lower() == "as":
                stages.add(parts[2].lower())
            if ref and ref.lower() != "scratch" and ref.lower() not in stages:
                refs.append(ref)
        elif word == "COPY":
            for flag in rest.split():
                if flag.lower().startswith("--from="):
                    ref = resolve(flag.split("=", 1)[1], line)
                    if ref and not ref.isdigit() and ref.lower() not in stages:
                        refs.append(ref)
    return refs


# ---------------------------------------------------------------------------------------------- build


def build_image(
    client: docker.DockerClient,
    context_dir: Path,
    tag: str,
    *,
    buildargs: Mapping[str, str] | None = None,
    network_mode: str | None = None,
    target: str | None = None,
    labels: Mapping[str, str] | None = None,
    nocache: bool = False,
    on_line: LineSink | None = None,
    dockerfile: str = "Dockerfile",
    secrets: Iterable[str] = (),
    allow_pull: bool = False,
    credentials: Credentials | None = None,
) -> str:
    """Build `context_dir` with the classic builder, streaming the log line by line; the image id.

    A failing step raises StepFailed(step="image") with the masked log; a full disk raises EngineError.
    Proxy build args (HTTP_PROXY & co.) are left out of the image history by Docker itself.
    `credentials` are served to the RUN steps for the duration of the build (`_credential_hosts`).
    """
    context_dir = Path(context_dir)
    buildargs = {str(k): str(v) for k, v in (buildargs or {}).items()}
    masker = Masker([*secrets, *(s for v in buildargs.values() for s in url_secrets(v)),
                     *(credentials.values() if credentials else ())])
    df = context_dir / dockerfile
    if not df.is_file():
        raise EngineError(f"no {dockerfile} in the build context {context_dir}")
    if not allow_pull:
        for ref in _from_refs(df.read_text(errors="replace"), buildargs):
            if not image_exists(client, ref):
                raise EngineError(_pull_hint(ref))

    lines: list[str] = []

    def emit(line: str) -> None:
        line = masker(line)
        lines.append(line)
        if on_line is not None:
            on_line(line)

    splitter = _LineSplitter()
    image_id: str | None = None
    error: str | None = None
    error_detail: dict[str, Any] = {}
    doing = f"building {tag}"
    with terminate_as_interrupt(), _credential_hosts(client, credentials, network_mode) as extra_hosts:
        try:
            stream = client.api.build(
                path=str(context_dir),
                dockerfile=dockerfile,
                tag=tag,
                buildargs=buildargs,
                extra_hosts=extra_hosts or None,
                network_mode=network_mode_for(network_mode),
                target=target,
                labels=buildctl_labels(labels),
                nocache=nocache,
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
            )
            for chunk in stream:
                if "stream" in chunk:
                    for ln in splitter.feed(str(chunk["stream"])):
                        emit(ln)
                elif "status" in chunk:  # pull progress and the like
                    emit(" ".join(str(chunk.get(k, "")) for k in ("status", "id") if chunk.get(k)))
                aux = chunk.get("aux")
                if isinstance(aux, dict) and aux.get("ID"):
                    image_id = str(aux["ID"])
                if "error" in chunk:
                    error = str(chunk.get("error") or "")
                    error_detail = chunk.get("errorDetail") or {}
            for ln in splitter.flush():
                emit(ln)
        except derr.APIError as e:
            raise _api_error(e, doing, masker) from e
        except (requests.exceptions.ConnectionError, derr.DockerException) as e:
            raise _connection_lost(e, doing) from e
        except BaseException:
            # Drop the connection so that the daemon cancels the build (and, with forcerm, its container).
            with contextlib.suppress(Exception):
                client.api.close()
            raise

    if error is not None:
        message = masker(_one_line(error, 400))
        if _NO_SPACE.search(message) or any(_NO_SPACE.search(ln) for ln in lines[-50:]):
            raise EngineError(f"the Docker engine ran out of disk space while {doing}; {_CLEAN_FIX}")
        if re.search(
            r"pull access denied|manifest unknown|registry-1\.docker\.io|repository does not exist", message
        ):
            raise EngineError(
                f"{message}; fix: the base image must be in the engine already (buildctl never pulls)"
            )
        code = error_detail.get("code")
        if not isinstance(code, int) or code == 0:
            m = re.search(r"non-zero code: (\d+)", message)
            code = int(m.group(1)) if m else 1
        # The build's RUN container is gone and its OOMKilled unknown: exit 137 alone is any SIGKILL.
        raise StepFailed("image", code, "\n".join(lines), detail=message)
    if image_id is None:
        try:
            image_id = str(client.api.inspect_image(tag)["Id"])
        except derr.APIError as e:
            raise _api_error(e, f"inspecting the built image {tag}") from e
    return image_id


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
    if not _is_local(client) or getattr(client, "_buildctl_ssh_bridge", None) is not None:
        raise EngineError(
            f"this recipe has credentials in its URLs, which an image build gets from a server on this "
            f"machine, and the engine at {client.api.base_url} is on another; fix: build on the engine's "
            "host, or use a mirror, index or proxy that needs none"
        )
    address = "127.0.0.1" if mode == "host" else _bridge_gateway(client)
    try:
        server = SecretServer(credentials.payload().encode(), address)
    except OSError as e:
        raise EngineError(
            f"cannot serve the build's credentials on {address}: {_one_line(str(e), 120)}; "
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
        raise _api_error(e, "looking up the bridge network") from e
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


def _put_credentials(client: docker.DockerClient, cid: str, credentials: Credentials, owner: tuple[int, int]) -> None:
    """The credentials as /run/buildctl-secrets (mode 0600) in a created, not yet started, container."""
    data = credentials.payload().encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("run/buildctl-secrets")
        info.size, info.mode = len(data), 0o600
        info.uid, info.gid = owner
        tf.addfile(info, io.BytesIO(data))
    client.api.put_archive(cid, "/", buf.getvalue())


# ---------------------------------------------------------------------------------------------- archives


def _owner_of(user: str | None) -> tuple[int, int]:
    """uid/gid that copied-in files get: the container's numeric user, else root."""
    if user:
        uid, _, gid = user.partition(":")
        if uid.isdigit():
            return int(uid), int(gid) if gid.isdigit() else int(uid)
    return 0, 0


class _Aborted(Exception):
    pass


def _tar_chunks(src: Path, arcname: str, owner: tuple[int, int]) -> Iterator[bytes]:
    """A PAX tar of `src` (as `arcname`) produced in a thread and streamed: no temp copy on disk.

    File mtimes are kept to the nanosecond, so that make/ninja see unchanged sources as unchanged.
    """
    q: queue.Queue[Any] = queue.Queue(maxsize=8)
    stop = threading.Event()
    done = object()

    def put(item: Any) -> None:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.2)
                return
            except queue.Full:
                continue
        raise _Aborted

    class Writer:
        def write(self, b: bytes) -> int:
            put(bytes(b))
            return len(b)

    def set_owner(ti: tarfile.TarInfo) -> tarfile.TarInfo:
        ti.uid, ti.gid = owner
        ti.uname = ti.gname = ""
        # tarfile writes float mtimes (about 100 ns off); PAX carries the exact nanoseconds.
        rel = ti.name[len(arcname) + 1 :] if ti.name != arcname else ""
        with contextlib.suppress(OSError):
            ns = os.lstat(src / rel if rel else src).st_mtime_ns
            ti.mtime = ns // 1_000_000_000
            ti.pax_headers = {**ti.pax_headers, "mtime": f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"}
        return ti

    def produce() -> None:
        try:
            with tarfile.open(fileobj=Writer(), mode="w|", format=tarfile.PAX_FORMAT, bufsize=1 << 20) as tf:
                tf.add(str(src), arcname=arcname, recursive=True, filter=set_owner)
            put(done)
        except _Aborted:
            pass
        except BaseException as e:  # reported to the consumer
            with contextlib.suppress(_Aborted):
                put(e)

    thread = threading.Thread(target=produce, name="buildctl-tar", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise EngineError(f"cannot read input {src}: {_one_line(str(item), 200)}") from item
            yield item
    finally:
        stop.set()
        thread.join(timeout=5)


class _ChunkReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks (for tarfile's stream mode)."""

    def __init__(self, chunks: Iterable[bytes]):
        self._it = iter(chunks)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._it)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def _put_input(
    client: docker.DockerClient, cid: str, container_path: str, host_path: Path, owner: tuple[int, int]
) -> None:
    host_path = Path(host_path)
    if not host_path.exists():
        raise EngineError(f"input {host_path} (for {container_path} in the container) does not exist")
    arcname = container_path.strip("/")
    if not arcname or ".." in Path(arcname).parts:
        raise EngineError(f"input destination {container_path!r} must be an absolute path below /")
    # Extract at / with the destination's full path in the archive: the engine creates missing parents.
    client.api.put_archive(cid, "/", _tar_chunks(host_path, arcname, owner))


def _get_output(client: docker.DockerClient, cid: str, container_path: str, host_dir: Path) -> bool:
    """Replace `host_dir` with a copy of a container directory's contents (or of a file); False when
    it does not exist. What the container wrote is untrusted: anything but regular files and folders,
    or more than OUTPUT_CAPS, is refused (InputError) and nothing is written (archive.extract)."""
    try:
        chunks, stat = client.api.get_archive(cid, container_path)
    except derr.NotFound:
        return False
    host_dir = Path(host_dir)
    host_dir.parent.mkdir(parents=True, exist_ok=True)
    is_dir = bool(int(stat.get("mode", 0)) & (1 << 31))  # Go's os.ModeDir
    top = stat.get("name") or Path(container_path).name
    try:
        archive.extract(
            _ChunkReader(chunks), host_dir, caps=OUTPUT_CAPS, strip=top if is_dir else None,
            what=f"the output {container_path} of container {cid[:12]}",
            fix=f"write only regular files and folders into {container_path} (no links, devices or fifos), "
            "within the size caps",
        )
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:  # stop reading a refused stream (it may be a terabyte of zeros)
            close()
    return True


# ---------------------------------------------------------------------------------------------- run


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
            raise _api_error(e, f"creating volume {name}") from e


def _remove_container(client: docker.DockerClient, ref: str) -> None:
    with _signals_deferred():
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
        log.warning("could not remove container %s: %s", ref, _one_line(str(last), 200))


def container_state(client: docker.DockerClient, ref: str) -> dict[str, Any] | None:
    """The State of container `ref` (a name or id), None when there is none."""
    try:
        return client.api.inspect_container(ref).get("State") or {}
    except derr.NotFound:
        return None
    except derr.APIError as e:
        raise _api_error(e, f"looking up container {ref}") from e


def remove_container(client: docker.DockerClient, ref: str) -> None:
    """Remove container `ref` (forced, with its anonymous volumes); absent is fine."""
    _remove_container(client, ref)


def run_container(
    client: docker.DockerClient,
    image: str,
    command: list[str],
    *,
    env: Mapping[str, str] | None = None,
    inputs: Mapping[str, Path] | None = None,
    outputs: Mapping[str, Path] | None = None,
    volumes: Mapping[str, str] | None = None,
    network_mode: str | None = None,
    mem_limit: str | int | None = None,
    gpus: bool = False,
    workdir: str | None = None,
    user: str | None = None,
    on_line: LineSink | None = None,
    keep: bool = False,
    name: str | None = None,
    labels: Mapping[str, str] | None = None,
    secrets: Iterable[str] = (),
    shm_size: str | None = None,
    ipc_mode: str | None = None,
    credentials: Credentials | None = None,
    timeout: float | None = None,
    on_interrupt: Callable[[str], None] | None = None,
    entrypoint: list[str] | None = None,
) -> ContainerResult:
    """Run `command` in a fresh container of `image`; its exit code, OOM flag and (masked) log.

    inputs {container path: host path}: copied in before start (a directory's contents land at the
    container path, a file at that path), owned by `user` when numeric, else root, mtimes kept.
    outputs {container path: host dir}: copied out after exit, also when the command failed; a
    directory's contents (or a file) replace the host dir; only regular files and folders within
    OUTPUT_CAPS are accepted (else InputError, nothing written); absent ones are listed in missing_outputs.
    volumes {volume name: container path}: named volumes, created (labelled) when missing.
    credentials: copied in as /run/buildctl-secrets before start (never in the container's config);
    the command takes them with templates/secrets.sh, which removes the file.
    The container is removed on every path (errors, Ctrl-C, SIGTERM); `keep` keeps it only after a
    normal finish. A non-zero exit is a result, not an exception; engine problems raise EngineError.
    oom_killed is the engine's OOMKilled, never guessed from exit code 137 (a `docker kill` gives 137).
    timeout: seconds from start; then the container is killed and the result says timed_out.
    on_interrupt(container id): called on Ctrl-C/SIGTERM while the container still runs, before it is
    removed (e.g. to record what was in flight); its own errors are ignored.
    entrypoint: replaces the image's ENTRYPOINT; [""] runs `command` as it is, whatever the image sets.
    name: a fixed name makes the run exclusive: while a container of that name exists, this raises
    EngineError (ContainerNameInUse) and leaves the other container alone.
    """
    env = {str(k): str(v) for k, v in (env or {}).items()}
    masker = Masker([*secrets, *secret_values_from_env(env), *(credentials.values() if credentials else ())])
    all_labels = buildctl_labels(labels)
    name = name or f"buildctl-{uuid.uuid4().hex[:12]}"
    doing = f"running {image}"
    for vol in volumes or {}:
        _ensure_volume(client, vol, all_labels)

    lines: list[str] = []

    def emit(line: str) -> None:
        line = masker(line)
        lines.append(line)
        if on_line is not None:
            on_line(line)

    cid: str | None = None
    finished = False
    name_taken = False
    timer: threading.Timer | None = None
    stopped_by_timeout = threading.Event()
    with terminate_as_interrupt():
        try:
            host_config = client.api.create_host_config(
                binds={vol: {"bind": path, "mode": "rw"} for vol, path in (volumes or {}).items()},
                network_mode=network_mode_for(network_mode),
                mem_limit=mem_limit,
                memswap_limit=mem_limit,  # no swap on top: a limit is a limit
                device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])] if gpus else None,
                shm_size=shm_size,
                ipc_mode=ipc_mode,
            )
            try:
                cid = client.api.create_container(
                    image,
                    command=list(command),
                    entrypoint=entrypoint,
                    environment=env,
                    working_dir=workdir,
                    user=user,
                    labels={**all_labels, OWNER_LABEL: process_owner(), **({KEEP_LABEL: "1"} if keep else {})},
                    host_config=host_config,
                    name=name,
                    detach=True,
                )["Id"]
            except derr.ImageNotFound as e:
                raise EngineError(_pull_hint(image)) from e
            except derr.APIError as e:
                if e.status_code == 409:  # the name is someone else's container: never remove it
                    name_taken = True
                    raise ContainerNameInUse(
                        f"a container named {name} exists already ({_one_line(e.explanation or str(e), 200)}); "
                        f"fix: wait for the run that owns it, or remove it (docker rm -f {name}) if nothing runs it"
                    ) from e
                raise
            owner = _owner_of(user)
            if credentials:
                _put_credentials(client, cid, credentials, owner)
            for container_path, host_path in (inputs or {}).items():
                _put_input(client, cid, container_path, Path(host_path), owner)
            # Attach before start (as `docker run` does): nothing is missed, no log driver is needed,
            # and stdout/stderr arrive apart, so a partial line of one is never glued to the other.
            attached = client.api.attach(cid, stdout=True, stderr=True, stream=True, logs=True, demux=True)
            client.api.start(cid)
            if timeout is not None:
                started_id = cid

                def stop() -> None:
                    try:
                        client.api.kill(started_id)
                    except (derr.APIError, requests.exceptions.RequestException, OSError):
                        return  # it finished meanwhile: not a timeout
                    stopped_by_timeout.set()

                timer = threading.Timer(max(0.0, timeout), stop)
                timer.daemon = True
                timer.start()
            streams = [
                (codecs.getincrementaldecoder("utf-8")(errors="replace"), _LineSplitter()) for _ in range(2)
            ]
            for frame in attached:
                for (decoder, splitter), data in zip(streams, frame, strict=True):
                    if data:
                        for ln in splitter.feed(decoder.decode(data)):
                            emit(ln)
            for decoder, splitter in streams:
                for ln in splitter.feed(decoder.decode(b"", final=True)) + splitter.flush():
                    emit(ln)
            status = client.api.wait(cid, timeout=None)
            if timer is not None:
                timer.cancel()
                timer.join()
            code = int(status.get("StatusCode", -1))
            state = client.api.inspect_container(cid).get("State") or {}
            oom = bool(state.get("OOMKilled"))
            missing = tuple(
                cpath
                for cpath, hdir in (outputs or {}).items()
                if not _get_output(client, cid, cpath, Path(hdir))
            )
            finished = True
            return ContainerResult(code, oom, "\n".join(lines), cid, missing, stopped_by_timeout.is_set())
        except derr.APIError as e:
            raise _api_error(e, doing, masker) from e
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as e:
            raise _connection_lost(e, doing) from e
        except KeyboardInterrupt:
            if on_interrupt is not None and cid:
                with contextlib.suppress(Exception):
                    on_interrupt(cid)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            if not (keep and finished) and not name_taken:
                _remove_container(client, cid or name)


# ---------------------------------------------------------------------------------------------- misc


def _is_local(client: docker.DockerClient) -> bool:
    base = str(client.api.base_url)
    if base.startswith("http+docker://localhost"):
        return True
    host = re.sub(r"^\w+://", "", base).split("/")[0].rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "127.0.0.1", "::1")


def engine_facts(client: docker.DockerClient) -> dict[str, Any]:
    """Facts about the engine for manifests and diagnostics."""
    try:
        version = client.version()
        info = client.info()
    except derr.APIError as e:
        raise _api_error(e, "reading the engine's version") from e
    except requests.exceptions.RequestException as e:
        raise _connection_lost(e, "reading the engine's version") from e
    root = info.get("DockerRootDir")
    local = _is_local(client) and getattr(client, "_buildctl_ssh_bridge", None) is None
    free = None
    if local and root and os.path.isdir(root):
        with contextlib.suppress(OSError):
            free = shutil.disk_usage(root).free
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    return {
        "server_version": version.get("Version"),
        "api_version": version.get("ApiVersion"),
        "client_api_version": client.api.api_version,
        "min_api_version": version.get("MinAPIVersion"),
        "os": info.get("OperatingSystem"),
        "os_type": version.get("Os") or info.get("OSType"),
        "arch": version.get("Arch") or info.get("Architecture"),
        "kernel": version.get("KernelVersion") or info.get("KernelVersion"),
        "storage_driver": info.get("Driver"),
        "docker_root_dir": root,
        "cgroup_version": info.get("CgroupVersion"),
        "cpus": info.get("NCPU"),
        "memory_bytes": info.get("MemTotal"),
        "runtimes": runtimes,
        "nvidia_runtime": "nvidia" in runtimes,
        "local": local,
        "free_bytes": free,
    }


def remove_volume(client: docker.DockerClient, name: str) -> bool:
    """Remove a volume; False when there was none. A volume in use is an EngineError with the fix."""
    try:
        client.api.remove_volume(name)
        return True
    except derr.NotFound:
        return False
    except derr.APIError as e:
        if e.status_code == 409:
            raise EngineError(
                f"volume {name} is in use by a container; fix: remove the container first "
                f"(docker ps -a --filter volume={name})"
            ) from e
        raise _api_error(e, f"removing volume {name}") from e


def list_buildctl_containers(
    client: docker.DockerClient, labels: Mapping[str, str] | None = None
) -> list[Any]:
    """All containers (running or not) labelled buildctl=1 and, when given, with these labels too."""
    filters = [f"{k}={v}" for k, v in buildctl_labels(labels).items()]
    try:
        return client.containers.list(all=True, filters={"label": filters})
    except derr.APIError as e:
        raise _api_error(e, "listing containers") from e


def list_buildctl_volumes(client: docker.DockerClient, labels: Mapping[str, str] | None = None) -> list[Any]:
    filters = [f"{k}={v}" for k, v in buildctl_labels(labels).items()]
    try:
        return client.volumes.list(filters={"label": filters})
    except derr.APIError as e:
        raise _api_error(e, "listing volumes") from e
