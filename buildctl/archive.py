"""Extraction of untrusted tar archives: outputs copied out of containers, repro bundles, their sources.

tarfile only parses the headers here; its extraction, `filter="data"` included, is not used. On Pythons
before 3.11.13 / 3.12.11 / 3.13.4 (3.11.7 on the reference host) the filter is bypassed by chains of
symlinks whose expansion outgrows PATH_MAX (CVE-2025-4517 and relatives), and the archive then writes
any file the user can write. `extract` accepts regular files and folders strictly inside the
destination and nothing else (no links of any kind, devices, fifos, absolute or `..` paths, names with
control characters), under caps on bytes, members and single-file size. It writes every file itself
with O_CREAT|O_EXCL|O_NOFOLLOW below folder descriptors opened with O_NOFOLLOW, into a fresh folder
beside the destination that replaces the destination only once the whole archive was accepted: a
refusal leaves nothing behind.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from buildctl.errors import InputError

MAX_DEPTH = 64  # folders below the destination
MAX_NAME = 4096  # characters in a member name
MAX_META = 1 << 20  # bytes of one PAX or GNU long-name header (tarfile reads them into memory)
_HEADER_ALLOWANCE = 16 << 10  # archive bytes per member beyond its data: headers, PAX records, padding
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_O_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_KINDS = {tarfile.SYMTYPE: "a symbolic link", tarfile.LNKTYPE: "a hard link", tarfile.CHRTYPE: "a character device",
          tarfile.BLKTYPE: "a block device", tarfile.FIFOTYPE: "a fifo", tarfile.GNUTYPE_SPARSE: "a sparse file"}


@dataclass(frozen=True)
class Caps:
    """Most bytes of file data in all, most members, most bytes of one file."""

    total_bytes: int = 1 << 30
    members: int = 100_000
    file_bytes: int = 512 << 20


class _Refused(Exception):
    def __init__(self, problem: str, member: str | None = None):
        super().__init__(problem)
        self.problem, self.member = problem, member


def extract(source: Path | BinaryIO, dest: Path, *, what: str, fix: str, caps: Caps = Caps(),
            strip: str | None = None) -> None:
    """Unpack the tar (or tar.gz) `source` so that `dest` holds exactly its files and folders.

    `source` is a path or a readable binary stream (read once, front to back). `strip`: the one top
    folder every member must be in, left out of the paths (a `docker cp` archive of a folder).
    `dest` is replaced as a whole (a folder already there included) once every member was accepted.
    Anything else raises InputError "<what>: member '<name>': <problem>; fix: <fix>", and nothing is
    written. `what` names the archive, `fix` says what its producer must change.
    """
    dest = Path(dest)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.extract-", dir=dest.parent))
    try:
        if isinstance(source, (str, Path)):
            with open(source, "rb") as f:
                _unpack(f, tmp, caps, strip)
        else:
            _unpack(source, tmp, caps, strip)
        _replace(tmp, dest)
    except _Refused as r:
        shutil.rmtree(tmp, ignore_errors=True)
        member = f"member {_show(r.member)}: " if r.member is not None else ""
        raise InputError(f"{what}: {member}{r.problem}; fix: {fix}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _show(name: str) -> str:
    text = repr(name)  # control characters come out escaped
    return text if len(text) <= 160 else text[:150] + "…" + text[-8:]


class _Header(tarfile.TarInfo):
    """A TarInfo that refuses oversized metadata headers and GNU sparse files before tarfile reads them."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        meta = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
                tarfile.GNUTYPE_LONGLINK)
        if self.type in meta and self.size > MAX_META:
            raise _Refused(f"a {self.size}-byte metadata header (the most is {MAX_META})", self.name)
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise _Refused("a sparse file", self.name)
        return super()._proc_member(tarfile_)


class _Capped(io.RawIOBase):
    """The archive's (uncompressed) bytes, refused past `limit`: a bomb stops here, not on the disk."""

    def __init__(self, raw: BinaryIO, limit: int):
        self._raw, self._limit, self.count = raw, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        n = self._raw.readinto(b)  # type: ignore[attr-defined]
        self.count += n or 0
        if self.count > self._limit:
            raise _Refused(f"more than {self._limit} bytes of archive data")
        return n or 0


