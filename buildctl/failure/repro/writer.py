"""Writing a repro bundle when a build step fails (the layout is in the package's docstring), and
packing one as .tar.gz. Secrets are masked in everything the bundle holds."""

from __future__ import annotations

import os
import shlex
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from buildctl.failure import diagnose
from buildctl.secrets import Masker, filtered, mask_data
from buildctl.store import artifacts, source_tree

CARRY_LIMIT = 256 << 20  # sources and staged files up to this size travel inside the bundle
SITE_FILES = ("pip.conf",)


def failures_dir(root: Path | None = None) -> Path:
    return artifacts.root_or_default(root) / "failures"


@dataclass(frozen=True)
class FailedStep:
    """The step that failed: its name, exit code, log (masked when written) and diagnosis."""

    step: str
    exit_code: int | None
    log: str
    diagnosis: Any = None  # diagnose.Diagnosis


@dataclass(frozen=True)
class ReplayFacts:
    """What `invoke repro` reruns: the builder image, the command, its environment (masked when written),
    volumes, network and memory limit, and the engine and namespace it ran on."""

    image_id: str | None
    command: Sequence[str] | None
    env: Mapping[str, str] | None
    volumes: Mapping[str, str]
    network: str | None
    memory: str | None
    namespace: str | None = None
    engine_name: str | None = None
    base_image_id: str | None = None  # the base the key named: the replay builds FROM it while the engine has it


def write_bundle(*, spec, rendered, context_dir, failure: FailedStep, replay: ReplayFacts, secrets,
                 root: Path | None = None) -> Path:
    step, exit_code, log, diagnosis = failure.step, failure.exit_code, failure.log, failure.diagnosis
    mask = Masker(secrets)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    base = failures_dir(root)
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-bundle-", dir=base))
    try:
        ctx = tmp / "context"
        if context_dir and Path(context_dir).is_dir():
            shutil.copytree(context_dir, ctx, ignore=shutil.ignore_patterns(".*.lock"))  # locks held, not pip.lock
            for name in SITE_FILES:
                if (ctx / name).exists():
                    (ctx / name).write_text(mask((ctx / name).read_text()))
            _drop_large(ctx / "downloads")
        elif rendered is not None:
            for rel, text in rendered.files.items():
                p = ctx / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(mask(text))
        src = spec.framework.source
        if src.kind == "path" and step not in ("fetch", "image") and _size(Path(src.path)) < CARRY_LIMIT:
            _pack_source(Path(src.path), tmp / "source.tar.gz")
        if step == "fetch" and spec.site.download_cache:
            _carry_downloads(rendered, Path(spec.site.download_cache).expanduser(), tmp / "downloads")
        (tmp / "build.log").write_text(mask(log) + "\n")
        (tmp / "recipe.resolved.yaml").write_text(filtered(rendered.files["recipe.resolved.yaml"] if rendered else ""))
        data = {
            "schema_version": 1,
            "recipe": spec.name,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "step": step,
            "exit_code": exit_code,
            "image_id": replay.image_id,
            "namespace": replay.namespace,
            "engine": replay.engine_name,
            "target": "builder",
            "base_image_id": replay.base_image_id,
            "command": replay.command,
            "env": {k: mask(v) for k, v in (replay.env or {}).items()},
            "volumes": replay.volumes,
            "network": replay.network,
            "memory": replay.memory,
            "source": {"kind": src.kind, "git": src.git, "ref": src.ref,
                       "carried": (tmp / "source.tar.gz").exists()},
            "diagnosis": diagnosis.to_dict() if diagnosis else None,
            "first_error": diagnose.first_error(mask(log)),
            "downloads": [{"stage": stage, "name": dl.name, "sha256": dl.sha256}
                          for stage, dl in (rendered.downloads if rendered else [])],
        }
        data = mask_data(data, mask)  # the source URL and whatever else holds one
        artifacts.write_json(tmp / "bundle.json", data)
        (tmp / "README.md").write_text(filtered(_readme(data)))
        final = base / f"{spec.name}-{stamp}-{uuid.uuid4().hex[:4]}"
        os.rename(tmp, final)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _pack_source(root: Path, out: Path) -> None:
    """Regular files only (what a replay accepts): a symlink to a file of the tree travels as that file,
    one leading out of the tree stays out of the bundle (it would carry a host file along)."""
    real_root = root.resolve()
    with tarfile.open(out, "w:gz", dereference=True) as tar:
        for path in _source_files(root):
            target = path.resolve()
            if path.is_symlink() and not (target.is_file() and target.is_relative_to(real_root)):
                continue
            tar.add(path, arcname=path.relative_to(root).as_posix())


