"""`invoke clean`: remove what buildctl no longer uses, and say what that freed.

What it looks at:
- the artifacts root: artifacts (<recipe>/<key>/ holding its manifest.json, a plain file), failure
  bundles (failures/<name>/ holding bundle.json), and the staging folders a killed build or bundle
  writer left (<recipe>/.tmp-*); any other folder (verify/ reports, a user's notes) is left alone;
- the engine: containers, images and volumes labelled `buildctl=1` (and `buildctl.namespace=<ns>` when a
  namespace is given, plus any extra labels the caller names), never anything else; and of those only
  what buildctl made, as buildctl itself recorded it, since labels are inherited (an image built FROM
  a buildctl image has all its labels, a container has its image's): an image under one of buildctl's
  own names (buildctl/..., buildctl-repro/...) or a base image under the name it was made under
  (engine.is_buildctl_image), an untagged image whose id buildctl recorded using under its names
  (artifacts.is_own_image), a container whose owner label buildctl set (its image does not carry it).

How it decides:
- by LAST USE, not creation: every path that uses an object stamps it (artifacts.record_use and
  record_images: an artifact found or published; the base image, builder image and volumes of every
  build, --until and resumed ones too; the images a verification or replay runs and their base
  images; a replayed bundle). An object with no stamp yet (made before stamps existed, or by hand)
  is taken as used when clean first sees it, so nothing is removed on the strength of a missing
  record; and one used again while clean runs (its stamp moved) is not removed.
- base images (`invoke base-image`, any name) are buildctl's and aged like the rest: every build,
  verification and replay FROM one stamps it.
- an artifact is removed only under its key lock, which a build reading it holds (shared); so are a
  build-dir volume and a builder/runtime image named for a key (a build holds the lock from the moment
  it knows its key until it has verified, its containers coming and going meanwhile).
- orphans go whatever their age: a container whose process is provably gone (its `buildctl.owner`
  label names a process of this boot of this host and this PID namespace that no longer runs), an untagged
  buildctl image, and staging folders quiet for STALE_AFTER whose key lock is free. A container whose
  owner cannot be told (another host or boot, even under this host name: the label carries the boot id;
  another PID namespace) is left alone, whatever its state.

It never leaves its roots: folders are listed without following links, a symlink anywhere under the
root is left alone (reported, never followed, never removed) and removal refuses to start at a link.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import socket
import stat
import sys
import time
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from buildctl import engine
from buildctl.errors import EngineError
from buildctl.store import artifacts, noop_memo

DAY = 86400.0
STALE_AFTER = 3600.0  # a staging folder untouched this long, with its key lock free, is an orphan


# --------------------------------------------------------------------------- files under the root


def _tree(path: Path) -> tuple[int, float]:
    """(bytes, newest mtime) of a folder, never following links (a link counts, not its target)."""
    total, newest = 0, os.lstat(path).st_mtime
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        for name in dirnames + filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            newest = max(newest, st.st_mtime)
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total, newest


def _entries(folder: Path) -> Iterator[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            yield from sorted(it, key=lambda e: e.name)
    except OSError:
        return


@contextlib.contextmanager
def _key_lock_free(recipe_dir: Path, key: str) -> Iterator[bool]:
    """True (and held until the block ends) when no build holds this key's lock; False when one does.
    A missing lock file is made: a build that makes it meanwhile to read the artifact is then kept out."""
    lock = artifacts.key_lock_path(recipe_dir, key)
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _file_items(root: Path, now: float) -> tuple[list[dict], list[str]]:
    """Artifacts, bundles and stale staging folders under root; and the symlinks left alone."""
    items: list[dict] = []
    links: list[str] = []
    for top in _entries(root):
        if top.is_symlink():
            links.append(top.name)
            continue
        if top.name.startswith(".") or not top.is_dir(follow_symlinks=False):
            continue  # the last-use stamps, stray files
        for entry in _entries(Path(top.path)):
            name = f"{top.name}/{entry.name}"
            if entry.is_symlink():
                links.append(name)
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue  # key locks, stray files
            path = Path(entry.path)
            size, newest = _tree(path)
            if entry.name.startswith(".tmp-"):
                quiet = now - newest
                if quiet >= STALE_AFTER:
                    items.append({"kind": "staging", "name": name, "path": path, "bytes": size,
                                  "orphan": f"staging folder untouched for {quiet / 3600:.1f} h", "lock": (
                                      Path(top.path), entry.name[len(".tmp-"):].rsplit("-", 1)[0])})
                continue
            if entry.name.startswith("."):
                continue
            kind = "bundle" if top.name == "failures" else "artifact"
            proof = (path / "bundle.json") if kind == "bundle" else artifacts.manifest_path(path)
            if proof.is_symlink() or not proof.is_file():
                continue  # not provably buildctl's: verify/ reports, a user's folder, a copy in progress
            items.append({"kind": kind, "name": name, "path": path, "bytes": size,
                          "lock": (Path(top.path), entry.name) if kind == "artifact" else None})
    return items, links


def _remove_tree(item: dict, used_since) -> str | None:
    """Remove an artifact, bundle or staging folder; None when done, else why not (one line).
    `used_since()`: why not, when it was used after clean looked (asked under the key lock)."""
    path: Path = item["path"]
    if path.is_symlink() or not path.is_dir():
        return "no longer a folder"
    errors: list[str] = []

    def remove() -> None:  # rmtree never follows links (it refuses to start at one, unlinks those inside)
        if sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=lambda _f, p, e: errors.append(f"{p}: {e}"))
        else:
            shutil.rmtree(path, onerror=lambda _f, p, e: errors.append(f"{p}: {e[1]}"))

    if item.get("lock") is None:
        why = used_since()
        if why:
            return why
        remove()
    else:
        recipe_dir, key = item["lock"]
        with _key_lock_free(recipe_dir, key) as free:
            if not free:
                return "a build of this key is running (its lock is held)"
            why = used_since()
            if why:
                return why
            remove()
    return f"{len(errors)} entries not removed, first {errors[0]}" if errors else None


# --------------------------------------------------------------------------- engine objects


_KEYED_VOLUME = re.compile(r"buildctl-(?:work|rebuild)-(?P<rest>.+)-(?P<key>[0-9a-f]{16})")
_KEYED_IMAGE = re.compile(r"buildctl/(?P<recipe>[^:/]+):(?:.*-)?(?P<key>[0-9a-f]{16})")


def _key_lock_of(names: list[str], root: Path) -> tuple[Path, str] | None:
    """(recipe folder, key) of the key an engine object is named for, when the root has that key's lock
    file: a build-dir volume (buildctl-work-[NS-]RECIPE-KEY), a builder or runtime image
    (buildctl/RECIPE:[NS-][runtime-]KEY); None for anything else."""
    for name in names:
        m = _KEYED_IMAGE.fullmatch(name)
        if m:
            folders = [root / m["recipe"]]
        else:
            m = _KEYED_VOLUME.fullmatch(name)
            if not m:
                continue
            rest = m["rest"]  # [NS-]RECIPE: the recipe is a folder of the root whose name ends it
            folders = [Path(e.path) for e in _entries(root) if rest == e.name or rest.endswith("-" + e.name)]
        for folder in folders:
            if artifacts.key_lock_path(folder, m["key"]).is_file():
                return folder, m["key"]
    return None


def _owner_gone(owner: str | None) -> bool | None:
    """True when the owner label (host:boot-id:pid-namespace:pid:start) names a process of this boot of
    this host and of this PID namespace that is gone; False when it runs; None when it cannot be told (no
    label, another host or boot, even under this host name, another PID namespace, or a label of an older
    form: host:pid-namespace:pid:start named the namespace by an inode every host's initial one shares)."""
    parts = (owner or "").split(":")
    if len(parts) != 5:
        return None
    host, boot, pid_namespace, pid, start = parts
    here, this_boot = engine.pid_namespace(), engine.boot_id()
    if (host != socket.gethostname() or boot != this_boot or this_boot == "?" or pid_namespace != here
            or not here.isdigit() or not pid.isdigit()):
        return None
    now_start = engine.process_start(int(pid))
    return now_start is None or now_start != start


def _image_labels(client, image_id: str, seen: dict[str, dict | None]) -> dict | None:
    if image_id not in seen:
        try:
            seen[image_id] = (client.api.inspect_image(image_id).get("Config") or {}).get("Labels") or {}
        except Exception:  # noqa: BLE001 - an image that cannot be read: its labels cannot be told apart
            seen[image_id] = None
    return seen[image_id]


def _started_by_buildctl(client, c: dict, seen: dict[str, dict | None]) -> bool:
    """buildctl labels each container it starts with its owner, a label no image of buildctl's has: a
    container whose owner label is its image's (a `docker commit` of one of buildctl's) is not one."""
    owner = (c.get("Labels") or {}).get(engine.OWNER_LABEL)
    if not owner:
        return False
    labels = _image_labels(client, c.get("ImageID") or "", seen)
    return labels is not None and labels.get(engine.OWNER_LABEL) != owner


def _engine_items(client, selector: Mapping[str, str], root: Path, *, containers: bool, images: bool,
                  caches: bool) -> list[dict]:
    items: list[dict] = []
    if containers:
        seen: dict[str, dict | None] = {}
        for c in engine.labelled(client, "containers", selector, size=True):
            if not _started_by_buildctl(client, c, seen):
                continue  # labelled like buildctl's through its image only: the user's own
            labels = c.get("Labels") or {}
            running = c.get("State") in ("running", "restarting", "paused")
            gone = _owner_gone(labels.get(engine.OWNER_LABEL))
            name = ((c.get("Names") or ["/" + c["Id"][:12]])[0]).lstrip("/")
            item = {"kind": "container", "name": name, "id": c["Id"], "bytes": int(c.get("SizeRw") or 0)}
            if labels.get(engine.KEEP_LABEL) == "1" and not running:
                pass  # kept on purpose (--keep-container): aged by last use like anything else
            elif gone:
                item["orphan"] = "the buildctl process that started it is gone"
            else:
                # its build runs (created and exited are when it copies inputs in and the wheel out), or
                # whose it is cannot be told: left alone, whatever its state
                continue
            items.append(item)
    if images:
        for img in engine.labelled(client, "images", selector):
            tags = [t for t in img.get("RepoTags") or [] if t != "<none>:<none>"]
            ours = (engine.is_buildctl_image(tags, img.get("Labels")) if tags
                    else artifacts.is_own_image(img["Id"], root))
            if not ours:
                continue  # built FROM one of buildctl's (its labels inherited), by someone else
            item = {"kind": "image", "name": tags[0] if tags else img["Id"][:19], "id": img["Id"], "tags": tags,
                    "bytes": int(img.get("Size") or 0), "lock": _key_lock_of(tags, root)}
            if not tags:
                item["orphan"] = "untagged: no build can use it again"
            items.append(item)
    if caches:
        sizes = {}
        with contextlib.suppress(Exception):  # sizes are a nicety: the listing below decides
            sizes = {v["Name"]: (v.get("UsageData") or {}).get("Size") for v in client.api.df().get("Volumes") or []}
        for vol in engine.labelled(client, "volumes", selector):
            items.append({"kind": "volume", "name": vol["Name"], "bytes": max(int(sizes.get(vol["Name"]) or 0), 0),
                          "lock": _key_lock_of([vol["Name"]], root)})
    return items


def _remove_engine_item(client, item: dict) -> str | None:
    from docker import errors as derr

    try:
        if item["kind"] == "container":
            client.api.remove_container(item["id"], force=True, v=True)
        elif item["kind"] == "image":
            client.api.remove_image(item["id"], noprune=False)  # never forced: an image in use stays
        else:
            client.api.remove_volume(item["name"])
    except derr.NotFound:
        return None
    except derr.APIError as e:
        return engine.one_line(e.explanation or str(e), 200)
    return None


# --------------------------------------------------------------------------- clean


def _stamp_names(item: dict) -> list[str]:
    """The names an object's use is recorded under: an image by id and by each tag, a container by id."""
    if "id" in item:
        return [item["id"], *item.get("tags", [])]
    return [item["name"]]


def _last_use(item: dict, root: Path) -> float | None:
    stamps = [artifacts.last_use(item["kind"], n, root) for n in _stamp_names(item)]
    stamps = [s for s in stamps if s is not None]
    return max(stamps) if stamps else None


def _used_since(item: dict, root: Path) -> str | None:
    """Why not remove `item` after all: a build stamped it after clean looked."""
    seen = item.get("seen")
    last = _last_use(item, root) if seen is not None else None
    return "used again while clean ran" if last is not None and last > seen else None


def clean(*, older_than_days: float | None = None, keep_bytes: int | None = None,
          objects: Collection[str] = ("images", "caches", "containers"), dry_run: bool = False, root: Path | None = None,
          namespace: str | None = None, labels: Mapping[str, str] | None = None, client: Any = None) -> dict:
    """Remove orphans always, and what was not used for `older_than_days`, then the least recently used
    until at most `keep_bytes` remain. Engine `objects`: of those kinds (--no-images, ... leave one out),
    through `client` (the engine's; required for them), labelled buildctl=1, in `namespace` when given (None:
    every buildctl object), and carrying every one of `labels` (tests pass their own)."""
    images, caches, containers = ("images" in objects), ("caches" in objects), ("containers" in objects)
    root = artifacts.root_or_default(root)
    now = time.time()
    items, links = _file_items(root, now)
    selector = engine.buildctl_labels(labels, namespace=namespace or None)
    if images or caches or containers:
        if client is None:
            raise ValueError("clean: engine objects are cleaned through the engine's client (client=)")
        try:
            items += _engine_items(client, selector, root, containers=containers, images=images, caches=caches)
        except Exception as e:  # noqa: BLE001 - any engine failure is one line
            raise EngineError(f"cannot list buildctl's objects in the engine: {engine.one_line(str(e), 200)}; "
                              "fix: check `docker info`, or clean files only (--no-images --no-caches "
                              "--no-containers)") from None

    first_seen = []
    for item in items:
        if "orphan" in item:
            continue
        item["last_use"] = item["seen"] = _last_use(item, root)  # seen: a stamp that moves later is a use
        if item["last_use"] is None:  # no record: used now, as far as clean can know
            item["last_use"] = now
            first_seen.append(item)
    if not dry_run:
        for item in first_seen:
            artifacts.record_use({item["kind"]: _stamp_names(item)[:1]}, root)
            item["seen"] = _last_use(item, root)
        # its name may move to a rebuild: then this record is what says the image is buildctl's
        artifacts.record_use({artifacts.OWN_IMAGE: [i["id"] for i in items if i["kind"] == "image" and i["tags"]]},
                             root)

    chosen = [dict(i, reason=f"orphan: {i['orphan']}") for i in items if "orphan" in i]
    rest = sorted((i for i in items if "orphan" not in i), key=lambda i: i["last_use"])
    if older_than_days is not None:
        aged = [i for i in rest if now - i["last_use"] >= older_than_days * DAY]
        chosen += [dict(i, reason=f"not used for {(now - i['last_use']) / DAY:.1f} days") for i in aged]
        rest = [i for i in rest if i not in aged]
    if keep_bytes is not None:
        total = sum(i["bytes"] for i in rest)
        for i in rest:
            if total <= keep_bytes:
                break
            chosen.append(dict(i, reason=f"least recently used beyond {keep_bytes / 1e9:g} GB"))
            total -= i["bytes"]

    order = {"container": 0, "image": 1, "volume": 2}  # containers hold images and volumes
    removed, failed = [], []
    for item in sorted(chosen, key=lambda i: order.get(i["kind"], 3)):
        why = None
        if not dry_run:
            if "path" in item:
                why = _remove_tree(item, lambda item=item: _used_since(item, root))
            elif item.get("lock") is not None:  # a build of its key may be between two of its containers
                with _key_lock_free(*item["lock"]) as free:
                    why = ("a build of this key is running (its lock is held)" if not free
                           else _used_since(item, root) or _remove_engine_item(client, item))
            else:
                why = _used_since(item, root) or _remove_engine_item(client, item)
        if why:
            failed.append({"kind": item["kind"], "name": item["name"], "error": why})
            continue
        removed.append({"kind": item["kind"], "name": item["name"], "bytes": item["bytes"], "reason": item["reason"]})
    if not dry_run:  # the no-op memo's entries of what was removed (a few KB each, not reported)
        noop_memo.prune(root)
    freed: dict[str, dict[str, int]] = {}
    for r in removed:
        f = freed.setdefault(r["kind"], {"count": 0, "bytes": 0})
        f["count"] += 1
        f["bytes"] += r["bytes"]
    return {"dry_run": dry_run, "root": str(root), "namespace": namespace, "removed": removed, "failed": failed,
            "freed": freed, "freed_bytes": sum(r["bytes"] for r in removed), "symlinks_left_alone": links}
