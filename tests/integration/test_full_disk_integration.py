"""A full artifacts folder while the wheel is published (issue 35, item 9), on a real small filesystem: a
tmpfs of a few hundred KiB mounted as the artifacts root (root, or `sudo -n`, as .ci/lib.sh does). No
engine: the publish stage runs on stand-in compile outputs, as the pipeline composes it (staging folder,
assemble, publish). Cost: well under a second.

Before (19b4e6a): `internal error: OSError: [Errno 28] No space left on device`. Now one line naming the
folder, the space needed and the fix, and nothing half-written left in the root.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE

from buildctl import recipe, render
from buildctl.errors import BuildctlError
from buildctl.pipeline import stages
from buildctl.pipeline.stages import artifact
from buildctl.store import artifacts, key

pytestmark = pytest.mark.integration
SUDO = [] if os.geteuid() == 0 else ["sudo", "-n"]


@contextlib.contextmanager
def small_filesystem(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    subprocess.run([*SUDO, "mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run([*SUDO, "umount", str(path)], check=True)


def _compiled(spec, tmp_path: Path, wheel_bytes: int) -> tuple[stages.Run, stages.Compiled]:
    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, render_root=tmp_path / "build", artifacts_root=tmp_path / "artifacts"))
    rendered = render.render(spec)
    prepared = stages.Prepared(rendered, tmp_path / "context", key.key_inputs(rendered.files, "sha256:src", "sha256:base"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "demofw-0.1.0-cp311-cp311-linux_x86_64.whl").write_bytes(os.urandom(wheel_bytes))
    (out / "versions.txt").write_text("gcc=12.2.0\n")
    return run, stages.Compiled(stages.ImageBuilt(stages.Planned(prepared, 2, {}, {}, {}), "sha256:img"), out, 2)


def _publish(run: stages.Run, compiled: stages.Compiled) -> None:
    """The pipeline's publish step (pipeline._compile_and_publish after the compile: assemble, publish)."""
    with artifacts.staging(run.spec.name, compiled.image.prepared.key, run.opts.artifacts_root) as staging:
        manifest = artifact.assemble(run, compiled, staging, {})
        artifact.publish(run, staging, manifest)


def _left(root: Path) -> list[str]:
    """What a failed publish left in the root: none of the artifact, no staging folder (locks and use
    stamps are the store's own)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if not p.name.endswith(".lock") and artifacts.LAST_USE_DIR not in p.parts and p.is_file())


def test_a_full_artifacts_folder_is_one_line_and_leaves_nothing_half_written(tmp_path):
    spec = recipe.load("demo-cpu")
    with small_filesystem(tmp_path / "artifacts", "256k") as root:
        run, compiled = _compiled(spec, tmp_path, 1 << 20)  # a 1 MiB wheel into 256 KiB
        with pytest.raises(BuildctlError) as e:
            _publish(run, compiled)
        message = str(e.value)
        assert type(e.value) is not OSError and "\n" not in message, message
        m = re.match(rf"no space left in {re.escape(str(root))} to publish the artifact of demo-cpu: it needs about "
                     r"(\d+\.\d) MB, (\d+\.\d) MB are free there; ", message)
        assert m and 1.0 < float(m.group(1)) < 1.5 and float(m.group(2)) < 0.3, message
        assert "fix: " in message and "invoke clean" in message and "BUILDCTL_ARTIFACTS" in message, message
        assert _left(root) == [] and not (root / "demo-cpu" / compiled.image.prepared.key).exists()


def test_a_disk_that_fills_before_the_manifest_is_written_leaves_no_artifact(tmp_path, monkeypatch):
    spec = recipe.load("demo-cpu")
    with small_filesystem(tmp_path / "artifacts", "2m") as root:
        run, compiled = _compiled(spec, tmp_path, 64 << 10)
        write_context = artifact.render.write

        def write_context_then_fill(*args, **kwargs) -> None:
            """Past the free-space check, the wheel copied: another writer takes what is left before the
            manifest is written."""
            write_context(*args, **kwargs)
            with open(root / "filler", "wb") as f, contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * (64 << 10))
                    f.flush()

        monkeypatch.setattr(artifact.render, "write", write_context_then_fill)
        with pytest.raises(BuildctlError) as e:
            _publish(run, compiled)
        assert str(e.value).startswith(f"no space left in {root} to publish the artifact of demo-cpu: "), e.value
        assert _left(root) == ["filler"] and not (root / "demo-cpu" / compiled.image.prepared.key).exists()
