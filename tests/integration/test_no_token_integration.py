"""Issue 43, item 7: a token in a git URL, an index URL, a build cluster's URL and an engine URL, through a
bisect, a dist build, a failed build (its container kept) and a refused engine; then the token's bytes are
searched in every file under the artifacts root, the engine's config of every container the test made and
of the images they ran, every command's output, and every process's argv seen while they ran: none.

The tokens are made here and reach buildctl only through a recipe file and the environment (never this test's
command lines), so any argv that holds one was made by buildctl. The argv are sampled from /proc every few milliseconds (a
process shorter than that may be missed: the ast guard of tests/unit/test_secret_filter.py is what covers
every command line buildctl starts; this is its check on a real run, the build containers' processes
included). The git server answers only the token (401 otherwise): a build that fetched its source used it.

The history: the bundled demo as commit 0, a README note (1), a configure broken on purpose (2). `--until
configure` throughout: about a minute a build on a quiet machine with the base image and the demo's builder
layers cached.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE, containers_made_since
from git_http import GitServer, _Handler

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
SITE = ["--network", os.environ.get("BUILDCTL_NETWORK") or "host",
        *(["--ca-cert", str(CA_BUNDLE)] if CA_BUNDLE.is_file() else [])]
TOKENS = {what: f"tok{what}{secrets.token_hex(8)}" for what in ("git", "index", "dist", "engine")}
BREAK_CONFIGURE = 'message(FATAL_ERROR "demo: configure broken on purpose")\n'


def _forms(token: str) -> list[bytes]:
    return [token.encode(), base64.b64encode(f"ci:{token}".encode()), base64.b64encode(f":{token}".encode())]


def leaks(data: str | bytes) -> list[str]:
    raw = data.encode(errors="replace") if isinstance(data, str) else data
    return [what for what, token in TOKENS.items() if any(form in raw for form in _forms(token))]


class ArgvWatch:
    """Every process's argv, read from /proc every few milliseconds while it runs: those holding a token."""

    def __init__(self) -> None:
        self.hits: dict[int, str] = {}
        self.seen = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                        argv = f.read()
                except OSError:
                    continue
                self.seen += 1
                if leaks(argv):
                    self.hits[int(entry.name)] = argv.replace(b"\0", b" ").decode(errors="replace")[:300]
            time.sleep(0.005)

    def __enter__(self) -> ArgvWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _history(work: Path) -> list[str]:
    repo = work / "demofw"
    shutil.copytree(ROOT / "examples" / "demofw", repo,
                    ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "demofw as shipped")
    with (repo / "README.md").open("a") as f:
        f.write("\nnote\n")
    _git(repo, "commit", "-qam", "readme: a note")
    cmake = repo / "CMakeLists.txt"
    cmake.write_text(cmake.read_text().replace("project(demofw LANGUAGES C CXX)\n",
                                               "project(demofw LANGUAGES C CXX)\n" + BREAK_CONFIGURE, 1))
    _git(repo, "commit", "-qam", "cmake: break the configure")
    (work / "served").mkdir()
    _git(work, "clone", "-q", "--bare", str(repo), str(work / "served" / "demofw.git"))
    return _git(repo, "rev-list", "--reverse", "main").split()


def _private_server(root: Path) -> GitServer:
    expected = "Basic " + base64.b64encode(f"ci:{TOKENS['git']}".encode()).decode()

    class Private(_Handler):
        def do_GET(self) -> None:  # noqa: N802
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            super().do_GET()

        do_POST = do_GET  # noqa: N815

    server = GitServer(root)
    server.server.RequestHandlerClass = type("Handler", (Private,), {"root": root})
    return server