def _unpack(raw: BinaryIO, root: Path, caps: Caps, strip: str | None) -> None:
    buffered = io.BufferedReader(raw if isinstance(raw, io.RawIOBase) else _Raw(raw), 1 << 20)
    stream: BinaryIO = gzip.GzipFile(fileobj=buffered) if buffered.peek(2)[:2] == b"\x1f\x8b" else buffered
    capped = io.BufferedReader(_Capped(stream, caps.total_bytes + (caps.members + 1) * _HEADER_ALLOWANCE), 1 << 20)
    root_fd = os.open(root, _O_DIR)
    parent: tuple[tuple[str, ...], int] | None = None  # the last file's folder, kept open
    try:
        with tarfile.open(fileobj=capped, mode="r|", tarinfo=_Header) as tf:
            count = total = 0
            for member in tf:
                count += 1
                if count > caps.members:
                    raise _Refused(f"more than {caps.members} members")
                parts = _parts(member.name, strip)
                if parts is None:
                    if member.isdir():
                        continue
                    raise _Refused("a file where the top folder should be", member.name)
                if member.isdir():
                    os.close(_open_dir(root_fd, parts, member.name))
                    continue
                if not member.isreg() or member.issparse():
                    kind = _KINDS.get(member.type, f"an entry of tar type {member.type!r}")
                    link = f" to {_show(member.linkname)}" if member.type in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
                    raise _Refused(f"{kind}{link} (only regular files and folders are accepted)", member.name)
                if member.size > caps.file_bytes:
                    raise _Refused(f"{member.size} bytes, over the {caps.file_bytes}-byte cap for one file",
                                   member.name)
                total += member.size
                if total > caps.total_bytes:
                    raise _Refused(f"takes the archive past its {caps.total_bytes}-byte cap", member.name)
                folder = tuple(parts[:-1])
                if parent is None or parent[0] != folder:
                    if parent is not None:
                        os.close(parent[1])
                        parent = None
                    parent = (folder, _open_dir(root_fd, folder, member.name))
                _write(tf, member, parent[1], parts[-1])
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise _Refused(f"not a valid tar archive ({' '.join(str(e).split())[:200]})") from None
    finally:
        if parent is not None:
            os.close(parent[1])
        os.close(root_fd)


class _Raw(io.RawIOBase):
    """A raw reader over any binary file object (BufferedReader wants one)."""

    def __init__(self, f: BinaryIO):
        self._f = f

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        data = self._f.read(len(b))
        b[: len(data)] = data
        return len(data)


def _parts(name: str, strip: str | None) -> list[str] | None:
    """The member's path below the destination, or None for the destination itself."""
    if not name:
        raise _Refused("an empty name", name)
    if len(name) > MAX_NAME:
        raise _Refused(f"a name longer than {MAX_NAME} characters", name)
    bad = next((c for c in name if not c.isprintable()), None)
    if bad is not None:
        raise _Refused(f"a control character {bad!r} in its name", name)
    if name.startswith("/"):
        raise _Refused("an absolute path", name)
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _Refused("a '..' component in its path", name)
    if strip is not None:
        if not parts or parts[0] != strip:
            raise _Refused(f"outside the archive's top folder {strip!r}", name)
        parts = parts[1:]
    if any(len(os.fsencode(p)) > 255 for p in parts):
        raise _Refused("a path component longer than 255 bytes", name)
    if len(parts) > MAX_DEPTH:
        raise _Refused(f"more than {MAX_DEPTH} folders deep", name)
    return parts or None


def _open_dir(root_fd: int, parts: tuple[str, ...] | list[str], member: str) -> int:
    """A descriptor of root/parts, the folders made as needed; a symlink on the way is never followed."""
    fd = os.dup(root_fd)
    try:
        for p in parts:
            try:
                os.mkdir(p, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                new = os.open(p, _O_DIR, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ENOTDIR, errno.ELOOP):
                    raise _Refused(f"a folder {p!r} on its path is a file of the archive", member) from None
                raise
            os.close(fd)
            fd = new
    except BaseException:
        os.close(fd)
        raise
    return fd


def _mode(member: tarfile.TarInfo) -> int:
    """The member's permissions as tarfile's "data" filter keeps them: no setuid/setgid/sticky, no
    group/other write, executable only if the owner may run it, owner read+write. (A private pip.conf
    stays 0600, and a rebuilt image's COPY layers hash as they did where the bundle was made.)"""
    mode = member.mode & 0o755
    if not mode & 0o100:
        mode &= ~0o111
    return mode | 0o600


def _write(tf: tarfile.TarFile, member: tarfile.TarInfo, dir_fd: int, name: str) -> None:
    try:
        fd = os.open(name, _O_NEW_FILE, 0o600, dir_fd=dir_fd)
    except FileExistsError:
        raise _Refused("a second entry of the same path", member.name) from None
    os.fchmod(fd, _mode(member))  # exactly, whatever the umask
    with os.fdopen(fd, "wb") as out:
        src = tf.extractfile(member)
        assert src is not None  # a regular file
        left = member.size
        while left:
            chunk = src.read(min(left, 1 << 20))
            if not chunk:
                raise _Refused("the archive ends inside this file", member.name)
            out.write(chunk)
            left -= len(chunk)
        out.flush()
        if 0 <= member.mtime < 1 << 34:
            ns = int(member.mtime * 1_000_000_000)
            os.utime(out.fileno(), ns=(ns, ns))


def _replace(tmp: Path, dest: Path) -> None:
    """Put `tmp` where `dest` is: one rename when dest is absent or an empty folder, else a swap."""
    try:
        mode = stat.S_IMODE(os.lstat(dest).st_mode)
    except FileNotFoundError:
        mode = None
    if mode is not None:
        os.chmod(tmp, mode)
    try:
        os.rename(tmp, dest)
        return
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
    os.rename(dest, old)
    try:
        os.rename(tmp, dest)
    except BaseException:
        os.rename(old, dest)
        raise
    shutil.rmtree(old, ignore_errors=True)
