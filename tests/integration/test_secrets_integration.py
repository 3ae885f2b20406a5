"""Credentials against the real engine: used for real, found nowhere afterwards.

* The secret scan (`test_credentials_are_used_and_found_nowhere`): a purpose-built recipe (demofw,
  from git: the first build names an upstream URL that is unreachable here and fetches it from its
  `--git-mirror`, the second the git server itself) built with `--network host` through four local servers that each demand their own token:
  an HTTP proxy (Proxy-Authorization), an apt mirror forwarding to deb.debian.org, a git smart-HTTP
  server (`git http-backend`) holding demofw, and a PEP 503 index forwarding to PyPI that alone has
  this session's marker package (Authorization: Basic). Each server records what it answered, which
  proves the token was used. A second build, with every token rotated, fails in the compile after
  fetching the source (so a repro bundle is written) and keeps its container (--keep-container).
  Then the tokens, and the Basic headers made from them, are searched in: both commands' output,
  every file of the artifacts root (manifest, build log, report, wheel, resolved recipe, the bundle
  and its context), the rendered build folder, every layer, config and history entry of every image
  the builds made (one `docker save` of them all: the image of every step of every stage, the
  runtime stage's included, which the classic builder builds on the way to the builder), the kept container's config (docker inspect) and filesystem
  (docker export), and both build-dir volumes. None found.
  Before this branch (b74e6d9) the same scan finds the apt token in /etc/apt/sources.list of both
  images, the pip token in the venv stages' pip.conf layer, the git token in build.sh (a layer of
  the builder), manifest.json and bundle.json, and the proxy password in the kept container's config.
* Rotating every token reuses every layer (credentials are no part of a cache key), and every
  image of the build carries the label buildctl=1.
* Docker's predefined proxy build args, upper and lower case, with the classic builder: left out of
  the history, the image config and the cache key (`test_predefined_proxy_args_*`).
* The two channels on their own: an image build on the default bridge network (server on the
  gateway) and a container given credentials with put_archive.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import json
import os
import re
import select
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from collections.abc import Iterable, Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, urlsplit

import docker
import pytest
import yaml
from docker import errors as derr

from buildctl import engine, recipe, secrets
from buildctl.errors import EngineError
from buildctl.pipeline import engine_names

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"
DEMOFW = ROOT / "examples" / "demofw"
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
SESSION = uuid.uuid4().hex[:8]
VERIFY_CACHE = ROOT / ".cache" / "buildctl-test" / "verify-wheelhouse"
BUILD_TIMEOUT = 40 * 60
HOP = {"connection", "keep-alive", "proxy-authorization", "proxy-connection", "proxy-authenticate", "te",
       "trailer", "transfer-encoding", "upgrade", "content-length"}


# ---------------------------------------------------------------------------------------------- servers


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = b""
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if not size:
                handler.rfile.readline()
                return out
            out += handler.rfile.read(size)
            handler.rfile.readline()
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))


class Handler(BaseHTTPRequestHandler):
    """Answers only requests that carry one of `accepted` in `auth_header`; records both kinds."""

    protocol_version = "HTTP/1.1"
    auth_header = "Authorization"
    accepted: set[str] = set()
    authorized: list[str]
    rejected: list[str]

    def log_message(self, *args) -> None:
        pass

    def allowed(self) -> bool:
        ok = self.headers.get(self.auth_header) in self.accepted
        (self.authorized if ok else self.rejected).append(f"{self.command} {self.path}")
        if not ok:
            code, challenge = ((407, "Proxy-Authenticate") if self.auth_header == "Proxy-Authorization"
                               else (401, "WWW-Authenticate"))
            self.send_response(code)
            self.send_header(challenge, 'Basic realm="itest"')
            self.send_header("Content-Length", "0")
            self.end_headers()
        return ok

    def reply(self, status: int, headers: Iterable[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def forward(self, conn: http.client.HTTPConnection, path: str, body: bytes = b"",
                keep: Iterable[str] | None = None) -> None:
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in HOP | {"authorization", "host"} and (keep is None or k.lower() in keep)}
        conn.request(self.command, path, body=body or None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        self.reply(resp.status, resp.getheaders(), data)


class Server:
    """A threaded HTTP server on 127.0.0.1 (random port) with one handler class; closed by close()."""

    def __init__(self, handler: type[Handler], accepted: Iterable[str], **attrs):
        self.authorized: list[str] = []
        self.rejected: list[str] = []
        cls = type(handler.__name__, (handler,), {"accepted": set(accepted), "authorized": self.authorized,
                                                  "rejected": self.rejected, **attrs})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), cls)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ProxyHandler(Handler):
    """An HTTP proxy: CONNECT tunnels and absolute-URI requests (forwarded with their own headers)."""

    auth_header = "Proxy-Authorization"

    def do_CONNECT(self) -> None:  # noqa: N802
        if not self.allowed():
            return
        host, _, port = self.path.rpartition(":")
        upstream = socket.create_connection((host, int(port)), timeout=60)
        self.send_response(200, "Connection established")
        self.end_headers()
        self.close_connection = True
        with upstream:
            socks = [self.connection, upstream]
            while True:
                readable, _, _ = select.select(socks, [], [], 120)
                if not readable:
                    return
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        return
                    (upstream if s is self.connection else self.connection).sendall(data)

    def do_GET(self) -> None:  # noqa: N802
        if not self.allowed():
            return
        u = urlsplit(self.path)
        body = read_body(self)
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=300)
        conn.request(self.command, path, body=body or None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        self.reply(resp.status, resp.getheaders(), data)

    do_POST = do_HEAD = do_GET  # noqa: N815


class MirrorHandler(Handler):
    """A Debian mirror that demands a login and forwards to deb.debian.org."""

    def do_GET(self) -> None:  # noqa: N802
        if self.allowed():
            self.forward(http.client.HTTPConnection("deb.debian.org", 80, timeout=300), self.path)

    do_HEAD = do_GET  # noqa: N815


class IndexHandler(Handler):
    """A PEP 503 index that demands a login: the marker wheel from here, everything else from PyPI."""

    marker: str
    wheel: Path

    def do_GET(self) -> None:  # noqa: N802
        if not self.allowed():
            return
        if self.path == f"/simple/{self.marker}/":
            digest = hashlib.sha256(self.wheel.read_bytes()).hexdigest()
            page = f'<html><body><a href="../../files/{self.wheel.name}#sha256={digest}">{self.wheel.name}</a></body></html>'
            self.reply(200, [("Content-Type", "text/html")], page.encode())
        elif self.path == f"/files/{self.wheel.name}":
            self.reply(200, [("Content-Type", "application/octet-stream")], self.wheel.read_bytes())
        elif self.path.startswith("/simple/"):
            tls = ssl.create_default_context(cafile=CA_BUNDLE)
            self.forward(http.client.HTTPSConnection("pypi.org", 443, timeout=120, context=tls), self.path,
                         keep={"accept", "user-agent"})
        else:
            self.reply(404, [], b"")


class GitHandler(Handler):
    """git's smart HTTP protocol over `git http-backend` (CGI), behind a login."""

    root: Path

    def do_GET(self) -> None:  # noqa: N802
        if not self.allowed():
            return
        path, _, query = self.path.partition("?")
        body = read_body(self) if self.command == "POST" else b""
        env = {"PATH": os.environ["PATH"], "GIT_PROJECT_ROOT": str(self.root), "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": self.command,
               "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
               "REMOTE_USER": "git", "REMOTE_ADDR": "127.0.0.1", "GIT_CONFIG_NOSYSTEM": "1",
               "HOME": str(self.root), "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", "")}
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, data = out.partition(b"\r\n\r\n")
        headers = [tuple(h.split(": ", 1)) for h in head.decode("latin-1").split("\r\n") if ": " in h]
        status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
        self.reply(status, [(k, v) for k, v in headers if k.lower() != "status"], data)

    do_POST = do_GET  # noqa: N815