def _source_files(root: Path) -> list[Path]:
    """The files and links of a local source its build is sent (store/source_tree.py's declared rule)."""
    paths = [root / os.fsdecode(rel) for rel in source_tree.members(root)]
    return [p for p in paths if p.is_symlink() or p.is_file()]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in _source_files(path)) if path.is_dir() else 0


def _drop_large(downloads_dir: Path) -> None:
    """Big pre-staged files (runfiles are GBs) stay out of the bundle; the README says to stage them."""
    if downloads_dir.is_dir():
        for p in downloads_dir.rglob("*"):
            if p.is_file() and p.stat().st_size > CARRY_LIMIT:
                p.unlink()


def _carry_downloads(rendered, cache: Path, dest: Path) -> None:
    for _stage, dl in rendered.downloads if rendered else []:
        f = cache / dl.name
        if f.is_file() and f.stat().st_size <= CARRY_LIMIT:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest / dl.name)


def _readme(data: dict) -> str:
    tag = f"buildctl-repro/{data['recipe']}"
    lines = [
        f"# Repro bundle: {data['recipe']} failed in step `{data['step']}` (exit {data['exit_code']})",
        "",
    ]
    d = data.get("diagnosis")
    if d:
        lines += [f"**Diagnosis:** {d['title']}", "", f"- cause: {d['cause']}", f"- fix: {d['fix']}", ""]
    lines += ["## Replay with buildctl", "", "```", "invoke repro .          # rerun the failing step",
              "invoke repro . --shell  # a shell at that point, same mounts and environment", "```", "",
              "## Replay with plain docker", "", "```"]
    if data["step"] == "fetch":
        lines += ["# A pre-staged download failed its sha256 check; the files are in downloads/:",
                  "sha256sum downloads/*   # compare with the sha256 in recipe.resolved.yaml"]
    else:
        net = f"--network {data['network']} " if data.get("network") else ""  # as the image was built
        lines.append(f"docker build {net}--target builder -t {tag} context/")
    if data["step"] not in ("fetch", "image") and data.get("command"):
        run = ["docker", "run", "--rm", "--name", "buildctl-repro"]
        for vol, path in (data.get("volumes") or {}).items():
            run += ["-v", f"{vol}-repro:{path}"]
        for k, v in (data.get("env") or {}).items():
            run += ["-e", f"{k}={v}"]
        if data.get("network"):
            run += ["--network", data["network"]]
        if data.get("memory"):  # no swap on top, as buildctl ran it: a limit is a limit
            run += ["--memory", str(data["memory"]), "--memory-swap", str(data["memory"])]
        if data["source"].get("carried"):
            lines += ["docker volume create " + next(iter(data["volumes"])) + "-repro",
                      "mkdir -p src && tar -xzf source.tar.gz -C src",
                      f"docker run --rm -v {next(iter(data['volumes']))}-repro:/work -v \"$PWD/src\":/in:ro "
                      f"{tag} cp -a /in/. /work/src/"]
        lines.append(shlex.join([*run, tag, *data["command"]]))
    lines += ["```", "", "The full log is build.log; bundle.json holds the exact image id, environment and volumes.", ""]
    return "\n".join(lines)


def pack(bundle: Path) -> Path:
    """The bundle as one .tar.gz beside it (for CI uploads and mail)."""
    out = bundle.with_name(bundle.name + ".tar.gz")
    with tarfile.open(out, "w:gz", dereference=True) as tar:  # files, never links: what open_bundle accepts
        tar.add(bundle, arcname=bundle.name)
    return out
