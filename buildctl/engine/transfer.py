"""Files into and out of a container: inputs streamed in as PAX tar (owner set, mtimes kept to the
nanosecond), credentials as a 0600 file, outputs copied out as untrusted archives (archive.extract).
Copying instead of bind-mounting host paths keeps remote engines (tcp://, ssh://) working."""

from __future__ import annotations

import contextlib
import io
import os
import queue
import tarfile
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
from docker import errors as derr

from buildctl import archive
from buildctl.engine.failures import one_line
from buildctl.engine.snapshot import Snapshot
from buildctl.errors import EngineError
from buildctl.secrets import Credentials

# Outputs copied out of a container: a wheel is GBs (PyTorch with CUDA: 1-3 GB), the rest is small.
OUTPUT_CAPS = archive.Caps(total_bytes=32 << 30, members=10_000, file_bytes=16 << 30)
# What closes a tar: two zero blocks. tarfile pads on to a 10 KiB record after them, and nothing past them
# is sent: Podman's copier stops reading there, and a body still being written breaks its pipe, a 500
# "passing bulk input to subprocess: write |1: broken pipe" (buildah#6573).
_END_OF_ARCHIVE = 2 * tarfile.BLOCKSIZE


def put_credentials(client: docker.DockerClient, cid: str, credentials: Credentials, owner: tuple[int, int]) -> None:
    """The credentials as /run/buildctl-secrets (mode 0600) in a created, not yet started, container."""
    data = credentials.payload().encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("run/buildctl-secrets")
        info.size, info.mode = len(data), 0o600
        info.uid, info.gid = owner
        tf.addfile(info, io.BytesIO(data))
        end = tf.offset + _END_OF_ARCHIVE
    client.api.put_archive(cid, "/", buf.getvalue()[:end])


def owner_of(user: str | None) -> tuple[int, int]:
    """uid/gid that copied-in files get: the container's numeric user, else root."""
    if user:
        uid, _, gid = user.partition(":")
        if uid.isdigit():
            return int(uid), int(gid) if gid.isdigit() else int(uid)
    return 0, 0


class _Aborted(Exception):
    pass


@dataclass(frozen=True)
class Tree:
    """A folder input of which only the members `keep(relative path, is_dir)` accepts are sent (a local
    source: exactly the files its key is computed from)."""

    path: Path
    keep: Callable[[str, bool], bool]


def snapshot_chunks(snapshot: Snapshot, arcname: str, owner: tuple[int, int]) -> Iterator[bytes]:
    """The snapshot as a tar stream under `arcname` (the container's path, without its leading /), owned by
    `owner`: read from the snapshot only, one member at a time."""
    chunks: list[bytes] = []

    class Out:
        def write(self, b: bytes) -> int:
            chunks.append(bytes(b))
            return len(b)

    top = tarfile.TarInfo(arcname)
    top.type, top.mode, (top.uid, top.gid) = tarfile.DIRTYPE, 0o755, owner
    with tarfile.open(snapshot.path, "r:", errors="surrogateescape") as src, \
            tarfile.open(fileobj=Out(), mode="w|", format=tarfile.PAX_FORMAT, errors="surrogateescape") as out:
        out.addfile(top)
        for ti in src:
            fh = src.extractfile(ti) if ti.isreg() else None
            ti.name = f"{arcname}/{ti.name}"
            # the names are written again from .name and .linkname (a PAX path header would keep the old one)
            ti.pax_headers = {k: v for k, v in ti.pax_headers.items() if k not in ("path", "linkpath")}
            ti.uid, ti.gid = owner
            ti.uname = ti.gname = ""
            out.addfile(ti, fh)
            yield from chunks
            chunks.clear()
    yield from chunks


