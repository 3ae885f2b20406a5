"""A local source tree (framework.source.path), snapshotted once at the key: the members the declared rule
keeps are read once, into a tar in the build's own folder and into the key's digest from the same bytes;
the configure and the compile containers are sent that tar, never the live folder, so an edit made after
the key was taken reaches neither the wheel nor the key.

The rule (`rule`, shown by `invoke show` and `--dry-run`): in a git work tree, what git tracks plus the
untracked files it does not ignore (`git ls-files --cached --others --exclude-standard`); elsewhere every
file, link and folder. Each member is keyed by its name's bytes (any name, UTF-8 or not), its kind
(folder, empty ones too; file with its executable bits and contents; link with its target, never followed).
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import tarfile
from pathlib import Path

from buildctl.errors import InputError
from buildctl.secrets import checked_argv

GIT_RULE = "what git tracks plus the untracked files it does not ignore (git ls-files --cached --others " \
           "--exclude-standard)"
ALL_RULE = "every file, link and folder (not a git work tree)"
_CHUNK = 1 << 20


def _git_members(root: Path) -> list[bytes] | None:
    """The members git lists in `root` (relative, as bytes), or None when `root` is not in a git work tree.
    git inherits this process's environment (HOME's configuration, PATH): a local command, it asks no server,
    so nothing of the environment is given or changed here."""
    try:
        inside = subprocess.run(checked_argv(["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"]),
                                capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
        if inside.returncode != 0 or inside.stdout.strip() != b"true":
            return None
        done = subprocess.run(checked_argv(["git", "-C", str(root), "-c", "core.quotePath=false", "ls-files", "-z",
                                            "--cached", "--others", "--exclude-standard", "--", "."]),
                              capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [name for name in done.stdout.split(b"\0") if name]


def rule(root: Path) -> str:
    """The declared rule of what a local source sends and keys, for this tree."""
    return GIT_RULE if _git_members(root) is not None else ALL_RULE


def members(root: Path) -> list[bytes]:
    """The tree's members by the rule, sorted, relative and '/'-separated as bytes; a listed folder's parents
    are members too (git lists files only: their folders travel with them)."""
    broot = os.fsencode(root)
    listed = _git_members(root)
    out: set[bytes] = set()
    if listed is None:
        for dirpath, dirnames, filenames in os.walk(broot):
            base = os.path.relpath(dirpath, broot)
            prefix = b"" if base == b"." else base + b"/"
            for name in dirnames:  # links to folders are members (as links), never entered
                out.add(prefix + name)
            out.update(prefix + name for name in filenames)
        return sorted(out)
    for rel in listed:
        if not os.path.lexists(os.path.join(broot, rel)):
            continue  # tracked, deleted in the work tree: not sent
        parts = rel.split(b"/")
        out.update(b"/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return sorted(out)


class _Hashing:
    """A file object that hashes what is read through it (the tar's bytes are the key's)."""

    def __init__(self, fh, h) -> None:
        self.fh, self.h = fh, h

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        self.h.update(data)
        return data


def _walk(root: Path, tar: tarfile.TarFile | None) -> str:
    """The tree's digest over its members by the rule; each member also added to `tar` when given, from
    the same read."""
    broot = os.fsencode(root)
    h = hashlib.sha256()
    for rel in members(root):
        full = os.path.join(broot, rel)
        try:
            st = os.lstat(full)
        except OSError as e:
            raise InputError(f"local source {root}: {os.fsdecode(rel)} vanished while it was read "
                             f"({e.__class__.__name__}); fix: build again when the tree is quiet") from None
        name = os.fsdecode(rel)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(full)
            h.update(rel + b"\0link\0" + target + b"\0")
            if tar is not None:
                ti = _info(name, st, tarfile.SYMTYPE)
                ti.linkname = os.fsdecode(target)
                tar.addfile(ti)
        elif stat.S_ISDIR(st.st_mode):
            h.update(rel + b"\0dir\0")
            if tar is not None:
                tar.addfile(_info(name, st, tarfile.DIRTYPE))
        elif stat.S_ISREG(st.st_mode):
            h.update(rel + b"\0" + oct(st.st_mode & 0o111).encode() + b"\0")
            content = hashlib.sha256()
            with open(full, "rb") as fh:
                if tar is not None:
                    ti = _info(name, st, tarfile.REGTYPE)
                    ti.size = st.st_size
                    tar.addfile(ti, _Hashing(fh, content))
                    if fh.read(1):
                        raise InputError(f"local source {root}: {name} grew while it was snapshotted; fix: build "
                                         "again when the tree is quiet")
                else:
                    for block in iter(lambda: fh.read(_CHUNK), b""):
                        content.update(block)
            h.update(content.digest())
        # sockets, fifos, devices: nothing a build reads; neither sent nor keyed
    return h.hexdigest()


def _info(name: str, st: os.stat_result, kind: bytes) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = stat.S_IMODE(st.st_mode)
    # mtimes to the nanosecond (PAX): make and ninja see an unchanged source as unchanged across builds
    ns = st.st_mtime_ns
    ti.mtime = ns // 1_000_000_000
    ti.pax_headers = {"mtime": f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"}
    return ti


def digest(root: Path) -> str:
    """The tree's digest as the key takes it, without a snapshot (`--dry-run`, the no-op memo)."""
    return _walk(root, None)


def snapshot(root: Path, dest: Path) -> str:
    """Tar the tree's members into `dest` (once) and answer their digest, from the same bytes."""
    if not root.is_dir():
        raise InputError(f"local source {root}: not a folder; fix: framework.source.path names the source tree "
                         "(relative to the recipe file)")
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT, errors="surrogateescape") as tar:
        return _walk(root, tar)
