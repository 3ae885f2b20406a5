"""The engine a build runs on, connected through docker-py (connection.connect) when a stage first needs
the client. Until then an engine on a local socket (unix://, or the default socket without DOCKER_HOST)
answers the fetch's questions, whether the base image is there and its id and labels, over the standard
library: a build that finds its artifact asks nothing more, and never loads docker-py and requests
(about 0.1 s of every no-op; issue 23). Anything else (tcp://, ssh://, a socket that does not answer, an
answer other than found or not found) goes through docker-py, so its errors read as they always did.

This module imports nothing of docker-py: it is what the package imports for a no-op.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

CONNECT_TIMEOUT = 20  # seconds to reach the engine at all (and here, for its answer)
DEFAULT_SOCKET = "/var/run/docker.sock"  # docker-py's engine when DOCKER_HOST is not set


def local_socket(url: str | None, environ: Mapping[str, str]) -> str | None:
    """The unix socket of the engine at `url` (else `environ`'s DOCKER_HOST's, else the default); None for an
    engine reached over the network (tcp://, ssh://, http[s]://)."""
    host = (url or environ.get("DOCKER_HOST", "")).strip()
    if not host:
        return DEFAULT_SOCKET
    scheme, _, path = host.partition("://")
    return path if scheme.lower() == "unix" and path.startswith("/") else None


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.socket_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class EngineConnection:
    """The engine at `url` (None: DOCKER_HOST's of `environ`, the command's, else the local one); `client`
    connects through docker-py on first use. `client` given: that client, already connected (the local socket
    is not used, `environ` not needed)."""

    def __init__(self, url: str | None = None, *, client: Any = None, environ: Mapping[str, str] | None = None) -> None:
        if client is None and environ is None:
            raise TypeError("EngineConnection: give the command's environ, or a connected client")
        self.url = url
        self._client = client
        self._environ = environ
        self._socket = local_socket(url, environ) if environ is not None and client is None else None

    @classmethod
    def open(cls, url: str | None = None, *, environ: Mapping[str, str]) -> EngineConnection:
        """The engine, reached now (an engine that does not answer is connect's one-line EngineError,
        before anything is rendered): over its local socket when it has one, else through docker-py."""
        engine = cls(url, environ=environ)
        answer = engine._get("/_ping")
        if answer is None or answer[0] != 200:
            engine.client  # noqa: B018 - connects, or raises what is wrong
        return engine

    @property
    def client(self) -> Any:
        """The docker client (docker.DockerClient), connected on first use."""
        if self._client is None:
            from buildctl import engine

            self._client = engine.connect(self.url, environ=self._environ)
        return self._client

    def inspect_image(self, ref: str) -> dict | None:
        """The engine's inspection of image `ref` (a name or id: its Id, RepoTags, Config.Labels, ...), None
        when it has no such image; another failure as the engine's errors read (objects.inspect_image)."""
        if self._client is None:
            # the image's name in the path as docker-py quotes it
            answer = self._get(f"/images/{quote(ref, safe='/:')}/json")
            if answer is not None and answer[0] == 200:
                return json.loads(answer[1])
            if answer is not None and answer[0] == 404:
                return None
        from buildctl.engine.objects import inspect_image

        return inspect_image(self.client, ref)

    def local_inspection(self, ref: str) -> tuple[bool, dict | None]:
        """(True, the inspection or None for no such image) when the local socket answered; (False, None) when
        there is no local socket or it did not answer: then only `inspect_image` (docker-py) can say."""
        answer = self._get(f"/images/{quote(ref, safe='/:')}/json")
        if answer is not None and answer[0] in (200, 404):
            return True, json.loads(answer[1]) if answer[0] == 200 else None
        return False, None

    def _get(self, path: str) -> tuple[int, bytes] | None:
        """(status, body) of a GET over the local socket; None when there is none or it does not answer
        (then docker-py is asked, and says why)."""
        if self._socket is None:
            return None
        conversation = _UnixHTTPConnection(self._socket, CONNECT_TIMEOUT)
        try:
            conversation.request("GET", path)
            response = conversation.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            self._socket = None  # docker-py from now on
            return None
        finally:
            conversation.close()