def test_no_token_in_any_file_container_config_output_or_argv(tmp_path, base_image, docker_client):
    shas = _history(tmp_path)
    artifacts = tmp_path / "artifacts"
    # A cluster of this test's own token that does not answer: the session's cluster's token stands in the
    # command lines the test runner is started with (`env $(cat /tmp/bctl-services.env) ...`), so only tokens
    # made here tell buildctl's argv from everyone else's.
    dist = f"http://:{TOKENS['dist']}@127.0.0.1:1"
    outputs: list[str] = []
    since = time.time()
    with _private_server(tmp_path / "served") as server, ArgvWatch() as watch:
        recipe = tmp_path / "demo-cpu.yaml"  # the demo's recipe, its source the private server's
        recipe.write_text(
            "description: the demo from a private git server (issue 43's token test)\n"
            "base: {image: buildctl/base:bookworm, distro: bookworm}\n"
            "python: {version: '3.11', packages: [numpy, cmake, ninja]}\n"
            "framework:\n  name: demofw\n  version: '0.1.0+cpu'\n"
            f"  source: {{git: '{server.url.replace('http://', 'http://ci:' + TOKENS['git'] + '@')}demofw.git', "
            "ref: main}\n"
            "build:\n  type: Release\n  cache: ccache\n  features: {USE_HEAVY_UNIT: false}\n"
            f"  env: {{EXTRA_INDEX_URL: 'http://ci:{TOKENS['index']}@127.0.0.1:9/simple'}}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BUILDCTL_ENGINES", "BUILDCTL_KEEP",
                                                                         "BUILDCTL_GIT_MIRROR", "BUILDCTL_DIST"))}
        env.update(BUILDCTL_ARTIFACTS=str(artifacts), BUILDCTL_CACHE=str(ROOT / ".cache" / "buildctl-test"))

        def invoke(*args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
            proc = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(ROOT), *args], cwd=tmp_path,
                                  env={**env, **(extra_env or {})}, capture_output=True, text=True, timeout=1800)
            outputs.append(proc.stdout + proc.stderr)
            return proc

        bisect = invoke("bisect", "--recipe", str(recipe), *SITE, "--until", "configure", "--axis", "commits",
                        "--good", shas[0], "--bad", shas[2], "--json", "--markdown", str(artifacts / "summary.md"))
        assert bisect.returncode == 0, bisect.stderr[-4000:]
        assert json.loads(bisect.stdout)["first"]["label"] == shas[2][:12]
        built = invoke("build", "--recipe", str(recipe), *SITE, "--until", "configure", "--set",
                       f"framework.source.ref={shas[1]}", "--json", extra_env={"BUILDCTL_DIST_SCHEDULER": dist})
        assert built.returncode in (0, 2), built.stderr[-4000:]  # 2: the cluster does not answer: refused
        failed = invoke("build", "--recipe", str(recipe), *SITE, "--keep-container", "--json")
        assert failed.returncode == 1 and list((artifacts / "failures").iterdir()), failed.stderr[-4000:]
        engine = invoke("build", "--recipe", str(recipe), "--json",
                        extra_env={"BUILDCTL_ENGINES": f"tcp://ci:{TOKENS['engine']}@127.0.0.1:1"})
        assert engine.returncode == 2, engine.stderr
    made = [docker_client.containers.get(i) for i in containers_made_since(
        docker_client, since - 1, labels=("buildctl=1", f"buildctl.namespace={TEST_NAMESPACE}"))]
    try:
        assert made, "the failed build kept no container"
        configs = [json.dumps(c.attrs) for c in made]
        images = {c.attrs["Image"] for c in made}
        configs += [json.dumps(docker_client.api.inspect_image(i)) + json.dumps(docker_client.api.history(i))
                    for i in images]
    finally:
        for c in made:
            c.remove(force=True, v=True)
    files = [f"{p}: {leaks(p.read_bytes())}" for p in artifacts.rglob("*") if p.is_file() and leaks(p.read_bytes())]
    assert files == [], files
    assert [leaks(c) for c in configs if leaks(c)] == []
    assert [leaks(o) for o in outputs if leaks(o)] == [], outputs
    assert watch.seen > 1000 and watch.hits == {}, "\n".join(f"{pid}: {argv}" for pid, argv in watch.hits.items())
