"""A git smart-HTTP server on loopback (`git http-backend` behind Python's HTTP server), no login: what a
site's git mirror is to a build run with --network host. Serves every bare repository under `root`,
fetches of any commit included (protocol v2 answers a `want` of any reachable sha, as GitHub does).

    with GitServer(root) as server:
        server.url + "demofw.git"
"""

from __future__ import annotations

import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _Handler(BaseHTTPRequestHandler):
    root: Path

    def do_GET(self) -> None:  # noqa: N802
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {"PATH": os.environ["PATH"], "GIT_PROJECT_ROOT": str(self.root), "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": self.command,
               "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
               "REMOTE_ADDR": "127.0.0.1", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.root),
               "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
               # partial fetches (--filter) as GitHub allows them
               "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "uploadpack.allowFilter", "GIT_CONFIG_VALUE_0": "true"}
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, data = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            name, sep, value = line.partition(": ")
            if not sep:
                continue
            if name.lower() == "status":
                status = int(value.split()[0])
            else:
                headers.append((name, value))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_GET  # noqa: N815

    def log_message(self, *args) -> None:
        pass


class GitServer:
    def __init__(self, root: Path, host: str = "127.0.0.1") -> None:
        handler = type("Handler", (_Handler,), {"root": Path(root)})
        self.server = ThreadingHTTPServer((host, 0), handler)
        self.url = f"http://{host}:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> GitServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
