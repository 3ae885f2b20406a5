"""publish: the artifact folder, written in a staging folder and renamed into place.

manifest.json records what later stages read instead of the recipe: the runtime image's context
(context/, the rendered files without downloads), the runtime requirements and the download list.

A build that finds its artifact only reads its manifest (`found`): what reads wheels (wheel_facts,
packaging) is imported by the publish's functions.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import platform
import re
import shutil
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path

from buildctl import __version__, render
from buildctl.errors import BuildctlError, InputError, StepFailed
from buildctl.pipeline import compile_cache, memory_budget, resume
from buildctl.pipeline.stages import Compiled, Published, Run
from buildctl.recipe.fields import size_bytes
from buildctl.recipe.loader import masked_dump, spec_hash
from buildctl.recipe.schema import Spec
from buildctl.secrets import filtered, mask_url, mirror_for
from buildctl.store import artifacts, portability
from buildctl.store import manifest as manifest_mod
from buildctl.store.manifest import Manifest

CONTEXT_DIR = "context"  # in the artifact: the rendered files the runtime image is built from


def runtime_section(rendered: render.Rendered, image_key: str = "") -> dict:
    """What verification needs of the build: the runtime image's context, its name in a registry
    (the image key) and pip requirements."""
    return {"context": CONTEXT_DIR, "target": "runtime", "image_key": image_key,
            "requirements": [p for f in rendered.fragments for p in f.pip_runtime]}


def download_list(rendered: render.Rendered) -> list[dict]:
    return [{"stage": stage, "name": d.name, "sha256": d.sha256, "url": mask_url(d.url)}
            for stage, d in rendered.downloads]


class NoSpace(BuildctlError):
    """The artifacts folder filled up while the artifact was written (exit 1); the staging folder goes."""


MANIFEST_ROOM = 64 << 10  # about what the manifest and the use stamp take beyond the files


@contextlib.contextmanager
def _room(run: Run, staging: Path, needed: int) -> Iterator[None]:
    """ENOSPC (or a full quota) while writing into `staging`: one NoSpace line naming the artifacts folder,
    about what the artifact needs there and what is free, and the fix. What was written goes with the
    staging folder (artifacts.staging removes it); nothing is published."""
    try:
        yield
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        root = staging.parent.parent
        try:
            free = f"{shutil.disk_usage(root).free / 1e6:.1f} MB are free there"
        except OSError:
            free = "how much is free there cannot be read"
        raise NoSpace(f"no space left in {root} to publish the artifact of {run.spec.name}: it needs about "
                      f"{needed / 1e6:.1f} MB, {free}; fix: free space there (`invoke clean --keep-gb N`), or set "
                      "BUILDCTL_ARTIFACTS to a folder on a disk with room") from None


def _bytes(paths: Iterable[Path]) -> int:
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            total += path.stat().st_size if path.is_file() else sum(
                p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return total


def assemble(run: Run, compiled: Compiled, staging: Path, durations: dict[str, float]) -> Manifest:
    """The wheel, build.log, the runtime context and the manifest (written) in `staging`; the manifest. A
    full disk is NoSpace."""
    wheels = [*compiled.out_dir.glob("*.whl"), *(compiled.out_dir / "extensions").glob("*.whl")]
    needed = (_bytes([*wheels, compiled.out_dir / "ninja_log.txt",
                      compiled.out_dir / memory_budget.UNITS_FILE]) + len(run.log.text().encode())
              + sum(len(t.encode()) for t in compiled.image.prepared.rendered.files.values()) + MANIFEST_ROOM)
    with _room(run, staging, needed):
        return _assemble(run, compiled, staging, durations)


def _assemble(run: Run, compiled: Compiled, staging: Path, durations: dict[str, float]) -> Manifest:
    out_dir, prepared = compiled.out_dir, compiled.image.prepared
    spec = run.spec
    wheels = sorted(out_dir.glob("*.whl"))
    if not wheels and spec.framework.source.kind != "prebuilt":
        raise StepFailed("wheel", 1, run.log.text(), detail="the build produced no wheel")
    built_extensions = extension_wheels(spec, out_dir, run.log.text())
    versions = _parse_kv(out_dir / "versions.txt")
    cache = _cache_stats(out_dir, run.spec.site.cache_url if run.spec.build.cache == "ccache" else None)
    peak = _read_text(out_dir / "peak-memory.txt").strip()
    counts = _parse_kv(out_dir / "resumed.txt")
    source_date_epoch = versions.pop("source_date_epoch", "")
    frontend = versions.pop("frontend", "")
    section = portability.read(out_dir, [w.name for w in wheels])
    too_big = refusal(spec, section)
    if too_big:
        raise StepFailed("wheel", 1, run.log.text(), detail=too_big)
    interrupt, warning = resume.read(run.spec.name, prepared.key, run.opts.artifacts_root)
    if warning:
        run.log(f"buildctl: {warning}")
    entries = []
    for w in [*wheels, *(w for w, _ in built_extensions)]:
        shutil.copy2(w, staging / w.name)
        entries.append({"file": w.name, "sha256": artifacts.sha256_of(w), "bytes": w.stat().st_size})
    (staging / "build.log").write_text(filtered(run.log.text()) + "\n")
    if (out_dir / "ninja_log.txt").is_file():  # per-step compile times, for bench/realbuild.py
        shutil.copy2(out_dir / "ninja_log.txt", staging / "ninja_log.txt")
    units = out_dir / memory_budget.UNITS_FILE  # each unit's peak memory (pipeline/memory_budget.py)
    if units.is_file() and not units.is_symlink():
        shutil.copy2(out_dir / memory_budget.UNITS_FILE, staging / memory_budget.UNITS_FILE)
    (staging / "recipe.resolved.yaml").write_text(filtered(prepared.rendered.files["recipe.resolved.yaml"]))
    render.write(prepared.rendered, staging / CONTEXT_DIR)  # the files only: no downloads, no credentials
    src = spec.framework.source
    manifest = Manifest.model_validate({
        "schema_version": 1,
        "recipe": spec.name,
        "key": prepared.key,
        "spec_sha256": spec_hash(spec),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "buildctl_version": __version__,
        "framework": spec.framework.name,
        "source": {"kind": src.kind, "git": src.git and mask_url(src.git), "ref": src.ref,
                   "path": src.path, "tarball": src.tarball and mask_url(src.tarball.url),
                   **_prebuilt(src),
                   "commit": versions.pop("source_commit", None), "mirror": mirror_for(src.git, spec.site)},
        "source_date_epoch": count(source_date_epoch),
        "build_type": spec.build.type,
        "cuda_arch": list(spec.build.cuda_arch),
        "rocm_arch": list(spec.toolchain.rocm.arch) if spec.toolchain.rocm else [],
        "accelerator": spec.accelerator,
        "toolchain": versions,
        "pins": _pins(spec),
        "max_jobs": compiled.max_jobs,
        "peak_memory_bytes": count(peak),
        "compile_cache": {"tool": spec.build.cache, **cache},
        "dist": dict(compiled.dist) if compiled.dist else None,
        "memory": dict(compiled.memory) if compiled.memory else None,
        "resumed": resume.resumed_section(counts, interrupt),
        "wheels": entries,
        "namespace": run.namespace,
        "images": {"builder": compiled.image.image_id, "base": spec.base.image},
        "runtime": runtime_section(prepared.rendered, prepared.image_key),
        "downloads": download_list(prepared.rendered),
        "durations_s": durations,
        "engine": {k: compiled.image.planned.engine_facts.get(k) for k in ("kind", "server_version", "api_version", "storage_driver",
                                                             "os", "arch", "cpus", "memory_bytes")},
        "host": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "resolved_recipe": masked_dump(spec),
        "frontend": _frontend(frontend, wheels[0]) if wheels else None,
        "extensions": _extensions_section(spec, out_dir, wheels, built_extensions),
        "portability": section,
        "key_inputs": prepared.inputs.to_json(),
        "configure": compiled.configure.to_dict() if compiled.configure is not None else None,
        "apt": manifest_mod.apt_packages(out_dir / "apt-packages.txt"),
    })
    manifest.write(staging / manifest_mod.NAME)
    return manifest


def _prebuilt(src) -> dict:
    """The framework the extensions were built against when it was not built here (only then a key)."""
    if src.prebuilt is None:
        return {}
    if isinstance(src.prebuilt, str):
        return {"prebuilt": src.prebuilt}
    if getattr(src.prebuilt, "pypi", None):  # an index's: its pin, and the index (credentials masked)
        return {"prebuilt": src.prebuilt.pypi, "prebuilt_index": mask_url(src.prebuilt.index_url or "")}
    return {"prebuilt": mask_url(src.prebuilt.url), "prebuilt_sha256": src.prebuilt.sha256}


def extension_wheels(spec: Spec, out_dir: Path, log: str) -> list[tuple[Path, dict]]:
    """[(wheel, what the build script recorded of its build)] in the recipe's order, one per extension;
    StepFailed (step extensions) when one is missing or the build left a wheel no extension names."""
    if not spec.extensions:
        return []
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    folder = out_dir / "extensions"
    by_name: dict[str, Path] = {}
    for w in sorted(folder.glob("*.whl")):
        try:
            by_name[canonicalize_name(parse_wheel_filename(w.name)[0])] = w
        except InvalidWheelFilename:
            raise StepFailed("extensions", 1, log, detail=f"the extension build left {ascii(w.name)}, not a wheel "
                                                          "name") from None
    built = {}
    for line in _read_text(folder / "built.txt").splitlines():
        name, _, rest = line.partition(" ")
        built[name] = dict(part.split("=", 1) for part in rest.split() if "=" in part)
    out = []
    for ext in spec.extensions:
        wheel = by_name.pop(canonicalize_name(ext.name), None)
        if wheel is None:
            raise StepFailed("extensions", 1, log, detail=f"extension {ext.name} built no wheel of that name "
                                                          f"(the wheels: {', '.join(sorted(by_name)) or 'none'}); fix: "
                                                          "name the extension as its distribution is named")
        out.append((wheel, built.get(ext.name, {})))
    if by_name:
        raise StepFailed("extensions", 1, log, detail=f"the extension build left wheels no extension names: "
                                                      f"{', '.join(sorted(by_name))}")
    return out


def _extensions_section(spec: Spec, out_dir: Path, framework_wheels: list[Path],
                        built: list[tuple[Path, dict]]) -> dict | None:
    """What each extension was built against (the framework as the build venv had it) and how long it took."""
    from buildctl.store import wheel_facts

    if not spec.extensions:
        return None
    try:
        against = json.loads(_read_text(out_dir / "extensions" / "built-against.json") or "{}")
    except ValueError:
        against = {}
    if not isinstance(against, dict):
        against = {}
    keep = ("version", "git_version", "cxx11_abi", "cuda", "hip", "pybind11_abi", "cuda_arch_list",
            "TORCH_CUDA_ARCH_LIST")
    against = {k: against.get(k) for k in keep if k in against}
    src = spec.framework.source
    against["framework"] = spec.framework.dist
    against["from"] = "this build" if src.prebuilt is None else (
        "the base image" if isinstance(src.prebuilt, str) else f"index {src.prebuilt.pypi}"
        if getattr(src.prebuilt, "pypi", None) else f"wheel {src.prebuilt.name}")
    against["wheel_sha256"] = (artifacts.sha256_of(framework_wheels[0]) if framework_wheels else
                               getattr(src.prebuilt, "sha256", None) if not isinstance(src.prebuilt, str) else None)
    against["cuda_arch"] = list(spec.build.cuda_arch)
    rows = []
    for ext, (wheel, facts) in zip(spec.extensions, built, strict=True):
        seconds = facts.get("seconds", "")
        rows.append({"name": ext.name, "source": mask_url(ext.source_label), "module": ext.import_name,
                     "file": wheel.name, "version": wheel_facts.wheel_tags(wheel).get("version"),
                     "requires": [r for r in wheel_facts.wheel_requires(wheel)
                                  if _names(r, spec.framework.dist, *ext.requires)],
                     "frontend": facts.get("frontend"), "build_seconds": count(seconds)})
    return {"built_against": against, "extensions": rows}


def _names(requirement: str, *dists: str) -> bool:
    """Whether `requirement` is on one of `dists` (the framework, the set's members an extension requires)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        return canonicalize_name(Requirement(requirement).name) in {canonicalize_name(d) for d in dists}
    except InvalidRequirement:
        return False


def _read_text(path: Path, limit: int = 1 << 20) -> str:
    """A small file the build container wrote (untrusted: bounded, never followed out of place)."""
    if not path.is_file() or path.is_symlink():
        return ""
    with open(path, "rb") as fh:
        return fh.read(limit).decode("utf-8", "replace")


def _frontend(reported: str, wheel: Path) -> dict:
    """Which frontend built the wheel (the build script's word, from the tree) and what the wheel's
    WHEEL file says packed it."""
    from buildctl.store import wheel_facts

    name, _, version = reported.partition(" ")
    try:
        generator = wheel_facts.wheel_generator(wheel)
    except InputError:  # not a sane wheel: verification says so, with the reason
        generator = None
    return {"name": name or None, "version": version or None, "generator": generator}


def publish(run: Run, staging: Path, manifest: Manifest) -> Published:
    """The assembled (and, unless --no-verify, verified) staging folder renamed into the store."""
    key = manifest.key
    final = artifacts.publish(staging, run.spec.name, key, run.opts.artifacts_root)
    resume.discard(run.spec.name, key, run.opts.artifacts_root)  # the manifest holds it now
    return Published(run.spec.name, key, final, manifest, cached=False)


def refusal(spec: Spec, portability_section: dict | None) -> str | None:
    """Why the publish refuses a wheel the recipe's policies forbid (the size guard), or None. Those policies
    are no part of the key, so a found artifact meets them too (`refuse_found`)."""
    limit = spec.build.wheel.max_vendored if spec.build.wheel is not None else None
    return portability.growth_refusal(portability_section, size_bytes(limit) if limit else None, limit or "")


def refuse_found(run: Run, published: Published) -> None:
    """StepFailed at the wheel step, as a fresh build's, for a found artifact a policy forbids."""
    section = published.manifest.portability
    if why := refusal(run.spec, section.model_dump(mode="json") if section is not None else None):
        raise StepFailed("wheel", 1, run.log.text(), detail=f"{published.artifact}, published before under this key: {why}")


def found(recipe: str, key: str, artifact: Path) -> Published:
    """An artifact published before (by this build's key): nothing to build."""
    return Published(recipe, key, artifact, Manifest.read(artifact), cached=True)


def recorded_runtime(artifact: Path, manifest: Manifest) -> tuple[Path, manifest_mod.Runtime]:
    """The runtime image's context folder and section as the build recorded them; an artifact of a
    buildctl that recorded none is refused (never rendered again: the recipe may have changed since)."""
    section = manifest.runtime
    context = artifact / section.context if section is not None and section.context else None
    if context is None or not context.resolve().is_relative_to(artifact.resolve()) or not (context / "Dockerfile").is_file():
        raise InputError(f"{artifact}/manifest.json records no runtime image context (an older buildctl built it); "
                         f"fix: rebuild it: invoke build --recipe {manifest.recipe}")
    return context, section


def recorded_requirements(artifact: Path, wheel: Path) -> list[str]:
    """The runtime pip requirements the artifact holding `wheel` records (a verify on the host
    installs them beside the wheel); refused when `wheel` is in no artifact or an older one."""
    from packaging.requirements import InvalidRequirement, Requirement

    fix = "fix: verify the artifact's own wheel (invoke verify --recipe R --host), or in a container (drop --host)"
    path = artifact / manifest_mod.NAME
    manifest = Manifest.read(path, fix) if path.is_file() else None
    if manifest is None or wheel.name not in [w.file for w in manifest.wheels]:
        raise InputError(f"{wheel.name}: no artifact manifest beside it names it, and --host installs the runtime "
                         f"requirements its build recorded; {fix}")
    requirements = manifest.runtime.requirements if manifest.runtime is not None else None
    if requirements is None:
        raise InputError(f"{path} records no runtime requirements (an older buildctl built it); "
                         f"fix: rebuild it: invoke build --recipe {manifest.recipe}")
    for r in requirements:
        try:
            Requirement(r)
        except (InvalidRequirement, TypeError):
            raise InputError(f"{path}: runtime.requirements holds {ascii(str(r)[:100])}, not a pip requirement; "
                             "fix: rebuild it (invoke build)") from None
    return list(requirements)


def _pins(spec: Spec) -> dict:
    tc = spec.toolchain
    return {"cuda": tc.cuda.version if tc.cuda else None, "cudnn": tc.cudnn.version if tc.cudnn else None,
            "nccl": tc.nccl.version if tc.nccl and tc.nccl.install != "none" else None,
            "rocm": tc.rocm.version if tc.rocm else None, "cann": tc.ascend.cann_version if tc.ascend else None,
            "python": spec.python.version}


def _parse_kv(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in _read_text(path).splitlines() if "=" in line)


def count(text: str) -> int | None:
    """A whole number the build container wrote, or None: ASCII digits only (str.isdigit takes '²', which
    int() refuses) and few of them (int() refuses more than 4300)."""
    text = text.strip()
    return int(text) if re.fullmatch(r"[0-9]{1,18}", text) else None


def _cache_stats(out_dir: Path, cache_url: str | None = None) -> dict:
    """hits, misses, hit rate from ccache --print-stats (tab-separated) or sccache's JSON stats; with
    ccache also the local volume's and the shared server's own figures (compile_cache.stats)."""
    if (out_dir / "cache-stats.json").is_file():
        return _sccache_stats(_read_text(out_dir / "cache-stats.json"))
    if not (out_dir / "cache-stats.txt").is_file():
        return {}
    stats = {}
    for line in _read_text(out_dir / "cache-stats.txt").splitlines():
        parts = line.split("\t")
        if len(parts) == 2 and count(parts[1]) is not None:
            stats[parts[0].strip()] = count(parts[1])
    hits = stats.get("direct_cache_hit", 0) + stats.get("preprocessed_cache_hit", 0)
    misses = stats.get("cache_miss", 0)
    total = hits + misses
    state_file = out_dir / compile_cache.STATE_FILE
    state = state_file.read_text(errors="replace")[:500] if state_file.is_file() else ""
    return {"hits": hits, "misses": misses, "hit_rate": round(hits / total, 3) if total else None,
            **compile_cache.stats(stats, state, cache_url)}


def _sccache_stats(text: str) -> dict:
    """sccache --show-stats --stats-format=json: hits and misses are per-language counters."""
    try:
        stats = json.loads(text).get("stats", {})
        hits = sum((stats.get("cache_hits") or {}).get("counts", {}).values())
        misses = sum((stats.get("cache_misses") or {}).get("counts", {}).values())
    except (ValueError, AttributeError, TypeError, RecursionError):
        return {}
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (hits, misses)):
        return {}
    total = hits + misses
    return {"hits": hits, "misses": misses, "hit_rate": round(hits / total, 3) if total else None}