# ---------------------------------------------------------------------------------------------- fixtures


def make_wheel(dest: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel (PEP 427) of one module."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {f"{dist}/__init__.py": b"MARKER = True\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: buildctl-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(
        f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()},{len(b)}\n"
        for p, b in files.items()) + f"{info}/RECORD,,\n"
    path = dest / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, b in {**files, f"{info}/RECORD": record.encode()}.items():
            z.writestr(p, b)
    return path


def bare_repo(root: Path) -> Path:
    """examples/demofw committed on branch main, as the bare repository root/demofw.git."""
    work = root / "demofw-work"
    shutil.copytree(DEMOFW, work, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root)}
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "demofw"]):
        subprocess.run(cmd, cwd=work, env=env, check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(root / "demofw.git")], env=env, check=True)
    return root / "demofw.git"


class Tokens:
    """One set of credentials for the four servers: token values and the Basic headers they make.

    Each password holds every character a URL login must carry percent-encoded, and ':' (issue 20: a
    password with '#', '?' or '/' was neither stripped nor masked); the URLs carry it encoded, as
    pip, apt, git and curl expect, and each tool must decode it to be let in. Its '%' is followed by
    'x': git 2.39 decodes a proxy's login twice, so '%' and two hex digits would reach git's proxy as
    another byte (docs/security.md, Limits)."""

    USERS = {"proxy": "px", "apt": "aptuser", "git": "gituser", "pip": "pipuser"}

    def __init__(self, tag: str):
        self.values = {k: f"{k}{tag}{h[:16]}:#?/@%x{h[16:]}" for k in self.USERS for h in [uuid.uuid4().hex]}

    def encoded(self, kind: str) -> str:
        return quote(self.values[kind], safe="")

    def header(self, kind: str) -> str:
        return basic(self.USERS[kind], self.values[kind])

    def needles(self) -> list[bytes]:
        """The token bytes raw and percent-encoded, each half of them (a tool that split one at a URL
        character would write a half), and the base64 of each user:token (a stored Basic header)."""
        out = [v.encode() for v in self.values.values()] + [self.encoded(k).encode() for k in self.USERS]
        out += [half.encode() for v in self.values.values() for half in (v[:20], v[-16:])]
        return out + [self.header(k).split()[1].encode() for k in self.USERS]


