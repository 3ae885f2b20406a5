"""`invoke publish`: put published wheels, with their manifests, on a PEP 503 index pip installs from.

Two kinds of destination:

* a folder, served by any static web server (`pip install --index-url http://HOST/simple/ …`):

      simple/index.html                        the projects (PEP 503 root page)
      simple/<project>/index.html              links `../../files/<project>/<wheel>#sha256=…` with
                                               data-requires-python and data-core-metadata
      files/<project>/<wheel>                  the wheel
      files/<project>/<wheel>.metadata         its METADATA (PEP 658: pip resolves without a download)
      files/<project>/<wheel>.manifest.json    the artifact's manifest.json (what built it)

  The pages of the touched projects and the root page are regenerated from the files there on every
  publish (idempotent: an unchanged page is not rewritten). Publishes to one folder serialise on a lock.
  No PEP 691 JSON pages: a static server cannot negotiate them, and pip reads the HTML ones.

* an index server's upload URL (pypiserver `http://host:8080/`, devpi `http://host:3141/USER/INDEX/`),
  uploaded with twine; credentials come from the URL, BUILDCTL_PUBLISH_USERNAME/PASSWORD or ~/.netrc and
  are masked in every message. The server's simple page is read before (a file already there with the
  same sha256 is "unchanged") and after the upload (the index must list the file with our sha256).

An artifact is untrusted input: its manifest must parse, each wheel it names must be a plain file in the
artifact folder with a valid wheel name, the sha256 the manifest records and METADATA that agrees with
the file name; otherwise a one-line InputError and nothing is written. A file name the index already
holds with other contents is refused (pip caches by name: two different wheels of one name break
installs), before anything is written.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import html
import io
import json
import logging
import os
import re
import stat
import tempfile
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from packaging.metadata import parse_email
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from . import artifacts
from .errors import BuildctlError, InputError
from .secrets import Masker, mask_url, secret_values_from_env, url_secrets

MAX_MANIFEST_BYTES = 16 << 20
MAX_METADATA_BYTES = 4 << 20
RECIPE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
HTTP_TIMEOUT = 60


class PublishError(BuildctlError):
    """The index refused or could not take a wheel (exit 1): unreachable, credentials, a conflict."""


@dataclass(frozen=True)
class Wheel:
    """One checked wheel of an artifact, ready to publish."""

    recipe: str
    artifact: Path
    path: Path
    project: str  # canonical (PEP 503 normalized) name
    version: str
    sha256: str
    requires_python: str | None
    metadata: bytes  # the wheel's .dist-info/METADATA
    manifest: bytes  # the artifact's manifest.json, as it is

    @property
    def filename(self) -> str:
        return self.path.name

    def row(self, status: str) -> dict:
        return {"recipe": self.recipe, "artifact": str(self.artifact), "file": self.filename,
                "project": self.project, "version": self.version, "sha256": self.sha256, "status": status}


# ---------------------------------------------------------------------------------------------- select


def select_artifacts(recipe: str | None, artifact_dirs: Iterable[str], root: Path | None = None) -> list[Path]:
    """--artifact DIR…, else the latest artifact of --recipe R, else the latest of every recipe in the store."""
    root = root or artifacts.artifacts_root()
    dirs = [Path(d) for d in artifact_dirs]
    if dirs and recipe:
        raise InputError("give --recipe R or --artifact DIR, not both; fix: drop one of them")
    if dirs:
        return dirs
    if recipe:
        if not RECIPE_NAME.fullmatch(recipe):
            raise InputError(f"--recipe {recipe!r}: not a recipe name; fix: a name from `invoke recipes`, "
                             "or --artifact DIR for an artifact folder")
        found = artifacts.latest(recipe, root)
        if found is None:
            raise InputError(f"no artifact of {recipe} in {root}/; fix: invoke build --recipe {recipe}")
        return [found]
    latest = [artifacts.latest(d.name, root) for d in sorted(root.iterdir())
              if d.is_dir() and RECIPE_NAME.fullmatch(d.name) and d.name != "failures"] if root.is_dir() else []
    found = [p for p in latest if p is not None]
    if not found:
        raise InputError(f"no artifacts in {root}/; fix: invoke build --recipe R first, or give --artifact DIR")
    return found


# ---------------------------------------------------------------------------------------------- check


FIX_ARTIFACT = "fix: publish artifact folders as `invoke build` wrote them"


def _open_plain(path: Path, what: str):
    """A regular file opened for reading, never through a symlink (which could publish any file of this
    host) nor a FIFO or device (which could hang or stream forever)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found; {FIX_ARTIFACT}") from None
    except OSError as e:
        why = "a symlink" if path.is_symlink() else e.strerror
        raise InputError(f"{path}: {what} is {why}, not a plain file; {FIX_ARTIFACT}") from None
    fh = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        fh.close()
        raise InputError(f"{path}: {what} is not a plain file; {FIX_ARTIFACT}")
    return fh


