"""The artifact store: artifacts/<recipe>/<key>/ with the wheel(s), manifest.json and build.log.

The key is content-addressed over everything that can change the output: the rendered Dockerfile
and build script (recipe + templates), the source (file contents, or git URL + ref, or tarball
sha256) and the base image id. Site settings (CA certs, proxies, mirrors) do not change the output
and are left out. Publishing is atomic (a temporary folder renamed into place) and builds of one
key serialise on a lock file, which names its holder (pid, host, start) and is given up on after a
timeout; a build that finds the artifact holds the lock shared while it reads and verifies it, so
`invoke clean` (which takes it exclusively) never removes an artifact a build is reading.

The artifacts root also names the namespace of the engine objects its builds create (image tags,
volumes, container labels), so that two roots, e.g. the user's and a test run's, never share a
build directory: `namespace()`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from buildctl import settings
from buildctl.errors import BuildctlError, InputError

if TYPE_CHECKING:  # the no-op's memo reads this module without the recipe schema
    from buildctl.recipe.schema import Spec

DEFAULT_ARTIFACTS_DIR = Path("artifacts")
DEFAULT_NAMESPACE = "default"
_NAMESPACE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?")
# Files of the rendered folder that decide the output (pip.conf, certs/, apt/ are site settings; the
# probe's files decide only how the output is checked).
KEYED_FILES = ("Dockerfile", "build.sh", "fetch.sh", "git-fetch.sh", "secrets.sh", "patch.sh", "frontend.py",
               "wheelnorm.py")
# ... and those only a recipe with extensions renders (keyed when there: other recipes keep their keys).
KEYED_WHEN_RENDERED = ("abi_check.py", "pin_requires.py")
SKIP_DIRS = {".git", "build", "dist", "__pycache__", ".eggs", ".pytest_cache"}


def source_digest(spec: Spec) -> str:
    src = spec.framework.source
    h = hashlib.sha256()
    if src.kind == "prebuilt":  # the base image's framework is keyed by the image; a wheel by its digest
        h.update(f"prebuilt {src.prebuilt if isinstance(src.prebuilt, str) else src.prebuilt.sha256}".encode())
    elif src.kind == "git":
        h.update(f"git {src.git} {src.ref} {src.submodules}".encode())
    elif src.kind == "tarball":
        h.update(f"tarball {src.tarball.sha256}".encode())
    else:
        return tree_digest(Path(src.path))
    return h.hexdigest()


def tree_digest(root: Path) -> str:
    """A local source folder's digest: each file's path, executable bits and contents."""
    h = hashlib.sha256()
    for path in sorted(_source_files(root)):
        rel = path.relative_to(root).as_posix()
        h.update(rel.encode() + b"\0" + oct(path.stat().st_mode & 0o111).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _source_files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for name in filenames:
            if not name.endswith((".pyc", ".so", ".whl")):
                yield Path(dirpath) / name


def artifact_key(files: dict[str, str], source: str, base_image_id: str) -> str:
    h = hashlib.sha256()
    for name in (*KEYED_FILES, *(n for n in KEYED_WHEN_RENDERED if n in files)):
        h.update(name.encode() + b"\0" + files.get(name, "").encode() + b"\0")
    h.update(f"source {source}\0base {base_image_id}".encode())
    return h.hexdigest()[:16]


def artifacts_root() -> Path:
    """The artifacts folder when a caller names none: BUILDCTL_ARTIFACTS, default artifacts/."""
    return settings.from_environment().artifacts


def artifact_dir(recipe: str, key: str, root: Path | None = None) -> Path:
    return (root or artifacts_root()) / recipe / key


def namespace(root: Path | None = None, explicit: str | None = None) -> str:
    """The namespace of the engine objects that builds into `root` create.

    BUILDCTL_NAMESPACE when set; else `default` for the default root (`artifacts/` of the current
    folder: today's names, so existing build directories and caches stay in use); else the root's
    folder name and a hash of its resolved path, e.g. `artifacts-ci-3f2a9c1b`.
    """
    explicit = (explicit if explicit is not None else settings.from_environment().namespace or "").strip()
    if explicit:
        if not _NAMESPACE.fullmatch(explicit):
            raise InputError(f"BUILDCTL_NAMESPACE={explicit!r} is not a namespace; fix: use 1-32 lowercase letters, "
                             "digits and inner dashes, e.g. ci-nightly")
        return explicit
    resolved = Path(root or artifacts_root()).resolve()
    if resolved == DEFAULT_ARTIFACTS_DIR.resolve():
        return DEFAULT_NAMESPACE
    stem = re.sub(r"[^a-z0-9]+", "-", resolved.name.lower()).strip("-")[:20].strip("-") or "root"
    return f"{stem}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:8]}"


def lookup(recipe: str, key: str, root: Path | None = None) -> Path | None:
    """The published artifact of (recipe, key), or None; finding it counts as a use (invoke clean)."""
    d = artifact_dir(recipe, key, root)
    if not (d / "manifest.json").is_file():
        return None
    record_use({"artifact": [f"{recipe}/{key}"]}, root)
    return d


def newest(recipe: str, root: Path | None = None) -> Path | None:
    """The most recently published artifact of a recipe, or None (not counted as a use). Never a staging
    folder (.tmp-*, which holds a manifest before it is published): pathlib's `*` matches dot-names."""
    base = (root or artifacts_root()) / recipe
    found = [p for p in base.glob("*/manifest.json") if not p.parent.name.startswith(".")] if base.is_dir() else []
    return max(found, key=lambda p: p.stat().st_mtime).parent if found else None


def latest(recipe: str, root: Path | None = None) -> Path | None:
    """The most recently published artifact of a recipe (a use, as for lookup)."""
    found = newest(recipe, root)
    if found is not None:
        record_use({"artifact": [f"{recipe}/{found.name}"]}, root)
    return found


# Last use, for `invoke clean`: one empty stamp file per object under <root>/.last-use/<kind>/, its
# mtime the last time buildctl used the object: every path that uses one stamps it (artifacts found or
# published; a build's base image, builder image and volumes, --until and resumed builds too; the
# images a verification or a replay runs, and their base images; a bundle replayed). Touching a file
# is atomic and needs no lock, so concurrent builds never lose each other's stamps; neither the engine
# (no last-use time for images or volumes, and labels cannot change) nor creation times (a cache used
# daily is old) can say this.
LAST_USE_DIR = ".last-use"
# The ids of images buildctl used under its own names (kind of record beside the stamps): an image whose
# name moved to a rebuild has no name left, and this record is what still says it is buildctl's.
OWN_IMAGE = "own-image"


def _stamp(root: Path | None, kind: str, name: str) -> Path:
    from urllib.parse import quote

    return (root or artifacts_root()) / LAST_USE_DIR / kind / quote(name, safe="").replace(".", "%2E")


def record_use(objects: dict[str, list[str]], root: Path | None = None) -> None:
    """Stamp {kind: [names]} as used now. Never fails a build: a read-only store just keeps no stamps."""
    for kind, names in objects.items():
        for name in names:
            path = _stamp(root, kind, name)
            try:
                if path.parent.parent.is_symlink() or path.parent.is_symlink():
                    return  # the stamps stay inside the root
                path.parent.mkdir(parents=True, exist_ok=True)
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644))
                os.utime(path, follow_symlinks=False)
            except OSError:
                pass


