"""The no-op memo: what a build that found its artifact learnt, so that the same request finds it
again without loading the recipe, validating it or rendering it (issue 23: a no-op build within 1.5x
of `invoke --list`).

Like ccache's direct mode it is a shortcut to a key that the full path computed; it never computes one.
An entry, `<artifacts root>/.noop/<request digest>.json`, is named by the request: the recipe argument,
--set and every setting as given (only their digest is written: a masked value would let two requests
with two keys share an entry), the CA certificates' text, the working folder, and buildctl's own code
(each file's size and mtime, so any edit misses). It records what the full path read to reach the key,
when it read it: the recipe and its fragments through the paths the loader opened (links are followed
again, never recorded resolved) and the patches the render read, each with the sha256 of what it held
then; the source digest the key was computed from; the base image's id; the manifest's wheels with a stat
of each taken when it was last hashed; and what the no-op printed: the summary rows and the JSON
payload's parts, with the sha256 of the manifest (and stored report) they came from.

`still_holds` trusts an entry only while every one of those still holds: the files have their digests, the
artifact and the rendered copy are where they were, the manifest is the one read, every wheel is there as
published (its stat unchanged, or its sha256 the manifest's). The engine's base image id is compared by the
caller (it asks the engine). Anything else, or an entry that does not parse, is a miss: the full path runs
and writes the entry again. The lookup is what the no-op imports instead of the recipe schema, the
renderer and the manifest model.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from buildctl.secrets import filtered

VERSION = 2  # 2: the files' digests as read, paths as opened, the wheels checked (issue 31)
FOLDER = ".noop"
_MAX_ENTRY_BYTES = 4 * 1024 * 1024  # a manifest and a report, as JSON: far below this
_MAX_DEPTH = 32  # a manifest and a report nest a few levels; deeper is not what `record` wrote


def code_fingerprint(roots: list[Path]) -> str:
    """buildctl's code and templates as they are now: each file's path, size and mtime (a stat each,
    no reads), and the Python and library versions that render and dump (jinja2, PyYAML, pydantic)."""
    h = hashlib.sha256(f"{VERSION} {sys.version}".encode())
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(".pyc"):
                    continue
                st = os.stat(os.path.join(dirpath, name))
                h.update(f"{dirpath}/{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    for module in ("jinja2", "yaml", "pydantic", "pydantic_core"):
        origin = _origin(module)
        st = os.stat(origin) if origin else None
        h.update(f"{module} {origin} {st.st_mtime_ns if st else ''}\0".encode())
    return h.hexdigest()


def _origin(module: str) -> str | None:
    from importlib.util import find_spec  # no import of the module itself

    try:
        spec = find_spec(module)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None else None


def request_digest(request: dict[str, Any], code: str) -> str:
    """The entry's name: the request (plain JSON data) and the code fingerprint."""
    text = json.dumps(request, sort_keys=True, default=str)
    return hashlib.sha256(f"{code}\0{os.getcwd()}\0{text}".encode()).hexdigest()


def file_sha256(path: str | Path) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def entry_path(root: Path, digest: str) -> Path:
    return root / FOLDER / f"{digest}.json"


def record(root: Path, digest: str, entry: dict[str, Any]) -> None:
    """Write the entry atomically; a store this process cannot write keeps no memo (the next no-op takes
    the full path, as before)."""
    path = entry_path(root, digest)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "w") as fh:
            json.dump(filtered({"version": VERSION, **entry}), fh)
        os.replace(tmp, path)
    except OSError:
        return


def read(root: Path, digest: str) -> dict[str, Any] | None:
    """The entry as written, or None (none, unreadable, another version, not the shape `record` writes)."""
    path = entry_path(root, digest)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_ENTRY_BYTES + 1)
        entry = json.loads(raw) if len(raw) <= _MAX_ENTRY_BYTES else None
    except (OSError, ValueError, RecursionError):  # nested past the parser's depth: untrusted input
        return None
    return entry if _shallow(entry) and _well_formed(entry) else None


def _shallow(value: Any) -> bool:
    """Whether JSON data nests at most _MAX_DEPTH levels (walked without recursion: printing or dumping a
    deeper entry would raise RecursionError)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= _MAX_DEPTH:
                return False
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return True


def still_holds(entry: dict[str, Any]) -> bool:
    """Whether everything the entry records holds now (but the base image's id: the caller asks the engine):
    each file read has the digest it had when it was read, through the same path (links followed again),
    the manifest and report are those read, and every wheel the manifest lists is the one published (its
    stat as when it was last hashed, else hashed again)."""
    from buildctl.store.artifacts import manifest_path, unvouched

    artifact = Path(entry["artifact_dir"])
    held = {**entry["reads"], str(manifest_path(artifact)): entry["manifest_sha256"]}
    if entry["report_sha256"] is not None:
        held[str(artifact / "report.json")] = entry["report_sha256"]
    if any(file_sha256(p) != sha for p, sha in held.items()):
        return False
    if entry["source_tree"] is not None:
        from buildctl.store.source_tree import digest

        tree, digest_was = entry["source_tree"]
        if not Path(tree).is_dir() or digest(Path(tree)) != digest_was:
            return False
    return Path(entry["render_dir"]).is_dir() and unvouched(artifact, entry["fingerprints"]) is None


_FIELDS: dict[str, type | tuple[type, ...]] = {
    "recipe": str, "key": str, "artifact_dir": str, "render_dir": str, "base_image": str, "base_image_id": str,
    "reads": dict, "source_tree": (list, type(None)), "manifest_sha256": str, "report_sha256": (str, type(None)),
    "pull": str, "warnings": list, "skipped": list, "rows": list, "artifact": str,
    "manifest": dict, "verification": (dict, type(None)), "wheels": list, "fingerprints": dict,
}


def _well_formed(entry: Any) -> bool:
    if not isinstance(entry, dict) or entry.get("version") != VERSION:
        return False
    if not all(isinstance(entry.get(name), kind) for name, kind in _FIELDS.items()):
        return False
    rows_ok = all(isinstance(r, list) and len(r) == 2 and all(isinstance(c, str) for c in r) for r in entry["rows"])
    reads_ok = all(isinstance(k, str) and isinstance(v, str) for k, v in entry["reads"].items())
    tree_ok = entry["source_tree"] is None or (len(entry["source_tree"]) == 2
                                              and all(isinstance(v, str) for v in entry["source_tree"]))
    prints_ok = all(isinstance(k, str) and isinstance(v, list) and all(isinstance(n, int) for n in v)
                    for k, v in entry["fingerprints"].items())
    return (rows_ok and reads_ok and tree_ok and prints_ok and all(isinstance(w, str) for w in entry["warnings"])
            and all(isinstance(s, str) for s in entry["skipped"]))


def prune(root: Path) -> int:
    """Remove the entries whose artifact is gone (`invoke clean`) or that no longer parse; how many. Links in
    the memo folder are left alone, never followed."""
    from buildctl.store.artifacts import is_published

    removed = 0
    try:
        entries = list(os.scandir(root / FOLDER))
    except OSError:
        return 0
    for item in entries:
        if not item.name.endswith(".json") or not item.is_file(follow_symlinks=False):
            continue
        entry = read(root, item.name[:-len(".json")])
        if entry is None or not is_published(Path(entry["artifact_dir"])):
            try:
                os.unlink(item.path)
                removed += 1
            except OSError:
                pass
    return removed
