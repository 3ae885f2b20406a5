"""The engine goes away mid-build: a real demo-cpu compile reaching the real engine through a unix socket
relay of this test's own, which the test closes (listening socket and every open connection) when ninja
starts compiling, as a remote engine's network or an ssh tunnel goes.

* `invoke build` exits 1 with one error line that names the engine, the step's container and what to
  do; no traceback, no second warning about a removal that could not happen.
* Once the relay is back and the orphaned container has stopped, the same command succeeds, removes
  that container and resumes from the build directory (steps built before > 0); nothing is left.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE, remove_namespace_objects

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
NETWORK = os.environ.get("BUILDCTL_TEST_NETWORK", "host")


class Relay:
    """A unix socket that forwards every connection to the engine's socket, until close()."""

    def __init__(self, path: Path, target: str) -> None:
        self.path, self.target = path, target
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.server: socket.socket | None = None

    def open(self) -> None:
        self.path.unlink(missing_ok=True)
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(self.path))
        self.server.listen(64)
        threading.Thread(target=self._accept, args=(self.server,), daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return  # closed
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.target)
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        with self.lock:
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.conns.clear()
        self.path.unlink(missing_ok=True)


def _engine_socket() -> str:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    assert host.startswith("unix://"), f"this test relays a unix socket, not {host}"
    return host[len("unix://"):]


def test_engine_gone_mid_compile_then_back(tmp_path, docker_client, base_image):
    namespace = f"{TEST_NAMESPACE}-gone"
    relay = Relay(Path(f"/tmp/bctl-relay-{TEST_NAMESPACE}.sock"), _engine_socket())
    src = tmp_path / "demofw"
    shutil.copytree(ROOT / "examples" / "demofw", src,
                    ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    for f in src.rglob("*.cpp"):  # a cold compile: the relay closes while ninja has work left
        f.write_text(f.read_text() + f"\nnamespace {{ [[maybe_unused]] constexpr int {namespace.replace('-', '_')} = 0; }}\n")
    url = f"unix://{relay.path}"
    cmd = [str(Path(sys.executable).with_name("invoke")), "-r", str(ROOT), "build", "--recipe", "demo-cpu",
           "--set", f"framework.source.path={src}", "--set", "build.cache=none", "--no-verify", "--jobs", "1",
           "--network", NETWORK, "--ca-cert", CA_BUNDLE]
    env = {**os.environ, "DOCKER_HOST": url, "BUILDCTL_ARTIFACTS": str(tmp_path / "artifacts"),
           "BUILDCTL_NAMESPACE": namespace, "COLUMNS": "200"}
    relay.open()
    try:
        build = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, stdin=subprocess.DEVNULL)
        lines = []
        for line in build.stdout:
            lines.append(line)
            if relay.server is not None and "Building CXX object" in line:
                relay.close()  # the engine is gone for this build
        assert build.wait(timeout=600) == 1, "".join(lines)[-4000:]
        output = "".join(lines)
        errors = [ln for ln in lines if ln.startswith("error:")]
        assert len(errors) == 1, output[-4000:]
        container = f"buildctl-compile-{namespace}-demo-cpu-"
        assert f"lost the connection to the Docker engine ({url}) while running container {container}" in errors[0]
        assert "the next `invoke build` of this recipe removes it and resumes" in errors[0]
        assert "Traceback" not in output and "could not remove container" not in output

        # the container kept compiling on the engine; once it stops, the same command takes over
        [orphan] = docker_client.containers.list(all=True, filters={"label": f"buildctl.namespace={namespace}"})
        orphan.wait(timeout=600)
        relay.open()
        again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200,
                               stdin=subprocess.DEVNULL)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        manifest = json.loads(next((tmp_path / "artifacts").glob("demo-cpu/*/manifest.json")).read_text())
        assert manifest["resumed"]["steps_built_before"] > 0, manifest["resumed"]
        assert docker_client.containers.list(all=True, filters={"label": f"buildctl.namespace={namespace}"}) == []
    finally:
        relay.close()
        remove_namespace_objects(docker_client, namespace)
