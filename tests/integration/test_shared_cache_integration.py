"""The shared compile cache against a real redis-server (.ci/services.sh) and the real engine.

* Build A (`invoke build`, BUILDCTL_CACHE_URL in its environment) compiles demo-cpu into artifacts root
  A with an empty local ccache volume (its own namespace) and fills the server. Build B, from a fresh
  artifacts root and another namespace (so another, empty, local volume) with --cache-url and the
  same server, gets its objects from Redis: remote hits > 0, local misses > 0, the same artifact key.
  The server's password is found in neither command's output nor any file of both artifacts roots and
  the rendered build folders. The source is a copy marked with this session's id, so the server
  holds nothing for it before A.
* With the server's port closed, a build succeeds and says so in exactly one warning line.
* A server killed after the compile started (a private redis-server, not the session's): the build
  succeeds with the local cache, and the manifest and the summary count the failed lookups.
* A password holding every character a URL login must percent-encode, and ':': the build script's
  probe and ccache both authenticate (the server holds objects afterwards).
* A warm local cache fills an empty server: machine A (build A's namespace, its local cache warm) builds
  the source with one unit changed against a new, empty server (every other unit a local hit), and
  machine C (a third namespace, an empty local cache) then finds >= 90 % of its objects on that server
  (ccache's `reshare`: without it A writes only its one miss).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from conftest import TEST_NAMESPACE, remove_namespace_objects

pytestmark = pytest.mark.integration
pytest_plugins = ["services"]  # the session fixtures of the servers

ROOT = Path(__file__).resolve().parents[2]
DEMOFW = ROOT / "examples" / "demofw"
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
NETWORK = os.environ.get("BUILDCTL_TEST_NETWORK", "host")
WARNING = "buildctl: warning: shared compile cache"


def _invoke() -> list[str]:
    exe = Path(sys.executable).with_name("invoke")
    return [*([str(exe)] if exe.exists() else [sys.executable, "-m", "invoke"]), "-r", str(ROOT)]


def _build(cwd: Path, root: Path, namespace: str, src: Path, *extra: str, env: dict | None = None):
    cmd = [*_invoke(), "build", "--recipe", "demo-cpu", "--set", f"framework.source.path={src}", "--no-verify",
           "--network", NETWORK, "--ca-cert", CA_BUNDLE, *extra]
    environ = {k: v for k, v in os.environ.items() if k != "BUILDCTL_CACHE_URL"}
    environ.update(BUILDCTL_ARTIFACTS=str(root), BUILDCTL_NAMESPACE=namespace, COLUMNS="200",
                   **(env or {}))
    proc = subprocess.run(cmd, cwd=cwd, env=environ, capture_output=True, text=True, timeout=30 * 60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    manifest = json.loads(next(root.glob("demo-cpu/*/manifest.json")).read_text())
    return proc, manifest


def _closed_port() -> int:
    with socket.socket() as s:  # bound, never listening: a connect is refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def namespaces(docker_client):
    """Namespaces of this module's builds (machines A, B and C); their engine objects are removed afterwards."""
    names = [f"{TEST_NAMESPACE}-a", f"{TEST_NAMESPACE}-b", f"{TEST_NAMESPACE}-c"]
    yield names
    for name in names:
        remove_namespace_objects(docker_client, name)


