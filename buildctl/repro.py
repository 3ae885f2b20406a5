"""Repro bundles: everything needed to replay a failed build step anywhere, with or without buildctl.

A bundle is one folder, artifacts/failures/<recipe>-<time>/ (or the same packed as .tar.gz):
  context/               the rendered build folder (`docker build --target builder context/`)
  source.tar.gz          a local-path source, when the recipe builds one
  downloads/             pre-staged files that failed their check (when small enough to carry)
  bundle.json            step, exit code, image id, command, environment (secrets masked), volumes,
                         network, memory limit, diagnosis
  build.log              the log up to the failure (secrets masked)
  recipe.resolved.yaml   the resolved recipe
  README.md              the plain docker commands that replay it
`invoke repro BUNDLE [--shell]` rebuilds the image and reruns the failing step (or opens a shell there).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tarfile
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path

from . import artifacts, diagnose, downloads, engine
from .errors import InputError
from .secrets import Masker, mask_data

CARRY_LIMIT = 256 << 20  # sources and staged files up to this size travel inside the bundle
SITE_FILES = ("pip.conf",)


def failures_dir(root: Path | None = None) -> Path:
    return (root or artifacts.ARTIFACTS_DIR) / "failures"


def write_bundle(*, spec, rendered, context_dir, step, exit_code, log, diagnosis, image_id, command, env,
                 volumes, network, memory, secrets, root: Path | None = None) -> Path:
    mask = Masker(secrets)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    base = failures_dir(root)
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-bundle-", dir=base))
    try:
        ctx = tmp / "context"
        if context_dir and Path(context_dir).is_dir():
            shutil.copytree(context_dir, ctx, ignore=shutil.ignore_patterns("*.lock"))
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
            with tarfile.open(tmp / "source.tar.gz", "w:gz") as tar:
                for path in sorted(artifacts._source_files(Path(src.path))):
                    tar.add(path, arcname=path.relative_to(src.path).as_posix())
        if step == "fetch" and spec.site.download_cache:
            _carry_downloads(rendered, Path(spec.site.download_cache).expanduser(), tmp / "downloads")
        (tmp / "build.log").write_text(mask(log) + "\n")
        (tmp / "recipe.resolved.yaml").write_text(rendered.files["recipe.resolved.yaml"] if rendered else "")
        data = {
            "schema_version": 1,
            "recipe": spec.name,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "step": step,
            "exit_code": exit_code,
            "image_id": image_id,
            "target": "builder",
            "command": command,
            "env": {k: mask(v) for k, v in (env or {}).items()},
            "volumes": volumes,
            "network": network,
            "memory": memory,
            "source": {"kind": src.kind, "git": src.git, "ref": src.ref,
                       "carried": (tmp / "source.tar.gz").exists()},
            "diagnosis": diagnosis.to_dict() if diagnosis else None,
            "first_error": diagnose.first_error(mask(log)),
        }
        data = mask_data(data, mask)  # the source URL and whatever else holds one
        artifacts.write_json(tmp / "bundle.json", data)
        (tmp / "README.md").write_text(_readme(data))
        final = base / f"{spec.name}-{stamp}-{uuid.uuid4().hex[:4]}"
        os.rename(tmp, final)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in artifacts._source_files(path)) if path.is_dir() else 0


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


def _open_bundle(path: Path) -> tuple[Path, Path | None]:
    """A bundle folder, or a .tar.gz of one (unpacked into a temporary folder)."""
    path = Path(path)
    if path.is_dir():
        if not (path / "bundle.json").is_file():
            raise InputError(f"{path}: no bundle.json in it; fix: give a folder under artifacts/failures/")
        return path, None
    if path.is_file() and path.name.endswith((".tar.gz", ".tgz")):
        tmp = Path(tempfile.mkdtemp(prefix="buildctl-repro-"))
        with tarfile.open(path) as tar:
            tar.extractall(tmp, filter="data")
        found = [p.parent for p in tmp.rglob("bundle.json")]
        if not found:
            shutil.rmtree(tmp, ignore_errors=True)
            raise InputError(f"{path}: no bundle.json inside; fix: give a bundle made by `invoke build`")
        return found[0], tmp
    raise InputError(f"{path}: not a bundle folder or .tar.gz; fix: give a path under artifacts/failures/")


def pack(bundle: Path) -> Path:
    """The bundle as one .tar.gz beside it (for CI uploads and mail)."""
    out = bundle.with_name(bundle.name + ".tar.gz")
    with tarfile.open(out, "w:gz") as tar:
        tar.add(bundle, arcname=bundle.name)
    return out


def replay(bundle_path: Path, *, shell: bool = False, on_line=None) -> dict:
    """Rebuild the image and rerun the failing step; returns {reproduced, exit_code, diagnosis, image_id,
    same_image} (same_image: the rebuilt image is the bundle's image id, layer for layer and label for label)."""
    bundle, tmp = _open_bundle(bundle_path)
    try:
        data = json.loads((bundle / "bundle.json").read_text())
        lines: list[str] = []

        def sink(line: str) -> None:
            lines.append(line)
            if on_line:
                on_line(line)

        step = data["step"]
        if step == "fetch":
            return _replay_fetch(bundle, data, sink, lines)
        client = engine.connect()
        tag = f"buildctl-repro/{data['recipe']}:{uuid.uuid4().hex[:8]}"
        try:
            # The build's labels too: with them a cached rebuild is the bundle's very image id.
            image = engine.build_image(client, bundle / "context", tag, target=data.get("target", "builder"),
                                       network_mode=data.get("network"), on_line=sink,
                                       labels={"buildctl.recipe": data["recipe"]})
        except engine.StepFailed as exc:
            return _outcome(data, "image", exc.returncode, "\n".join(lines) or exc.log)
        built = {"image": tag, "image_id": image, "same_image": image == data.get("image_id")}
        if step == "image":
            return {"reproduced": False, "step": "image", "exit_code": 0, "diagnosis": None,
                    "expected": data.get("diagnosis"), **built}
        suffix = uuid.uuid4().hex[:8]
        volumes = {f"{name}-repro-{suffix}": path for name, path in (data.get("volumes") or {}).items()}
        inputs = {}
        if (bundle / "source.tar.gz").exists():
            src_dir = Path(tempfile.mkdtemp(prefix="buildctl-repro-src-"))
            with tarfile.open(bundle / "source.tar.gz") as tar:
                tar.extractall(src_dir, filter="data")
            inputs["/work/src"] = src_dir
        if shell:
            return _shell(image, data, volumes, inputs, client)
        try:
            result = engine.run_container(client, image, data["command"], env=data.get("env") or {},
                                          inputs=inputs or None, volumes=volumes, network_mode=data.get("network"),
                                          mem_limit=data.get("memory"), on_line=sink,
                                          labels={"buildctl.step": "repro"})
        finally:
            for vol in volumes:
                try:
                    engine.remove_volume(client, vol)
                except Exception:
                    pass
            for d in inputs.values():
                shutil.rmtree(d, ignore_errors=True)
        return {**_outcome(data, step, result.exit_code, "\n".join(lines), oom=result.oom_killed), **built}
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def _replay_fetch(bundle: Path, data: dict, sink, lines) -> dict:
    from .recipe import parse_yaml
    from .render import render
    from .spec import Spec

    # The same downloads the build staged: the providers declare them, not a list kept here.
    resolved = parse_yaml((bundle / "recipe.resolved.yaml").read_text(), "recipe.resolved.yaml").data
    dls = render(Spec.model_validate(resolved)).downloads
    try:
        _staged, notes = downloads.stage(dls, bundle / "downloads")
        for n in notes:
            sink(n)
        return {"reproduced": False, "step": "fetch", "exit_code": 0, "diagnosis": None,
                "expected": data.get("diagnosis")}
    except engine.StepFailed as exc:
        sink(exc.log)
        return _outcome(data, "fetch", exc.returncode, "\n".join(lines))


def _outcome(data: dict, step: str, exit_code: int, log: str, oom: bool = False) -> dict:
    diag = diagnose.diagnose(log, step=step, exit_code=exit_code, oom_killed=oom) if exit_code else None
    expected = (data.get("diagnosis") or {}).get("id")
    return {"reproduced": exit_code != 0 and (expected is None or (diag and diag.id == expected)),
            "step": step, "exit_code": exit_code, "diagnosis": diag.to_dict() if diag else None,
            "expected": data.get("diagnosis"), "first_error": diagnose.first_error(log)}


def _shell(image: str, data: dict, volumes: dict, inputs: dict, client) -> dict:
    """An interactive shell at the failing step: same image, mounts and environment."""
    if inputs:  # seed the work volume with the source first, as the build did
        engine.run_container(client, image, ["true"], inputs=inputs, volumes=volumes)
    cmd = ["docker", "run", "--rm", "-it"]
    for vol, path in volumes.items():
        cmd += ["-v", f"{vol}:{path}"]
    for k, v in (data.get("env") or {}).items():
        cmd += ["-e", f"{k}={v}"]
    if data.get("network"):
        cmd += ["--network", data["network"]]
    if data.get("memory"):
        cmd += ["--memory", str(data["memory"]), "--memory-swap", str(data["memory"])]
    cmd += [image, "bash"]
    print("buildctl: rerun the step with: /usr/local/bin/buildctl-build")
    os.execvp("docker", cmd)
    return {}  # not reached