def record_images(client, refs, root: Path | None = None) -> None:
    """Stamp images (names or ids) as used now (record_inspected). Never fails the command: an image
    the engine cannot show is just not stamped."""
    inspected = []
    for ref in dict.fromkeys(refs):
        try:
            inspected.append(client.api.inspect_image(ref))
        except Exception:  # noqa: BLE001 - a stamp is a record for invoke clean, never a failure
            continue
    record_inspected(inspected, root)


def record_inspected(images, root: Path | None = None) -> None:
    """Stamp images, as the engine's inspections of them, as used now, by id: the stamp holds under any
    name the image has. Those that are buildctl's (engine.is_buildctl_image) are recorded as its own."""
    from buildctl.engine import is_buildctl_image

    ids = [info["Id"] for info in images]
    own = [info["Id"] for info in images
           if is_buildctl_image(info.get("RepoTags") or [], (info.get("Config") or {}).get("Labels"))]
    record_use({"image": ids, OWN_IMAGE: own}, root)


def is_own_image(image_id: str, root: Path | None = None) -> bool:
    """Whether buildctl recorded using image `image_id` under one of its own names (record_images)."""
    return last_use(OWN_IMAGE, image_id, root) is not None


def last_use(kind: str, name: str, root: Path | None = None) -> float | None:
    """When `name` was last used (POSIX time), None when buildctl has no record of it."""
    try:
        return os.lstat(_stamp(root, kind, name)).st_mtime
    except (OSError, ValueError):
        return None