def _tar_chunks(src: Path, arcname: str, owner: tuple[int, int],
                keep: Callable[[str, bool], bool] | None = None) -> Iterator[bytes]:
    """A PAX tar of `src` (as `arcname`) produced in a thread and streamed: no temp copy on disk.

    File mtimes are kept to the nanosecond, so that make/ninja see unchanged sources as unchanged.
    """
    q: queue.Queue[Any] = queue.Queue(maxsize=8)
    stop = threading.Event()
    done = object()

    def put(item: Any) -> None:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.2)
                return
            except queue.Full:
                continue
        raise _Aborted

    class Writer:
        written = 0
        end: int | None = None  # set once the last member is in: the record padding after it is dropped

        def write(self, b: bytes) -> int:
            kept = b if self.end is None else b[: max(0, self.end - self.written)]
            self.written += len(kept)
            if kept:
                put(bytes(kept))
            return len(b)

    def set_owner(ti: tarfile.TarInfo) -> tarfile.TarInfo | None:
        rel = ti.name[len(arcname) + 1 :] if ti.name != arcname else ""
        if keep is not None and rel and not keep(rel, ti.isdir()):
            return None  # (a folder left out is not entered)
        ti.uid, ti.gid = owner
        ti.uname = ti.gname = ""
        # tarfile writes float mtimes (about 100 ns off); PAX carries the exact nanoseconds.
        with contextlib.suppress(OSError):
            ns = os.lstat(src / rel if rel else src).st_mtime_ns
            ti.mtime = ns // 1_000_000_000
            ti.pax_headers = {**ti.pax_headers, "mtime": f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"}
        return ti

    def produce() -> None:
        try:
            writer = Writer()
            with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT, bufsize=1 << 20) as tf:
                tf.add(str(src), arcname=arcname, recursive=True, filter=set_owner)
                writer.end = tf.offset + _END_OF_ARCHIVE
            put(done)
        except _Aborted:
            pass
        except BaseException as e:  # reported to the consumer
            with contextlib.suppress(_Aborted):
                put(e)

    thread = threading.Thread(target=produce, name="buildctl-tar", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise EngineError(f"cannot read input {src}: {one_line(str(item), 200)}") from item
            yield item
    finally:
        stop.set()
        thread.join(timeout=5)


class _ChunkReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks (for tarfile's stream mode)."""

    def __init__(self, chunks: Iterable[bytes]):
        self._it = iter(chunks)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._it)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def put_input(
    client: docker.DockerClient, cid: str, container_path: str, host_path: Path | Tree | Snapshot,
    owner: tuple[int, int]
) -> None:
    """Copy `host_path` (a file, or a folder's contents, or a Tree's members) to `container_path` in a
    created container. A `host_path` that is itself a symlink is followed (the source's key is its target's
    contents; sent as a link, it would dangle in the container); links inside it are sent as links."""
    if isinstance(host_path, Snapshot):
        arcname = container_path.strip("/")
        if not arcname or ".." in Path(arcname).parts:
            raise EngineError(f"input destination {container_path!r} must be an absolute path below /")
        client.api.put_archive(cid, "/", snapshot_chunks(host_path, arcname, owner))
        return
    keep = host_path.keep if isinstance(host_path, Tree) else None
    host_path = Path(host_path.path if isinstance(host_path, Tree) else host_path)
    if host_path.is_symlink():
        host_path = host_path.resolve()
    if not host_path.exists():
        raise EngineError(f"input {host_path} (for {container_path} in the container) does not exist")
    arcname = container_path.strip("/")
    if not arcname or ".." in Path(arcname).parts:
        raise EngineError(f"input destination {container_path!r} must be an absolute path below /")
    # Extract at / with the destination's full path in the archive: the engine creates missing parents.
    client.api.put_archive(cid, "/", _tar_chunks(host_path, arcname, owner, keep))


def get_output(client: docker.DockerClient, cid: str, container_path: str, host_dir: Path) -> bool:
    """Replace `host_dir` with a copy of a container directory's contents (or of a file); False when
    it does not exist. What the container wrote is untrusted: anything but regular files and folders,
    or more than OUTPUT_CAPS, is refused (InputError) and nothing is written (archive.extract)."""
    try:
        chunks, stat = client.api.get_archive(cid, container_path)
    except derr.NotFound:
        return False
    host_dir = Path(host_dir)
    host_dir.parent.mkdir(parents=True, exist_ok=True)
    is_dir = bool(int(stat.get("mode", 0)) & (1 << 31))  # Go's os.ModeDir
    top = stat.get("name") or Path(container_path).name
    try:
        archive.extract(
            _ChunkReader(chunks), host_dir, caps=OUTPUT_CAPS, strip=top if is_dir else None,
            what=f"the output {container_path} of container {cid[:12]}",
            fix=f"write only regular files and folders into {container_path} (no links, devices or fifos), "
            "within the size caps",
        )
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:  # stop reading a refused stream (it may be a terabyte of zeros)
            close()
    return True
