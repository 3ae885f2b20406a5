"""Helpers of the publish tests: small real wheels, artifact folders, a static file server.

`make_wheel` writes a pure-Python wheel pip installs (METADATA, WHEEL, RECORD with hashes);
`make_artifact` puts wheels into an artifact folder as `invoke build` does: artifacts/<recipe>/<key>/
with manifest.json listing each wheel's file, sha256 and size; `serve_folder(path)` runs
`python -m http.server` on a free loopback port for as long as its `with` block (a static index, as a
team would serve one). `assembled_artifact` is an artifact folder as the pipeline's publish stage
writes it (stages.artifact.assemble), from stand-in compile outputs: no engine, nothing compiled.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

from conftest import TEST_NAMESPACE

from buildctl.pipeline import stages
from buildctl.store.key import KeyInputs


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(dest: Path, name: str = "bctl-demo", version: str = "1.0", *, requires_python: str | None = ">=3.8",
               body: str = "VALUE = 42\n", metadata_name: str | None = None) -> Path:
    """A wheel `<name>-<version>-py3-none-any.whl` with one module (the name with _), in `dest`."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {metadata_name or name}\nVersion: {version}\n"
    if requires_python:
        metadata += f"Requires-Python: {requires_python}\n"
    files = {
        f"{dist}/__init__.py": body.encode(),
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: buildctl-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in files.items():
            zf.writestr(arcname, data)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_artifact(root: Path, recipe: str, key: str, *wheels: Path) -> Path:
    """artifacts/<recipe>/<key>/ with copies of `wheels` and a manifest.json like `invoke build` writes."""
    folder = root / recipe / key
    folder.mkdir(parents=True)
    entries = []
    for wheel in wheels:
        shutil.copy2(wheel, folder / wheel.name)
        entries.append({"file": wheel.name, "sha256": sha256(wheel), "bytes": wheel.stat().st_size})
    manifest = {"schema_version": 1, "recipe": recipe, "key": key, "wheels": entries}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return folder


@contextlib.contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """`python -m http.server` on a free port of 127.0.0.1 serving `folder`; yields its base URL.

    Ready when it says so: the port is read from its "Serving HTTP on … port N" line (no polling)."""
    proc = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1", "--directory",
                             str(folder), "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"port (\d+)", line)
        assert m, f"http.server did not start: {line!r}"
        yield f"http://127.0.0.1:{m.group(1)}/"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def assembled_artifact(spec, tmp_path: Path, wheel: str, versions: str = "",
                       outputs: dict[str, bytes] | None = None) -> tuple[Path, dict]:
    """(folder, manifest) of the artifact the publish stage assembles from a compile that left the
    file `wheel` (its bytes a stand-in), versions.txt and `outputs` (more files of the compile's out
    folder, by name); manifest.json written as publishing does."""
    from buildctl import render
    from buildctl.pipeline.stages import artifact

    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, render_root=tmp_path / "build"))
    prepared = stages.Prepared(render.render(spec), tmp_path / "context", KeyInputs({}, "source", "sha256:base"))
    planned = stages.Planned(prepared, 2, {}, {}, {})
    out, folder = tmp_path / "out", tmp_path / "artifact"
    out.mkdir()
    folder.mkdir()
    (out / wheel).write_bytes(b"wheel")
    (out / "versions.txt").write_text(versions)
    for name, data in (outputs or {}).items():
        (out / name).write_bytes(data)
    manifest = artifact.assemble(run, stages.Compiled(stages.ImageBuilt(planned, "sha256:img"), out, 2), folder, {})
    manifest.write(folder / "manifest.json")
    return folder, manifest.to_json()
