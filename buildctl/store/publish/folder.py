"""Publishing to a folder: the wheels and their metadata and manifests under files/, the PEP 503 pages under
simple/ regenerated from them (an unchanged page is not rewritten), under a lock on the folder."""


from __future__ import annotations

import contextlib
import fcntl
import hashlib
import html
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from packaging.metadata import parse_email

from buildctl.errors import InputError
from buildctl.store import artifacts
from buildctl.store.publish.wheels import Wheel, conflict, open_plain, wheel_metadata


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
        with os.fdopen(fd, "wb") as out, open_plain(src, "the wheel") as fh:
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
        # percent-encoded as RFC 3986 paths want: pip reads the href as a URL, not as a file name
        href = f"../../files/{quote(project)}/{quote(wheel.name)}#sha256={artifacts.sha256_of(wheel)}"
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
    links = "".join(f'<a href="{html.escape(quote(p))}/">{html.escape(p)}</a><br>\n' for p in projects)
    return PAGE_HEAD.format(title="Simple index") + links + PAGE_TAIL


def publish_to_folder(wheels: list[Wheel], index: Path) -> list[dict]:
    if index.exists() and not index.is_dir():
        raise InputError(f"--to {index}: is a file, not a folder; fix: give a folder for the index")
    try:
        if not index.is_dir():  # made here: readable by a web server; a folder of the user's keeps its mode
            index.mkdir(parents=True)
            index.chmod(0o755)
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
