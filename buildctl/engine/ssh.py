"""The ssh:// transport: a local unix socket piped through `ssh HOST docker system dial-stdio`."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading

from buildctl.errors import EngineError, InputError
from buildctl.secrets import checked_argv, mask_url


class SshBridge:
    """A local unix socket whose connections are piped through `ssh HOST docker system dial-stdio`.

    This is how the docker CLI reaches ssh:// engines, and it needs only the ssh binary (docker-py's
    own ssh transport imports paramiko even with use_ssh_client=True). The remote needs the docker CLI.
    Every HTTP connection is one ssh process, in its own session so that Ctrl-C does not cut the
    connection that removes the container afterwards.
    """

    @staticmethod
    def parse(url: str) -> tuple[str, str]:
        """ssh://[user@]host[:port] → ("[user@]host", "port" or ""). A login with a password is refused:
        ssh takes none from a URL, and `user:password@host` in its argv is readable in /proc (and ssh
        would take it all for the user name)."""
        rest = url[len("ssh://") :].split("/", 1)[0]
        user, _, hostport = rest.rpartition("@")
        if ":" in user:
            raise InputError(
                f"the engine {mask_url(url)}: an ssh:// address carries a user name, never a password (ssh takes "
                "none from a URL, and this one would stand in ssh's command line); fix: ssh://USER@HOST with a "
                "key (ssh-add, or IdentityFile in ~/.ssh/config)")
        host, port = hostport, ""
        if hostport.startswith("["):
            host, _, tail = hostport[1:].partition("]")
            port = tail.lstrip(":")
        elif hostport.count(":") == 1:
            host, port = hostport.split(":")
        if not host:
            raise EngineError(f"DOCKER_HOST={mask_url(url)!r} names no host; fix: use ssh://user@host[:port]")
        return (f"{user}@{host}" if user else host), port

    @staticmethod
    def ssh_words(url: str) -> list[str]:
        target, port = SshBridge.parse(url)
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
                checked_argv(self.command),
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



