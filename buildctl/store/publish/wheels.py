"""The artifacts to publish and their wheels, checked: a manifest that parses, plain files in the artifact
folder with valid wheel names, the recorded sha256 and METADATA that agrees with the file name."""


from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.metadata import parse_email
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from buildctl.errors import BuildctlError, InputError
from buildctl.store import artifacts
from buildctl.store.wheel_facts import wheel_metadata

MAX_MANIFEST_BYTES = 16 << 20
RECIPE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# PEP 427's file name: name-version[-build]-python-abi-platform.whl, each part escaped to letters, digits,
# '_' and '.' (a version may hold '+' and '!'): a '#', '%' or space would break the index's hrefs
PEP427_NAME = re.compile(r"[A-Za-z0-9_.]+-[A-Za-z0-9_.+!]+(-[0-9][A-Za-z0-9_.]*)?(-[A-Za-z0-9_.]+){3}\.whl")


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


def select_artifacts(recipe: str | None, artifact_dirs: Iterable[str], root: Path | None = None) -> list[Path]:
    """--artifact DIR…, else the latest artifact of --recipe R, else the latest of every recipe in the store."""
    root = artifacts.root_or_default(root)
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


FIX_ARTIFACT = "fix: publish artifact folders as `invoke build` wrote them"


def open_plain(path: Path, what: str):
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


def load_wheels(artifact: Path) -> list[Wheel]:
    """The wheels of one artifact folder, each checked against its manifest (see the module doc)."""
    manifest_path = artifacts.manifest_path(artifact)
    with open_plain(manifest_path, artifacts.MANIFEST_NAME) as fh:
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
        if not PEP427_NAME.fullmatch(file):
            raise InputError(f"{manifest_path}: {file!r} is not a wheel file name (PEP 427: name-version"
                             f"[-build]-python-abi-platform.whl of letters, digits, '_' and '.'); {FIX_ARTIFACT}")
        try:
            name, version, _build, _tags = parse_wheel_filename(file)
        except (InvalidWheelFilename, InvalidVersion) as e:
            raise InputError(f"{manifest_path}: {file!r} is not a wheel file name ({e}); "
                             f"{FIX_ARTIFACT}") from None
        path = artifact / file
        with open_plain(path, "the wheel its manifest names") as fh:
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
