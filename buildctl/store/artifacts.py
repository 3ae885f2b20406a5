"""The artifact store: artifacts/<recipe>/<key>/ with the wheel(s), manifest.json and build.log.

The key (store/key.py) is content-addressed over what reaches the build; site settings (CA certs,
proxies, mirrors) do not change the output and are left out. An artifact is served only while every
wheel its manifest lists is there as it was published (`lookup`, `unvouched`). Publishing is atomic (a temporary folder renamed into place) and builds of one
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
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path

from buildctl.errors import BuildctlError, InputError
from buildctl.secrets import filtered

DEFAULT_ARTIFACTS_DIR = Path("artifacts")
# The layout of the store is spelled here only (tests/unit/test_store_layout.py): what a published artifact holds
# (store/manifest.py's model reads and writes it), and a key's files beside its folder, dot-named.
MANIFEST_NAME = "manifest.json"
DEFAULT_NAMESPACE = "default"
_NAMESPACE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?")


def root_or_default(root: Path | str | None) -> Path:
    """`root`, else the checkout-relative default (artifacts/ of the current folder). Never the environment:
    the CLI reads BUILDCTL_ARTIFACTS and hands the root down (Settings.artifacts)."""
    return Path(root) if root else DEFAULT_ARTIFACTS_DIR


def artifact_dir(recipe: str, key: str, root: Path | None = None) -> Path:
    return root_or_default(root) / recipe / key


def manifest_path(artifact: Path) -> Path:
    """The manifest.json of an artifact folder (published, or a staging folder being filled)."""
    return artifact / MANIFEST_NAME


def is_published(artifact: Path) -> bool:
    """Whether `artifact` is a published artifact: its manifest.json is a file (a link to one counts, as for
    Path.is_file). Not whether it can be served: `unvouched` says that."""
    return manifest_path(artifact).is_file()


def key_lock_path(recipe_dir: Path, key: str) -> Path:
    """The lock file of `key` in its recipe's folder (`key_lock` holds it; `invoke clean` takes it)."""
    return recipe_dir / f".{key}.lock"


def interrupted_record(recipe: str, key: str, root: Path | None = None) -> Path:
    """Where an interrupted build of (recipe, key) records what the stop cost (pipeline/resume.py), beside
    the key's lock."""
    return root_or_default(root) / recipe / f".{key}.interrupted.json"


def namespace(root: Path | None = None, explicit: str | None = None) -> str:
    """The namespace of the engine objects that builds into `root` create.

    `explicit` when given (the CLI hands down BUILDCTL_NAMESPACE; the environment is not read here); else
    `default` for the default root (`artifacts/` of the current folder: today's names, so existing build
    directories and caches stay in use); else the root's folder name and a hash of its resolved path,
    e.g. `artifacts-ci-3f2a9c1b`.
    """
    explicit = (explicit or "").strip()
    if explicit:
        if not _NAMESPACE.fullmatch(explicit):
            raise InputError(f"BUILDCTL_NAMESPACE={explicit!r} is not a namespace; fix: use 1-32 lowercase letters, "
                             "digits and inner dashes, e.g. ci-nightly")
        return explicit
    resolved = root_or_default(root).resolve()
    if resolved == DEFAULT_ARTIFACTS_DIR.resolve():
        return DEFAULT_NAMESPACE
    stem = re.sub(r"[^a-z0-9]+", "-", resolved.name.lower()).strip("-")[:20].strip("-") or "root"
    return f"{stem}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:8]}"


def lookup(recipe: str, key: str, root: Path | None = None, *,
           on_refused: Callable[[str], None] | None = None) -> Path | None:
    """The published artifact of (recipe, key), or None; finding it counts as a use (invoke clean). One
    whose wheels are not those its manifest records (`unvouched`) is not served: `on_refused` is told why."""
    d = artifact_dir(recipe, key, root)
    if not is_published(d):
        return None
    problem = unvouched(d)
    if problem is not None:
        if on_refused is not None:
            on_refused(problem)
        return None
    record_use({"artifact": [f"{recipe}/{key}"]}, root)
    return d