def invoke_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("invoke")
    return [*([str(exe)] if exe.exists() else [sys.executable, "-m", "invoke"]), "-r", str(ROOT)]


@contextlib.contextmanager
def servers(tmp: Path, marker: str, tokens: list[Tokens]) -> Iterator[dict[str, Server]]:
    wheel = make_wheel(tmp, marker, "1.0")
    repo_root = bare_repo(tmp / "git").parent
    made = {
        "proxy": Server(ProxyHandler, [t.header("proxy") for t in tokens]),
        "apt": Server(MirrorHandler, [t.header("apt") for t in tokens]),
        "git": Server(GitHandler, [t.header("git") for t in tokens], root=repo_root),
        "pip": Server(IndexHandler, [t.header("pip") for t in tokens], marker=marker, wheel=wheel),
    }
    try:
        yield made
    finally:
        for s in made.values():
            s.close()


UPSTREAM = "https://github.com/buildctl-itest/"  # unreachable here: the git mirror stands in for it


def site_args(t: Tokens, srv: dict[str, Server], *, mirror: bool = False) -> list[str]:
    """The build's site options; with `mirror`, the source is the upstream URL and the authenticated git
    server is its mirror (--git-mirror PREFIX=MIRROR), else the source is that server itself."""
    proxy = f"http://px:{t.encoded('proxy')}@127.0.0.1:{srv['proxy'].port}/"
    git = f"http://gituser:{t.encoded('git')}@127.0.0.1:{srv['git'].port}/"
    source = ["--set", f"framework.source.git={UPSTREAM}demofw.git", "--git-mirror", f"{UPSTREAM}={git}"] if mirror \
        else ["--set", f"framework.source.git={git}demofw.git"]
    # (no verification: it needs no network and no credentials, and the classic builder has built
    # every stage of the Dockerfile, the runtime image's included, for the builder already)
    return ["--no-verify", "--network", "host", "--ca-cert", CA_BUNDLE, "--http-proxy", proxy, "--https-proxy", proxy,
            "--apt-mirror", f"http://aptuser:{t.encoded('apt')}@127.0.0.1:{srv['apt'].port}/debian",
            "--pip-index-url", f"http://pipuser:{t.encoded('pip')}@127.0.0.1:{srv['pip'].port}/simple", *source]