class LockTimeout(BuildctlError):
    """Another build held the key's lock for longer than we were willing to wait."""


LOCK_POLL_S = 0.5  # flock has no timeout: a waiter retries a non-blocking lock this often


def lock_holder(path: Path) -> str:
    """Who holds the lock file `path`, as its holder wrote it: 'pid P on host H since T'."""
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or not info.get("pid"):
        return "builds reading its artifact, or invoke clean (no pid in the lock file)"
    return f"pid {info.get('pid')} on host {info.get('host', '?')} since {info.get('started', '?')}"


@contextlib.contextmanager
def key_lock(recipe: str, key: str, root: Path | None = None, *, timeout: float | None = None,
             on_wait: Callable[[str], None] | None = None, shared: bool = False) -> Iterator[None]:
    """Serialise builds of the same key (a second build waits, then finds the artifact).

    The holder writes its pid, host and start time into the lock file; a waiter says (on_wait) whom
    it waits for, and gives up after `timeout` seconds with a one-line LockTimeout naming the holder.
    `shared`: for a build that reads the published artifact: any number hold it together, and while one
    does, no build of the key publishes and `invoke clean` removes nothing of the key. A store this
    process cannot write (no lock file, and none can be made) is read without the lock.
    """
    base = (root or artifacts_root()) / recipe
    path = base / f".{key}.lock"
    try:
        base.mkdir(parents=True, exist_ok=True)
        # Opened without truncating: the holder's note must stay readable to waiters.
        fd = os.open(path, (os.O_RDONLY if shared else os.O_RDWR) | os.O_CREAT, 0o644)
    except OSError:
        if not shared:
            raise
        fd = None
    if fd is None:  # nor can this process's `invoke clean` remove anything from that store
        yield
        return
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        said = False
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = lock_holder(path)
                if deadline is not None and time.monotonic() >= deadline:
                    raise LockTimeout(
                        f"gave up waiting {timeout:.0f} s for {path}: another build of {recipe} key {key} holds it "
                        f"({holder}); fix: wait for that build to finish, or stop it if it is stuck"
                    ) from None
                if not said and on_wait is not None:
                    on_wait(f"buildctl: waiting for {path}: another build of this key holds it ({holder})")
                    said = True
                time.sleep(LOCK_POLL_S)
        if shared:  # readers leave no note (a builder's is gone when it ends): waiters are told so
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            return
        note = {"pid": os.getpid(), "host": socket.gethostname(),
                "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "recipe": recipe, "key": key}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(note) + "\n").encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def staging(recipe: str, key: str, root: Path | None = None) -> Iterator[Path]:
    """A temporary folder beside the final one; removed unless published."""
    base = (root or artifacts_root()) / recipe
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=base))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def publish(tmp: Path, recipe: str, key: str, root: Path | None = None) -> Path:
    """Atomically move a complete staging folder into place."""
    final = artifact_dir(recipe, key, root)
    tmp.chmod(0o755)  # mkdtemp makes it private; artifacts are for the team to read
    if final.exists():
        shutil.rmtree(final)
    os.rename(tmp, final)
    record_use({"artifact": [f"{recipe}/{key}"]}, root)
    return final


def write_json(path: Path, data) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
