"""Publishing to an index server (pypiserver, devpi): the server's simple page read before and after a
twine upload, credentials from the URL, the environment or ~/.netrc, masked in every message."""


from __future__ import annotations

import contextlib
import io
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from buildctl import urls
from buildctl.errors import InputError
from buildctl.secrets import Masker, mask_url, secret_values_from_env, url_secrets
from buildctl.store.publish.wheels import PublishError, Wheel, conflict

HTTP_TIMEOUT = 60
MAX_PAGE_BYTES = 16 << 20  # a simple page of thousands of files is a few MB; a server's answer is untrusted
LOOPBACK = ("localhost", "::1")


class _Links(HTMLParser):
    """Anchors of a PEP 503 page: file name → sha256 from the URL fragment (None without one)."""

    def __init__(self):
        super().__init__()
        self.files: dict[str, str | None] = {}

    def handle_starttag(self, tag, attrs):
        href = dict(attrs).get("href") if tag == "a" else None
        if not href:
            return
        url, _, fragment = href.partition("#")
        name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
        algo, _, value = fragment.partition("=")
        self.files[name] = value.lower() if algo == "sha256" and value else None


def parse_links(page: str) -> dict[str, str | None]:
    parser = _Links()
    parser.feed(page)
    return parser.files


@dataclass(frozen=True)
class Server:
    """An index server's upload URL without credentials, and the credentials."""

    url: str  # ends with "/"
    username: str | None
    password: str | None

    @staticmethod
    def from_url(url: str, environ: Mapping[str, str]) -> Server:
        # (the URL is never quoted: one that tools misread masks badly, and it may hold a password)
        why = urls.problem(url)
        if why:
            raise InputError(f"--to (value not shown): {why}")
        parts = urlsplit(url)
        if not parts.hostname:
            raise InputError("--to (value not shown): names no host; fix: http://HOST:PORT/ (pypiserver) or "
                             "http://HOST:PORT/USER/INDEX/ (devpi)")
        netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        netloc += f":{parts.port}" if parts.port else ""
        path = parts.path if parts.path.endswith("/") else parts.path + "/"
        clean = urlunsplit((parts.scheme, netloc, path, "", ""))
        login = urls.split(url)  # a login in the URL wins, an empty user name with a password too
        username, password = (login.user, login.password or "") if login.userinfo is not None else (None, None)
        if username is None:
            username = environ.get("BUILDCTL_PUBLISH_USERNAME") or None
            password = environ.get("BUILDCTL_PUBLISH_PASSWORD") or None
        if username is None:
            import requests.utils

            auth = requests.utils.get_netrc_auth(clean)
            if auth:
                username, password = auth
        return Server(clean, username, password)


def masker_for(server_url: str, server: Server | None, environ: Mapping[str, str]) -> Masker:
    secrets = secret_values_from_env(environ) | url_secrets(server_url)
    if server is not None and server.password:
        secrets.add(server.password)
    return Masker(secrets)


def publish_to_server(wheels: list[Wheel], url: str, environ: Mapping[str, str]) -> tuple[list[dict], str]:
    """Upload with twine, checked before and after against the server's simple pages. Returns the rows
    and the simple index URL pip should use (without credentials)."""
    import requests

    env = environ
    server = Server.from_url(url, env)
    masker = masker_for(url, server, env)
    shown = mask_url(server.url)
    refuse_in_clear(server, shown)
    session = requests.Session()
    if server.username is not None:
        session.auth = (server.username, server.password or "")

    def get(page_url: str) -> Page:
        try:
            with session.get(page_url, allow_redirects=False, timeout=HTTP_TIMEOUT, stream=True) as resp:
                return Page(resp.status_code, resp.reason, _capped_text(resp, shown))
        except requests.RequestException as e:
            raise PublishError(masker(f"cannot reach the index server at {shown}: {_first_line(e)}; fix: start "
                                      "it, or check --to")) from None

    def refused(resp: Page, doing: str) -> PublishError:
        if resp.status_code in (401, 403):
            return PublishError(f"the index server at {shown} refused the credentials ({resp.status_code} "
                                f"{resp.reason}) {doing}; fix: set BUILDCTL_PUBLISH_USERNAME and "
                                "BUILDCTL_PUBLISH_PASSWORD, or a ~/.netrc entry for its host")
        return PublishError(masker(f"the index server at {shown} answered {resp.status_code} {resp.reason} "
                                   f"{doing}; fix: check --to and the server's log"))

    simple = None
    for candidate in (urljoin(server.url, "simple/"), urljoin(server.url, "+simple/")):  # pypiserver, devpi
        resp = get(candidate)
        if resp.status_code == 200:
            simple = candidate
            break
        if resp.status_code in (401, 403):
            raise refused(resp, "reading its simple index")
    if simple is None:
        raise PublishError(f"{shown}: no PEP 503 index at simple/ or +simple/ under it; fix: give the server's "
                           "upload URL: http://HOST:PORT/ (pypiserver) or http://HOST:PORT/USER/INDEX/ (devpi)")

    def listed(project: str) -> dict[str, str | None]:
        resp = get(urljoin(simple, f"{project}/"))
        if resp.status_code == 200:
            return parse_links(resp.text)
        if resp.status_code in (404, 301, 302, 303, 307, 308):  # not there yet (pypiserver redirects to PyPI)
            return {}
        raise refused(resp, f"reading its page of {project}")

    todo, rows = [], []
    for w in wheels:
        files = listed(w.project)
        if w.filename in files:
            if files[w.filename] != w.sha256:
                raise conflict(w, f"the index at {shown}", files[w.filename])
            rows.append(w.row("unchanged"))
        else:
            todo.append(w)
    if todo:
        _twine_upload(server, [w.path for w in todo], masker, shown, env.get("REQUESTS_CA_BUNDLE") or None)
    for w in todo:
        held = listed(w.project).get(w.filename, "missing")
        if held != w.sha256:
            state = "does not list it" if held == "missing" else f"lists it with sha256 {str(held)[:12]}…"
            raise PublishError(f"uploaded {w.filename} to {shown}, but its simple page {state}; fix: check the "
                               "server's log and storage")
        rows.append(w.row("added"))
    return rows, simple