def run_build(recipe_file: Path, args: list[str], cwd: Path, artifacts: Path) -> subprocess.CompletedProcess:
    # (the session's BUILDCTL_NAMESPACE stays: the build's engine objects are the session's, see conftest)
    env = {k: v for k, v in os.environ.items()
           if (k == "BUILDCTL_NAMESPACE" or not k.startswith("BUILDCTL_")) and "proxy" not in k.lower()}
    env.update(BUILDCTL_ARTIFACTS=str(artifacts), BUILDCTL_CACHE=str(VERIFY_CACHE), TMPDIR=str(cwd),
               PYTHONUNBUFFERED="1")
    return subprocess.run([*invoke_cmd(), "build", "--recipe", str(recipe_file), *args, "--json"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT)


def payload(proc: subprocess.CompletedProcess) -> dict:
    try:
        return json.loads(proc.stdout)
    except ValueError:
        return {}


# a step's image in the build log: Docker's classic builder " ---> 0123456789ab", Podman's "--> 0123456789a"
_STEP_ID = re.compile(r"^ ?--?-> ([0-9a-f]{11,12})$", re.M)


def step_images(client: docker.DockerClient, log: str) -> list[str]:
    """Full ids of the images of a build's steps, from its log (" ---> <id>" lines; Podman: "--> <id>")."""
    ids: list[str] = []
    for short in _STEP_ID.findall(log):
        with contextlib.suppress(derr.NotFound):
            full = client.api.inspect_image(short)["Id"]
            if full not in ids:
                ids.append(full)
    return ids


class Scan:
    """Searches bytes for every needle, across chunk boundaries; collects where each was found."""

    def __init__(self, needles: list[bytes]):
        self.needles = needles
        self.longest = max(len(n) for n in needles)
        self.found: list[str] = []
        self.bytes = 0

    def stream(self, what: str, chunks: Iterable[bytes]) -> None:
        tail = b""
        for chunk in chunks:
            data = tail + chunk
            for n in self.needles:
                if n in data:
                    self.found.append(f"{what}: {n[:12].decode()}…")
            tail = data[-self.longest:]
            self.bytes += len(chunk)

    def text(self, what: str, text: str | bytes) -> None:
        self.stream(what, [text.encode() if isinstance(text, str) else text])

    def docker_save(self, images: list[str]) -> None:
        """Every byte of `docker save` of the images: their layers (uncompressed tars), configs, history."""
        with subprocess.Popen(["docker", "save", *images], stdout=subprocess.PIPE) as proc:
            assert proc.stdout is not None
            self.stream("docker save", iter(lambda: proc.stdout.read(1 << 20), b""))
        assert proc.returncode == 0


# ---------------------------------------------------------------------------------------------- the scan


def test_credentials_are_used_and_found_nowhere(tmp_path, docker_client, base_image):
    name = f"itest-secrets-{SESSION}"
    marker = f"buildctl-itest-marker-{SESSION}"
    first, second = Tokens("a"), Tokens("b")
    recipe_file = tmp_path / f"{name}.yaml"
    recipe_file.write_text(yaml.safe_dump({
        "name": name,
        "description": "test-only: demofw from an authenticated git server, through an authenticated proxy",
        "base": {"image": base_image, "distro": "bookworm"},
        "python": {"version": "3.11", "packages": ["numpy", "cmake", "ninja", marker]},
        "framework": {"name": "demofw", "source": {"git": "http://127.0.0.1:1/demofw.git", "ref": "main"},
                      "version": "0.1.0"},
        "build": {"type": "Release", "cache": "ccache", "features": {"USE_HEAVY_UNIT": False}},  # quicker
    }))
    cwd, artifacts = tmp_path / "cwd", tmp_path / "artifacts"
    cwd.mkdir()
    volumes_before = {v.name for v in docker_client.volumes.list()}
    started = time.time()
    kept: list = []
    runs: list[subprocess.CompletedProcess] = []
    try:
        with servers(tmp_path, marker, [first, second]) as srv:
            ok = run_build(recipe_file, site_args(first, srv, mirror=True), cwd, artifacts)
            runs.append(ok)
            print(f"first build: {payload(ok).get('durations_s')}", file=sys.stderr)
            assert ok.returncode == 0 and payload(ok).get("ok"), ok.stderr[-6000:]
            # the failing build: every token rotated, a CMake generator that does not exist
            bad = run_build(recipe_file, [*site_args(second, srv), "--keep-container",
                                          "--set", "build.env.CMAKE_GENERATOR=buildctl-no-such-generator"],
                            cwd, artifacts)
            runs.append(bad)
            kept = engine.list_buildctl_containers(docker_client, {"buildctl.recipe": name})
        assert bad.returncode == 1 and payload(bad).get("bundle"), bad.stderr[-6000:]

        # -- every credential was used
        assert any(r.startswith("CONNECT ") for r in srv["proxy"].authorized), srv["proxy"].authorized
        assert any(f"127.0.0.1:{srv['git'].port}" in r for r in srv["proxy"].authorized)
        assert any(r.endswith("/InRelease") for r in srv["apt"].authorized), srv["apt"].authorized
        assert any(r.endswith(".deb") for r in srv["apt"].authorized)
        assert f"GET /files/{marker.replace('-', '_')}-1.0-py3-none-any.whl" in srv["pip"].authorized
        assert sum("git-upload-pack" in r for r in srv["git"].authorized) >= 2  # both builds fetched

        result, failure = payload(ok), payload(bad)
        artifact, bundle = Path(result["artifact"]), Path(failure["bundle"])
        # the first build fetched its upstream URL from the mirror: the manifest says both, the login masked
        source = result["manifest"]["source"]
        assert source["git"] == f"{UPSTREAM}demofw.git", source
        assert source["mirror"] == f"http://***@127.0.0.1:{srv['git'].port}/demofw.git", source
        log = (artifact / "build.log").read_text()
        assert re.search(rf"^Successfully installed .*\b{marker}-1\.0\b", log, re.M), "the marker came from the index"
        bad_log = (bundle / "build.log").read_text()
        assert "buildctl-no-such-generator" in bad_log

        # -- rotating every token reused every layer: no apt, no pip ran in the second build
        assert "Get:1 http://127.0.0.1" in log and "Get:1 http://127.0.0.1" not in bad_log
        assert "Successfully installed" not in bad_log

        # -- every image of both builds is labelled, from the base stage on
        images = [*step_images(docker_client, log), *step_images(docker_client, bad_log)]
        base_id = docker_client.api.inspect_image(base_image)["Id"]
        assert result["manifest"]["images"]["builder"] in images
        for img in images:
            if img != base_id:
                assert (docker_client.api.inspect_image(img)["Config"].get("Labels") or {}).get("buildctl") == "1", img

        # -- and no credential anywhere
        scan = Scan([*first.needles(), *second.needles()])
        for i, proc in enumerate(runs):
            scan.text(f"output of build {i + 1}", proc.stdout + proc.stderr)
        for p in [*artifacts.rglob("*"), *(cwd / "build").rglob("*")]:
            if p.is_file():
                scan.text(str(p.relative_to(tmp_path)), p.read_bytes())
        images = sorted(set(images))
        for img in images:
            scan.text(f"history of {img[:19]}", json.dumps(docker_client.api.history(img)))
            scan.text(f"config of {img[:19]}", json.dumps(docker_client.api.inspect_image(img)))
        scan.docker_save(images)
        assert scan.bytes > 300 << 20, "the export holds the layers"
        assert len(kept) == 1, kept
        scan.text("config of the kept container", json.dumps(docker_client.api.inspect_container(kept[0].id)))
        scan.stream("filesystem of the kept container", docker_client.api.export(kept[0].id))
        spec = recipe.load(str(recipe_file))
        failed_volumes = json.loads((bundle / "bundle.json").read_text())["volumes"]
        works = [engine_names.volume_names(spec, result["key"], os.environ["BUILDCTL_NAMESPACE"])[0],
                 next(v for v, path in failed_volumes.items() if path == "/work")]
        for work in works:
            grep = engine.run_container(
                docker_client,
                engine.ContainerSpec(
                    base_image,
                    ["bash", "-c", 'grep -rlaF -f /dev/stdin /work <<<"$NEEDLES" || true'],
                    env={"NEEDLES": "\n".join(n.decode() for n in scan.needles)},
                    volumes={work: "/work"},
                    network_mode="none",
                    labels={"buildctl.recipe": name},
                ),
            )
            assert grep.exit_code == 0 and grep.log.strip() == "", f"{work}: {grep.log}"
            assert "/work/src/.git" in engine.run_container(  # the volume was scanned: it holds the clone
                docker_client, engine.ContainerSpec(base_image, ["ls", "-d", "/work/src/.git"], volumes={work: "/work"},
                                                    network_mode="none", labels={"buildctl.recipe": name})).log
        assert scan.found == []
    finally:
        for c in engine.list_buildctl_containers(docker_client, {"buildctl.recipe": name}):
            with contextlib.suppress(derr.APIError):
                c.remove(force=True, v=True)
        cleanup(docker_client, name, runs, started, volumes_before)


def cleanup(client: docker.DockerClient, name: str, runs: list, started: float, volumes_before: set[str]) -> None:
    """Remove what the builds made: the recipe's tags and build-dir volumes, and the untagged images
    of this session's steps (never forced: an image another build uses stays)."""
    logs = []
    for proc in runs:
        p = payload(proc)
        for folder in filter(None, [p.get("artifact"), p.get("bundle")]):
            with contextlib.suppress(OSError):
                logs.append((Path(folder) / "build.log").read_text())
    for img in client.images.list(name=f"buildctl/{name}"):
        for tag in img.tags:
            with contextlib.suppress(derr.APIError):
                client.images.remove(tag)
    for log in logs:
        for img in reversed(step_images(client, log)):
            with contextlib.suppress(derr.APIError):
                attrs = client.api.inspect_image(img)
                created = datetime.fromisoformat(attrs["Created"][:19] + "+00:00").timestamp()
                if not attrs.get("RepoTags") and created >= started - 5:
                    client.images.remove(img)
    for v in client.volumes.list(filters={"label": "buildctl=1"}):
        if v.name.startswith(f"buildctl-work-{name}-") and v.name not in volumes_before:
            with contextlib.suppress(derr.APIError):
                v.remove(force=True)


# ---------------------------------------------------------------------------------------------- the channels


# Docker's predefined build args (docs: "Predefined ARGs"); ALL_PROXY joined them only in later
# engines (20.10 leaves it unconsumed), so it is given too and must not show either way.
PREDEFINED = ["HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY"]


@pytest.mark.engines
def test_predefined_proxy_args_stay_out_of_history_config_and_cache_key(docker_client, base_image, test_labels,
                                                                       tmp_path):
    """The classic builder and the predefined proxy args, upper and lower case: the RUN step sees them;
    no image, history entry or config holds them; a build with other values reuses the layer."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    seen = "|".join([*PREDEFINED, *(n.lower() for n in PREDEFINED)])
    (ctx / "Dockerfile").write_text(f"FROM {base_image}\nRUN env | grep -cE '^({seen})=' > /proxies && echo {SESSION}\n")
    names = [*PREDEFINED, "ALL_PROXY", *(n.lower() for n in [*PREDEFINED, "ALL_PROXY"])]

    def build(password: str) -> tuple[str, list[str]]:
        lines: list[str] = []
        args = {n: f"http://u:{password}@proxy.invalid:3128" for n in names}
        image = engine.build_image(
            docker_client,
            engine.ImageSpec(ctx, f"buildctl-test/proxy-args:{SESSION}", buildargs=args, labels=test_labels),
            on_line=lines.append,
        )
        return image, lines

    first_pw, second_pw = f"pw1{uuid.uuid4().hex}", f"pw2{uuid.uuid4().hex}"
    image, lines = build(first_pw)
    out = engine.run_container(
        docker_client,
        engine.ContainerSpec(image, ["cat", "/proxies"], network_mode="none", labels=test_labels),
    )
    assert out.log.strip() == "8", "the RUN step saw all eight"
    again, lines2 = build(second_pw)
    assert again == image and any(re.match(r" ?--?-> Using cache", ln) for ln in lines2), \
        "the values are no part of the cache key"
    scan = Scan([first_pw.encode(), second_pw.encode()])
    for img in step_images(docker_client, "\n".join(lines)):
        scan.text("history", json.dumps(docker_client.api.history(img)))
        scan.text("config", json.dumps(docker_client.api.inspect_image(img)))
    scan.docker_save([image])
    assert scan.found == []


def channel_context(ctx: Path, base_image: str, script: str) -> Path:
    ctx.mkdir(parents=True)
    shutil.copy(TEMPLATES / "secrets.sh", ctx / "secrets.sh")
    (ctx / "Dockerfile").write_text(
        f"FROM {base_image}\nLABEL buildctl=1\nSHELL [\"/bin/bash\", \"-o\", \"pipefail\", \"-c\"]\n"
        "COPY secrets.sh /usr/local/lib/buildctl/secrets.sh\n"
        f"RUN . /usr/local/lib/buildctl/secrets.sh && {script}\n")
    return ctx


@pytest.mark.engines
@pytest.mark.parametrize("network", ["default", "host"])
def test_image_build_gets_credentials_only_while_it_runs(docker_client, base_image, test_labels, tmp_path, network):
    """The RUN step takes the credentials from the server (on the bridge gateway, or loopback with
    host networking); the apt login it was given is gone from the layer; the token is nowhere.
    Rootless Podman's own network reaches no server on this machine: refused in one line, nothing built."""
    token = f"tok{uuid.uuid4().hex}"
    creds = secrets.Credentials(env=(("ITEST_TOKEN", token),), apt_auth=f"machine http://h/ login u password {token}\n")
    digest = hashlib.sha256(token.encode()).hexdigest()  # the RUN line must not hold the token itself
    script = (f'test "$(printf %s "$ITEST_TOKEN" | sha256sum | cut -c1-64)" = {digest} '
              f'&& test -s /etc/apt/auth.conf.d/90buildctl.conf && echo "saw it: $ITEST_TOKEN" && echo {SESSION}-{network}')
    ctx = channel_context(tmp_path / "ctx", base_image, script)
    lines: list[str] = []
    kind = engine.kind_of(docker_client)
    if network == "default" and kind.podman and kind.rootless:
        with pytest.raises(EngineError, match=r"rootless Podman's default network .*; fix: build with --network host$"):
            engine.build_image(
                docker_client,
                engine.ImageSpec(
                    ctx,
                    f"buildctl-test/channel:{SESSION}-{network}",
                    network_mode=network,
                    labels=test_labels,
                ),
                credentials=creds,
                on_line=lines.append,
            )
        assert lines == [] and not engine.image_exists(docker_client, f"buildctl-test/channel:{SESSION}-{network}")
        return
    image = engine.build_image(
        docker_client,
        engine.ImageSpec(
            ctx, f"buildctl-test/channel:{SESSION}-{network}", network_mode=network, labels=test_labels
        ),
        credentials=creds,
        on_line=lines.append,
    )
    assert "saw it: ***" in lines  # used in the RUN step, masked in the log
    listing = engine.run_container(
        docker_client,
        engine.ContainerSpec(
            image, ["ls", "-A", "/etc/apt/auth.conf.d"], network_mode="none", labels=test_labels
        ),
    )
    assert listing.log.strip() == ""
    scan = Scan([token.encode()])
    scan.text("log", "\n".join(lines))
    for img in step_images(docker_client, "\n".join(lines)):
        scan.text("history", json.dumps(docker_client.api.history(img)))
        scan.text("config", json.dumps(docker_client.api.inspect_image(img)))
    scan.docker_save([image])
    assert scan.found == []
    # Without credentials the same Dockerfile builds the same image (the script finds no server).
    plain = channel_context(tmp_path / "plain", base_image, "true")
    engine.build_image(
        docker_client,
        engine.ImageSpec(plain, f"buildctl-test/channel:{SESSION}-{network}-plain", labels=test_labels),
    )


@pytest.mark.engines
def test_container_gets_credentials_by_file_not_config(docker_client, base_image, test_labels, tmp_path):
    """run_container(credentials=…): the script reads them, the file is gone before it goes on, and
    neither the kept container's config nor its filesystem holds them."""
    token = f"tok{uuid.uuid4().hex}"
    creds = secrets.Credentials(env=(("HTTP_PROXY", f"http://u:{token}@proxy.invalid:1"),))
    ctx = channel_context(tmp_path / "ctx", base_image, "true")
    image = engine.build_image(
        docker_client, engine.ImageSpec(ctx, f"buildctl-test/channel:{SESSION}-run", labels=test_labels)
    )
    script = ('. /usr/local/lib/buildctl/secrets.sh; echo "proxy=$HTTP_PROXY"; '
              'test ! -e /run/buildctl-secrets && echo file-gone')
    res = engine.run_container(
        docker_client,
        engine.ContainerSpec(
            image, ["bash", "-c", script], keep=True, network_mode="none", labels=test_labels
        ),
        credentials=creds,
    )
    try:
        assert res.exit_code == 0, res.log
        assert res.log.splitlines() == ["proxy=http://***@proxy.invalid:1", "file-gone"]
        scan = Scan([token.encode()])
        scan.text("config", json.dumps(docker_client.api.inspect_container(res.container_id)))
        scan.stream("export", docker_client.api.export(res.container_id))
        assert scan.found == []
    finally:
        docker_client.api.remove_container(res.container_id, force=True)