def wheel_metadata(path: Path, fh=None) -> bytes:
    """The METADATA of a wheel (the one .dist-info folder at the top), size-limited."""
    try:
        with zipfile.ZipFile(fh or path) as zf:
            names = [i for i in zf.infolist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", i.filename)]
            if len(names) != 1:
                raise InputError(f"{path}: a wheel has one .dist-info/METADATA, this has {len(names)}; "
                                 "fix: rebuild it (invoke build)")
            if names[0].file_size > MAX_METADATA_BYTES:
                raise InputError(f"{path}: METADATA is larger than {MAX_METADATA_BYTES >> 20} MiB; "
                                 "fix: rebuild it (invoke build)")
            return zf.read(names[0])
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, RuntimeError, ValueError) as e:
        raise InputError(f"{path}: not a readable wheel (zip: {e}); fix: rebuild it (invoke build)") from None


def load_wheels(artifact: Path) -> list[Wheel]:
    """The wheels of one artifact folder, each checked against its manifest (see the module doc)."""
    manifest_path = artifact / "manifest.json"
    with _open_plain(manifest_path, "manifest.json") as fh:
        raw = fh.read(MAX_MANIFEST_BYTES + 1)
    if len(raw) > MAX_MANIFEST_BYTES:
        raise InputError(f"{manifest_path}: larger than {MAX_MANIFEST_BYTES >> 20} MiB; {FIX_ARTIFACT}")
    try:
        manifest = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{manifest_path}: not JSON ({e}); {FIX_ARTIFACT}") from None
    entries = manifest.get("wheels") if isinstance(manifest, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{manifest_path}: lists no wheels; {FIX_ARTIFACT}")
    recipe = manifest.get("recipe")
    if not isinstance(recipe, str) or not RECIPE_NAME.fullmatch(recipe):
        recipe = artifact.resolve().parent.name
    wheels = []
    for entry in entries:
        file = entry.get("file") if isinstance(entry, dict) else None
        expected = entry.get("sha256") if isinstance(entry, dict) else None
        if not isinstance(file, str) or not isinstance(expected, str) or not re.fullmatch(r"[0-9a-f]{64}", expected):
            raise InputError(f"{manifest_path}: a wheels entry lacks file or sha256; {FIX_ARTIFACT}")
        if "/" in file or "\\" in file or file.startswith(".") or "\0" in file:
            raise InputError(f"{manifest_path}: wheel file {file!r} is not a plain file name in the artifact "
                             f"folder; {FIX_ARTIFACT}")
        try:
            name, version, _build, _tags = parse_wheel_filename(file)
        except (InvalidWheelFilename, InvalidVersion) as e:
            raise InputError(f"{manifest_path}: {file!r} is not a wheel file name ({e}); "
                             f"{FIX_ARTIFACT}") from None
        path = artifact / file
        with _open_plain(path, "the wheel its manifest names") as fh:
            h = hashlib.sha256()
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
            actual = h.hexdigest()
            if actual != expected:
                raise InputError(f"{path}: sha256 {actual[:12]}… does not match its manifest ({expected[:12]}…): "
                                 "the file changed after the build; fix: rebuild it "
                                 f"(invoke build --recipe {recipe})")
            fh.seek(0)
            metadata = wheel_metadata(path, fh)
        meta, _ = parse_email(metadata)
        meta_name, meta_version = meta.get("name"), meta.get("version")
        try:
            agrees = (canonicalize_name(meta_name or "") == name and Version(meta_version or "") == version)
        except InvalidVersion:
            agrees = False
        if not agrees:
            raise InputError(f"{path}: METADATA says {meta_name} {meta_version}, the file name {name} {version}; "
                             "pip refuses such a wheel; fix: rebuild it (invoke build)")
        requires_python = meta.get("requires_python")
        if requires_python:
            try:
                SpecifierSet(requires_python)
            except InvalidSpecifier:
                raise InputError(f"{path}: Requires-Python {requires_python!r} is not a version specifier; "
                                 "fix: correct python_requires and rebuild") from None
        wheels.append(Wheel(recipe=recipe, artifact=artifact, path=path, project=name, version=str(version),
                            sha256=actual, requires_python=requires_python or None, metadata=metadata,
                            manifest=raw))
    return wheels


def check_selection(wheels: list[Wheel]) -> list[Wheel]:
    """One wheel per file name: the same file from two artifacts once, different contents refused."""
    by_name: dict[str, Wheel] = {}
    for w in wheels:
        other = by_name.get(w.filename)
        if other is None:
            by_name[w.filename] = w
        elif other.sha256 != w.sha256:
            raise InputError(f"{w.filename}: {other.artifact} and {w.artifact} both make it with different "
                             "contents, and an index holds one file per name; fix: publish one of them, or give "
                             "the recipes distinct versions (framework.version)")
    return list(by_name.values())


def conflict(w: Wheel, where: str, their_sha: str | None) -> PublishError:
    held = f"with sha256 {their_sha[:12]}…" if their_sha else "without a hash"
    return PublishError(f"{where} already holds {w.filename} {held}, not this build's {w.sha256[:12]}… "
                        f"({w.artifact}); fix: remove that file from the index, or build a distinct version "
                        "(framework.version)")


# ---------------------------------------------------------------------------------------------- folder


def _write_bytes_atomic(path: Path, data: bytes) -> bool:
    """Write unless the file already holds exactly these bytes; readable by a web server. True if written."""
    with contextlib.suppress(OSError):
        if path.read_bytes() == data:
            return False
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


def _copy_checked(src: Path, dest: Path, sha256: str) -> None:
    """Copy into the index through a temporary file whose own hash must be the manifest's (the source
    may change between the check and the copy)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, _open_plain(src, "the wheel") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
                out.write(chunk)
        if h.hexdigest() != sha256:
            raise InputError(f"{src}: changed while being published (sha256 {h.hexdigest()[:12]}…, manifest "
                             f"{sha256[:12]}…); fix: rebuild it and publish again")
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _folder_lock(index: Path) -> Iterator[None]:
    with open(index / ".publish.lock", "a") as fh:  # "a": no truncation, the lock file stays as it is
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


PAGE_HEAD = ('<!DOCTYPE html>\n<html>\n<head>\n<meta name="pypi:repository-version" content="1.0">\n'
             "<title>{title}</title>\n</head>\n<body>\n<h1>{title}</h1>\n")
PAGE_TAIL = "</body>\n</html>\n"


def project_page(project: str, files_dir: Path) -> str:
    """The PEP 503 page of one project from the wheels in files/<project>/ (hash, Requires-Python and
    PEP 658 metadata hash of each)."""
    links = []
    for wheel in sorted(files_dir.glob("*.whl")):
        meta_path = wheel.with_name(wheel.name + ".metadata")
        if not meta_path.is_file():  # a wheel put there by hand
            _write_bytes_atomic(meta_path, wheel_metadata(wheel))
        metadata = meta_path.read_bytes()
        requires_python = parse_email(metadata)[0].get("requires_python")
        meta_sha = hashlib.sha256(metadata).hexdigest()
        href = f"../../files/{project}/{wheel.name}#sha256={artifacts.sha256_of(wheel)}"
        attrs = [f'href="{html.escape(href)}"']
        if requires_python:
            attrs.append(f'data-requires-python="{html.escape(requires_python)}"')
        attrs += [f'data-dist-info-metadata="sha256={meta_sha}"', f'data-core-metadata="sha256={meta_sha}"']
        links.append(f"<a {' '.join(attrs)}>{html.escape(wheel.name)}</a><br>\n")
    title = f"Links for {html.escape(project)}"
    return PAGE_HEAD.format(title=title) + "".join(links) + PAGE_TAIL


def root_page(files_root: Path) -> str:
    projects = sorted(d.name for d in files_root.iterdir() if d.is_dir() and any(d.glob("*.whl"))) \
        if files_root.is_dir() else []
    links = "".join(f'<a href="{html.escape(p)}/">{html.escape(p)}</a><br>\n' for p in projects)
    return PAGE_HEAD.format(title="Simple index") + links + PAGE_TAIL


def publish_to_folder(wheels: list[Wheel], index: Path) -> list[dict]:
    if index.exists() and not index.is_dir():
        raise InputError(f"--to {index}: is a file, not a folder; fix: give a folder for the index")
    try:
        index.mkdir(parents=True, exist_ok=True)
        index.chmod(index.stat().st_mode | 0o755)
    except OSError as e:
        raise InputError(f"--to {index}: cannot make the index folder ({e.strerror}); fix: give a writable "
                         "folder") from None
    rows = []
    with _folder_lock(index):
        plan = []
        for w in wheels:  # every conflict before anything is written
            dest = index / "files" / w.project / w.filename
            held = artifacts.sha256_of(dest) if dest.is_file() else None
            if held is not None and held != w.sha256:
                raise conflict(w, str(index), held)
            plan.append((w, dest, held is None))
        for w, dest, new in plan:
            dest.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
            if new:
                _copy_checked(w.path, dest, w.sha256)
            _write_bytes_atomic(dest.with_name(dest.name + ".metadata"), w.metadata)
            manifest = dest.with_name(dest.name + ".manifest.json")
            if new or not manifest.exists():  # the first artifact that made this file stays its record
                _write_bytes_atomic(manifest, w.manifest)
            rows.append(w.row("added" if new else "unchanged"))
        for project in sorted({w.project for w in wheels}):
            page = index / "simple" / project / "index.html"
            page.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
            _write_bytes_atomic(page, project_page(project, index / "files" / project).encode())
        _write_bytes_atomic(index / "simple" / "index.html", root_page(index / "files").encode())
    return rows


# ---------------------------------------------------------------------------------------------- server


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
        parts = urlsplit(url)
        if not parts.hostname:
            raise InputError(f"--to {mask_url(url)}: names no host; fix: http://HOST:PORT/ (pypiserver) or "
                             "http://HOST:PORT/USER/INDEX/ (devpi)")
        netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        try:
            port = parts.port
        except ValueError:
            raise InputError(f"--to {mask_url(url)}: the port is not a number; fix: http://HOST:PORT/") from None
        netloc += f":{port}" if port else ""
        path = parts.path if parts.path.endswith("/") else parts.path + "/"
        clean = urlunsplit((parts.scheme, netloc, path, "", ""))
        username, password = unquote(parts.username or "") or None, unquote(parts.password or "") or None
        if username is None:
            username = environ.get("BUILDCTL_PUBLISH_USERNAME") or None
            password = environ.get("BUILDCTL_PUBLISH_PASSWORD") or None
        if username is None:
            import requests.utils

            auth = requests.utils.get_netrc_auth(clean)
            if auth:
                username, password = auth
        return Server(clean, username, password)


def _masker(server_url: str, server: Server | None, environ: Mapping[str, str]) -> Masker:
    secrets = secret_values_from_env(environ) | url_secrets(server_url)
    if server is not None and server.password:
        secrets.add(server.password)
    return Masker(secrets)


def publish_to_server(wheels: list[Wheel], url: str, environ: Mapping[str, str] | None = None) -> tuple[list[dict], str]:
    """Upload with twine, checked before and after against the server's simple pages. Returns the rows
    and the simple index URL pip should use (without credentials)."""
    import requests

    env = os.environ if environ is None else environ
    server = Server.from_url(url, env)
    masker = _masker(url, server, env)
    shown = mask_url(server.url)
    session = requests.Session()
    if server.username is not None:
        session.auth = (server.username, server.password or "")

    def get(page_url: str) -> requests.Response:
        try:
            return session.get(page_url, allow_redirects=False, timeout=HTTP_TIMEOUT)
        except requests.RequestException as e:
            raise PublishError(masker(f"cannot reach the index server at {shown}: {_first_line(e)}; fix: start "
                                      "it, or check --to")) from None

    def refused(resp: requests.Response, doing: str) -> PublishError:
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
        _twine_upload(server, [w.path for w in todo], masker, shown)
    for w in todo:
        held = listed(w.project).get(w.filename, "missing")
        if held != w.sha256:
            state = "does not list it" if held == "missing" else f"lists it with sha256 {str(held)[:12]}…"
            raise PublishError(f"uploaded {w.filename} to {shown}, but its simple page {state}; fix: check the "
                               "server's log and storage")
        rows.append(w.row("added"))
    return rows, simple


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or e.__class__.__name__
    return text.splitlines()[0][:300]


def _twine_upload(server: Server, paths: list[Path], masker: Masker, shown: str) -> None:
    """twine's upload API, quiet (its console and log are captured: --json keeps stdout clean)."""
    import requests
    from twine import exceptions as twine_errors
    from twine import settings as twine_settings
    from twine.commands import upload as twine_upload

    settings = twine_settings.Settings(
        repository_url=server.url, username=server.username or "", password=server.password or "",
        non_interactive=True, disable_progress_bar=True, config_file=os.devnull,
        cacert=os.environ.get("REQUESTS_CA_BUNDLE") or None)
    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    twine_log = logging.getLogger("twine")
    twine_log.addHandler(handler)
    propagate, twine_log.propagate = twine_log.propagate, False
    try:
        with contextlib.redirect_stdout(captured):
            twine_upload.upload(settings, [str(p) for p in paths])
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


# ---------------------------------------------------------------------------------------------- entry


def publish(to: str, *, recipe: str | None = None, artifact_dirs: Iterable[str] = (), root: Path | None = None,
            environ: Mapping[str, str] | None = None) -> dict:
    """Check the selected artifacts, then publish their wheels to `to` (a folder or an http(s) URL)."""
    if not to:
        raise InputError("--to is required; fix: --to FOLDER (a static index) or --to http://HOST:PORT/ "
                         "(an index server's upload URL) [BUILDCTL_PUBLISH_TO]")
    scheme = urlsplit(to).scheme.lower() if "://" in to else ""
    if scheme and scheme not in ("http", "https"):
        raise InputError(f"--to {mask_url(to)}: {scheme}:// is not a destination; fix: a folder path, or an "
                         "http(s):// upload URL")
    wheels = check_selection([w for d in select_artifacts(recipe, artifact_dirs, root) for w in load_wheels(d)])
    if scheme:
        rows, simple = publish_to_server(wheels, to, environ)
        return {"to": mask_url(to), "kind": "server", "index_url": simple, "wheels": rows}
    index = Path(to).expanduser()
    rows = publish_to_folder(wheels, index)
    return {"to": str(index), "kind": "folder", "index_url": None, "simple_dir": str(index / "simple"),
            "wheels": rows}