@pytest.fixture(scope="module")
def build_a(tmp_path_factory, base_image, services, namespaces):
    """Build A: demo-cpu cold on machine A (namespace A: an empty local cache) with the session's server,
    from a copy marked with this session's id: (folder, source, command, manifest)."""
    tmp_path = tmp_path_factory.mktemp("shared-cache")
    src = tmp_path / "demofw"
    shutil.copytree(DEMOFW, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    # Objects the server has never seen: code, not a comment (ccache's preprocessor mode hashes the
    # output without comments, so a comment-marked copy hits an earlier session's objects).
    marker = TEST_NAMESPACE.replace("-", "_")
    for f in [*src.rglob("*.cpp"), *src.rglob("*.cu")]:
        f.write_text(f.read_text() + f"\nnamespace {{ [[maybe_unused]] constexpr int {marker} = 0; }}\n")
    run_a, a = _build(tmp_path, tmp_path / "root-a", namespaces[0], src, env={"BUILDCTL_CACHE_URL": services.redis_url})
    return tmp_path, src, run_a, a


def test_engine_b_reuses_a_compile_through_redis_and_a_dead_server_only_warns(build_a, services, namespaces):
    tmp_path, src, run_a, a = build_a
    password = urlsplit(services.redis_url).password
    assert password and len(password) >= 8
    ns_a, ns_b, _ = namespaces

    run_b, b = _build(tmp_path, tmp_path / "root-b", ns_b, src, "--cache-url", services.redis_url)

    ca, cb = a["compile_cache"], b["compile_cache"]
    assert ca["remote"]["state"] == "used" and cb["remote"]["state"] == "used", (ca, cb)
    # A compiled and stored its objects (a few files the marker does not reach may hit an earlier session's)
    assert ca["remote"]["misses"] == ca["misses"] > ca["remote"]["hits"] and ca["remote"]["errors"] == 0, ca
    # B's local volume is new: every lookup misses there and the server answers it
    assert cb["local_hits"] == 0 and cb["local_misses"] > 0, cb
    assert cb["remote"]["hits"] > 0 and cb["remote"]["hits"] == cb["hits"] and cb["misses"] == 0, cb
    assert cb["remote"]["url"] == "redis://***@" + services.redis_url.rpartition("@")[2]
    assert a["key"] == b["key"]  # the cache's location is no part of the artifact
    assert a["wheels"][0]["sha256"] and b["namespace"] == ns_b
    summary = run_b.stdout + run_b.stderr
    assert WARNING not in summary
    assert "shared compile cache at 127.0.0.1:" in summary  # the build script's line (no password)
    assert "  shared " in summary and f"{cb['remote']['hits']}/" in summary  # the summary's row

    # a server that does not answer: one warning, the build goes on with the local cache
    dead = f"redis://:{password}@127.0.0.1:{_closed_port()}/0"
    run_c, c = _build(tmp_path, tmp_path / "root-c", ns_b, src, "--cache-url", dead)
    out_c = run_c.stdout + run_c.stderr
    assert out_c.count(WARNING) == 1, out_c[-3000:]
    assert "did not answer" in out_c and "not used: 127.0.0.1:" in out_c  # the log line and the summary row
    log_c = next((tmp_path / "root-c").glob("demo-cpu/*/build.log")).read_text()
    assert log_c.count(WARNING) == 1
    assert c["compile_cache"]["remote"]["state"] == "unreachable" and c["key"] == a["key"]

    # the password: nowhere in what the commands printed or the builds wrote
    for proc in (run_a, run_b, run_c):
        assert password not in proc.stdout + proc.stderr
    for folder in (tmp_path / "root-a", tmp_path / "root-b", tmp_path / "root-c", tmp_path / "build"):
        for f in folder.rglob("*"):
            if f.is_file():
                assert password.encode() not in f.read_bytes(), f


# Every character a URL login must carry percent-encoded, and ':' (ccache splits the login at its first
# ':' after decoding it: a bare password holding one authenticated as USER:PASSWORD before issue 20).
HOSTILE_PASSWORD = f"pw:{TEST_NAMESPACE}#?/@%x"


@pytest.fixture
def private_redis(tmp_path):
    """A redis-server of this test's own, its password HOSTILE_PASSWORD (a test may kill it; the session's
    server stays up): (process, URL, port)."""
    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    port = _closed_port()
    conf = tmp_path / "redis.conf"  # the password in a file, not on a command line
    conf.write_text(f'requirepass "{HOSTILE_PASSWORD}"\n')
    proc = subprocess.Popen([exe, str(conf), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:  # its own word that it listens, not a sleep
        if "Ready to accept connections" in line:
            break
    else:
        pytest.fail(f"redis-server on port {port} did not start: exit {proc.wait()}")
    yield proc, f"redis://:{quote(HOSTILE_PASSWORD, safe='')}@127.0.0.1:{port}/0", port
    proc.kill()
    proc.wait()


def _dbsize(port: int) -> int:
    """DBSIZE of the private server, asked with its password (RESP over a plain socket)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        replies = sock.makefile("rb")
        for command in (["AUTH", HOSTILE_PASSWORD], ["DBSIZE"]):
            sock.sendall(f"*{len(command)}\r\n".encode() + b"".join(
                f"${len(a.encode())}\r\n{a}\r\n".encode() for a in command))
            reply = replies.readline()
            assert reply[:1] in (b"+", b":"), reply
    return int(reply[1:])


def test_a_warm_local_cache_fills_an_empty_server(build_a, namespaces, private_redis):
    """Machine A's local cache is warm; the server is new. A's build of a changed source (one unit changed)
    writes every object to the server, hits included, so a cold machine C then finds them there."""
    tmp_path, src, _, a = build_a
    _, url, port = private_redis
    changed = tmp_path / "demofw-changed"
    shutil.copytree(src, changed)
    add = changed / "csrc" / "ops" / "add.cpp"
    add.write_text(add.read_text() + "\nnamespace { [[maybe_unused]] constexpr int reshare_marker = 1; }\n")
    ns_a, _, ns_c = namespaces
    _, warm = _build(tmp_path, tmp_path / "root-a2", ns_a, changed, "--cache-url", url)
    cw = warm["compile_cache"]
    assert cw["local_misses"] <= 3 and cw["local_hits"] >= 10 and cw["remote"]["state"] == "used", cw
    assert _dbsize(port) >= cw["local_hits"]  # the hits were written too (ccache's reshare)
    # a store of its own: root-c holds the dead-server build of another test, which _build would read
    _, cold = _build(tmp_path, tmp_path / "root-cold", ns_c, changed, "--cache-url", url)
    cc = cold["compile_cache"]
    assert cc["local_hits"] == 0 and (cc["remote"].get("hit_rate") or 0) >= 0.9, cc
    assert cold["key"] == warm["key"] != a["key"]


def test_a_password_holding_url_characters_authenticates(tmp_path, base_image, namespaces, private_redis):
    """`redis://:<password with : # ? / @ %, percent-encoded>@host`: the build script's probe and ccache
    itself authenticate (the server holds the objects afterwards), and the password is found nowhere."""
    _, url, port = private_redis
    src = tmp_path / "demofw"
    shutil.copytree(DEMOFW, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    proc, manifest = _build(tmp_path, tmp_path / "root", namespaces[0], src, "--cache-url", url)
    remote = manifest["compile_cache"]["remote"]
    assert remote["state"] == "used" and remote["errors"] == 0 and remote["timeouts"] == 0, remote
    assert remote["hits"] + remote["misses"] > 0 and _dbsize(port) > 0, remote  # ccache stored its objects
    assert remote["url"] == f"redis://***@127.0.0.1:{port}/0"
    for needle in (HOSTILE_PASSWORD, quote(HOSTILE_PASSWORD, safe="")):
        assert needle not in proc.stdout + proc.stderr
        for f in (tmp_path / "root").rglob("*"):
            if f.is_file():
                assert needle.encode() not in f.read_bytes(), f


def test_redis_killed_mid_build_costs_lookups_not_the_build(tmp_path, base_image, services, namespaces, private_redis):
    """The server dies after the compile started: ccache counts the failed lookups, the build goes on with
    the local cache and succeeds, and the summary says how many lookups failed."""
    server, url, _ = private_redis
    src = tmp_path / "demofw"
    shutil.copytree(DEMOFW, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    marker = TEST_NAMESPACE.replace("-", "_") + "_killed"
    for f in src.rglob("*.cpp"):  # cold: nothing of this source is in any cache
        f.write_text(f.read_text() + f"\nnamespace {{ [[maybe_unused]] constexpr int {marker} = 0; }}\n")
    root = tmp_path / "root"
    cmd = [*_invoke(), "build", "--recipe", "demo-cpu", "--set", f"framework.source.path={src}", "--no-verify",
           "--network", NETWORK, "--ca-cert", CA_BUNDLE, "--jobs", "1", "--cache-url", url]
    environ = {k: v for k, v in os.environ.items() if k != "BUILDCTL_CACHE_URL"}
    environ.update(BUILDCTL_ARTIFACTS=str(root), BUILDCTL_NAMESPACE=namespaces[0], COLUMNS="200")
    build = subprocess.Popen(cmd, cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, stdin=subprocess.DEVNULL)
    lines, killed_at = [], None
    for line in build.stdout:
        lines.append(line)
        if killed_at is None and "Building CXX object" in line:  # ninja started compiling: kill the server
            server.kill()
            server.wait()
            killed_at = len(lines)
    output = "".join(lines)
    assert build.wait(timeout=30 * 60) == 0, output[-6000:]
    assert killed_at is not None, "the build printed no compile line: " + output[-3000:]
    manifest = json.loads(next(root.glob("demo-cpu/*/manifest.json")).read_text())
    remote = manifest["compile_cache"]["remote"]
    assert remote["state"] == "used", remote  # the server answered when the build started
    failed = remote["errors"] + remote["timeouts"]
    assert failed > 0, remote
    assert f"{failed} failed lookups" in output  # the summary's row
    assert manifest["wheels"][0]["sha256"]
    assert HOSTILE_PASSWORD not in output and quote(HOSTILE_PASSWORD, safe="") not in output