@dataclass(frozen=True)
class Page:
    """A server's answer: its status and its text, read within MAX_PAGE_BYTES."""

    status_code: int
    reason: str
    text: str


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def _capped_text(resp, shown: str) -> str:
    """The body of `resp` (streamed), decoded; PublishError past MAX_PAGE_BYTES, the rest left unread."""
    body = bytearray()
    for chunk in resp.iter_content(1 << 16):
        body += chunk
        if len(body) > MAX_PAGE_BYTES:
            raise PublishError(f"a page of the index server at {shown} is larger than {_size(MAX_PAGE_BYTES)}, "
                               "not read further; fix: check that --to names a PEP 503 index server")
    return bytes(body).decode(resp.encoding or "utf-8", "replace")


def refuse_in_clear(server: Server, shown: str) -> None:
    """Credentials for an http:// server on another host would travel unencrypted: refused before any
    request (pip, likewise, refuses a plain-http index that is not a trusted host). The loopback (an
    index on this machine) and https:// take them."""
    if server.username is None and not server.password:
        return
    parts = urlsplit(server.url)
    host = (parts.hostname or "").lower()
    if parts.scheme != "http" or host in LOOPBACK or host.startswith("127."):
        return
    raise InputError(f"--to {shown}: its credentials would travel unencrypted to another host (http://); fix: use "
                     "the index's https:// URL, or publish on the index's own machine (http://127.0.0.1:PORT/)")


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or e.__class__.__name__
    return text.splitlines()[0][:300]


def _twine_upload(server: Server, paths: list[Path], masker: Masker, shown: str, cacert: str | None) -> None:
    """twine's upload API, quiet (its console and log are captured: --json keeps stdout clean); `cacert`: the
    environment's REQUESTS_CA_BUNDLE."""
    import requests
    from twine import exceptions as twine_errors
    from twine import settings as twine_settings
    from twine.commands import upload as twine_upload

    upload_settings = twine_settings.Settings(
        repository_url=server.url, username=server.username or "", password=server.password or "",
        non_interactive=True, disable_progress_bar=True, config_file=os.devnull,
        cacert=cacert)
    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    twine_log = logging.getLogger("twine")
    twine_log.addHandler(handler)
    propagate, twine_log.propagate = twine_log.propagate, False
    try:
        with contextlib.redirect_stdout(captured):
            twine_upload.upload(upload_settings, [str(p) for p in paths])
    except requests.HTTPError as e:
        resp = e.response
        status = f"{resp.status_code} {resp.reason}" if resp is not None else _first_line(e)
        if resp is not None and resp.status_code in (401, 403):
            raise PublishError(f"the index server at {shown} refused the upload ({status}); fix: set "
                               "BUILDCTL_PUBLISH_USERNAME and BUILDCTL_PUBLISH_PASSWORD, or a ~/.netrc entry "
                               "for its host") from None
        raise PublishError(masker(f"the index server at {shown} refused the upload: {status}; fix: check the "
                                  "server's log")) from None
    except requests.RequestException as e:
        raise PublishError(masker(f"cannot reach the index server at {shown}: {_first_line(e)}; fix: start it, "
                                  "or check --to")) from None
    except twine_errors.TwineException as e:
        raise PublishError(masker(f"upload to {shown} failed: {_first_line(e)}")) from None
    finally:
        twine_log.removeHandler(handler)
        twine_log.propagate = propagate