_MAX_MANIFEST_BYTES = 16 << 20  # as store.manifest reads it


def recorded_wheels(artifact: Path) -> list[dict] | None:
    """The wheels entries of an artifact's manifest.json, read as plain JSON (the no-op reads no model);
    None when it is not a manifest with a list of {file, sha256} entries of plain file names."""
    try:
        with open(manifest_path(artifact), "rb") as fh:
            raw = fh.read(_MAX_MANIFEST_BYTES + 1)
        data = json.loads(raw) if len(raw) <= _MAX_MANIFEST_BYTES else None
    except (OSError, ValueError, RecursionError):
        return None
    wheels = data.get("wheels") if isinstance(data, dict) else None
    if not isinstance(wheels, list):
        return None
    for entry in wheels:
        name = entry.get("file") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not isinstance(entry.get("sha256"), str) or "/" in name \
                or name in ("", ".", ".."):
            return None
    return wheels


def unvouched(artifact: Path, fingerprints: Mapping[str, list] | None = None) -> str | None:
    """Why `artifact` cannot be served as published, in a line that names the file; None when every wheel
    its manifest lists is there, a regular file of the recorded size and sha256. `fingerprints` (the no-op
    memo's, taken when those wheels were last hashed) stand in for the hash while the file's stat matches."""
    wheels = recorded_wheels(artifact)
    if wheels is None:
        return f"{manifest_path(artifact)} lists no wheels buildctl can check"
    for entry in wheels:
        problem = wheel_problem(artifact / entry["file"], entry, (fingerprints or {}).get(entry["file"]))
        if problem is not None:
            return problem
    return None


def wheel_problem(path: Path, entry: Mapping, fingerprint: list | None = None) -> str | None:
    """Why the file at `path` is not the wheel `entry` (a manifest's wheels entry) records, or None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return f"{path} is missing"
    except OSError as e:
        return f"{path} cannot be read ({e.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    recorded = entry.get("bytes")
    if isinstance(recorded, int) and st.st_size != recorded:
        return f"{path} has {st.st_size} bytes, its manifest records {recorded}"
    if fingerprint is not None and fingerprint == _stat_fingerprint(st):
        return None
    if sha256_of(path) != entry.get("sha256"):
        return f"{path} is not the wheel its manifest records (sha256 differs)"
    return None


def _stat_fingerprint(st: os.stat_result) -> list:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


# A file changed within the filesystem's clock tick of the moment it was hashed keeps its mtime: a stat taken
# that close to the hash vouches for nothing (git's "racy" entries), and the file is hashed again next time.
RACY_NS = 2_000_000_000


def wheel_fingerprints(artifact: Path, wheels: list[dict]) -> dict[str, list]:
    """The stat of each wheel just hashed (`unvouched` passed), for the memo to stand in for the hash
    while it holds; a wheel modified too recently to be told from a later change gets none."""
    now = time.time_ns()
    out = {}
    for entry in wheels:
        try:
            st = os.lstat(artifact / entry["file"])
        except OSError:
            continue
        if max(st.st_mtime_ns, st.st_ctime_ns) < now - RACY_NS:
            out[entry["file"]] = _stat_fingerprint(st)
    return out


def newest(recipe: str, root: Path | None = None) -> Path | None:
    """The most recently published artifact of a recipe, or None (not counted as a use). Never a staging
    folder (.tmp-*, which holds a manifest before it is published): pathlib's `*` matches dot-names."""
    base = root_or_default(root) / recipe
    found = [p for p in base.glob(f"*/{MANIFEST_NAME}") if not p.parent.name.startswith(".")] if base.is_dir() else []
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

    return root_or_default(root) / LAST_USE_DIR / kind / quote(name, safe="").replace(".", "%2E")


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
    base = root_or_default(root) / recipe
    path = key_lock_path(base, key)
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
    base = root_or_default(root) / recipe
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
    tmp.write_text(json.dumps(filtered(data), indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
