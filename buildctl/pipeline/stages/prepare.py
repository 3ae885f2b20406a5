"""fetch: the rendered files, the pre-staged downloads, the artifact key and the jobs to compile with.

The key needs the base image's id: one inspection, which the engine answers without docker-py when it is
local (engine.lazy); a build that finds its artifact asks the engine nothing else."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from buildctl import engine, render
from buildctl.engine import pull, registry
from buildctl.errors import InputError
from buildctl.pipeline import memory_budget
from buildctl.pipeline.stages import Planned, Prepared, Run
from buildctl.recipe import parallel_jobs
from buildctl.settings import key_salt_file_of
from buildctl.store import artifacts, downloads, key, source_tree

if TYPE_CHECKING:
    from buildctl.engine.snapshot import Snapshot


def render_files(run: Run) -> render.Rendered:
    """The build's files (pure: no engine, no network)."""
    return render.render(run.spec, template_cache=run.opts.template_cache)


def prepare(run: Run, rendered: render.Rendered, looked: key.KeyInputs | None = None) -> Prepared:
    """This build's own folder with the pre-staged downloads in it, its key, and MAX_JOBS. `looked`: the key's
    inputs a dry run computed from these rendered files (build_inputs says when they are this build's)."""
    context_dir = write_context(run, rendered)
    try:
        base = _base_image(run)
        base_id = base_image_id(run, base)
        if base is not None:  # invoke clean: in use, cached or not
            artifacts.record_inspected([base], run.opts.artifacts_root)
        snapshot, source = _snapshot(run, context_dir)
        inputs = build_inputs(run, rendered, base_id, source, looked)
        place_render(context_dir, run.opts.render_root / run.spec.name / inputs.key)
        # MAX_JOBS and the engine's facts wait for `plan`: an unchanged artifact needs neither
        return Prepared(rendered, context_dir, inputs, registry.image_key(rendered.files, base_id), snapshot)
    except BaseException:  # no record to hand on: the pipeline would never remove the folder
        shutil.rmtree(context_dir, ignore_errors=True)
        _snapshot_path(context_dir).unlink(missing_ok=True)
        raise


def _snapshot_path(context_dir: Path) -> Path:
    return context_dir.with_name(context_dir.name + ".source.tar")  # beside the image's context, never in it


def _snapshot(run: Run, context_dir: Path) -> tuple[Snapshot | None, str | None]:
    """A local source tarred once, beside this build's folder, and its digest from the same read (the key's);
    (None, None) for any other source."""
    from buildctl.engine.snapshot import Snapshot  # not engine.transfer: a no-op imports no docker-py

    src = run.spec.framework.source
    if src.kind != "path":
        return None, None
    path = _snapshot_path(context_dir)
    return Snapshot(path), source_tree.snapshot(Path(src.path), path)


def discard(prepared: Prepared) -> None:
    """This build's own folder and its source snapshot, once the build is done with them."""
    shutil.rmtree(prepared.context_dir, ignore_errors=True)
    if prepared.source_snapshot is not None:
        prepared.source_snapshot.path.unlink(missing_ok=True)


def request_inputs(run: Run, rendered: render.Rendered, base_id: str, source: str | None = None) -> key.KeyInputs:
    """What the key is made of (store.key.request_inputs); a credential value in build.env is keyed by its
    digest salted with this host's salt, read only when there is one. `source`: a local source's snapshot
    digest (else the source's digest is taken from the spec)."""
    env = run.spec.build.env
    salt = key.host_salt(key_salt_file_of(run.opts.environ)) if key.credential_digests(env, b"") else b""
    return key.request_inputs(rendered, base_id, salt, env, source)


def build_inputs(run: Run, rendered: render.Rendered, base_id: str, source: str | None,
                 looked: key.KeyInputs | None) -> key.KeyInputs:
    """The key's inputs of what this build builds: `looked` (a dry run's, of the same rendered files) when
    the base image and the source are those it keyed, else computed again. The dry run read the base's id
    without pulling; the pull policy may since have pulled a newer base (or the absent one), and a local
    source is keyed by the snapshot the build sends, read now: the key must name what is built, so then the
    dry run's key was provisional and this one is the build's (its result reports it)."""
    if looked is not None and looked.base_image == base_id and (source is None or source == looked.source):
        return looked
    inputs = request_inputs(run, rendered, base_id, source)
    if looked is not None and inputs.key != looked.key:
        changed = "base image" if looked.base_image != base_id else "local source"
        run.log(f"buildctl: key {inputs.key}, not {looked.key}: the {changed} is not the one the key was first "
                "computed with")
    return inputs


def write_context(run: Run, rendered: render.Rendered) -> Path:
    """The rendered files and the verified pre-staged downloads in a folder of this build's own:
    the images are built from exactly the files the key is computed from."""
    staged, notes = downloads.stage(rendered.downloads, run.spec.site.download_cache)
    for note in notes:
        run.log(note)
    return render.write(rendered, run.opts.render_root / f".tmp-{run.spec.name}-{uuid.uuid4().hex[:12]}", staged=staged)


def plan(run: Run, prepared: Prepared) -> Planned:
    """Before anything is built: the engine's facts (for the manifest), MAX_JOBS within them, and the
    compile container's environment and mounts."""
    from buildctl.pipeline.stages.compile import container_env, mounts

    facts = engine.engine_facts(run.client)
    if run.opts.memory:  # before the image build, not at the compile
        engine.refuse_memory_limit(engine.kind_of(run.client), run.opts.memory)
    max_jobs = plan_jobs(run, facts)
    return Planned(prepared, max_jobs, facts, container_env(run, max_jobs), mounts(run, prepared.key))


def plan_jobs(run: Run, facts) -> int:
    """MAX_JOBS from the recipe (or --jobs) within what the engine's CPUs and memory allow."""
    spec = run.spec
    res = parallel_jobs.engine_resources(facts)
    setting = run.opts.jobs if run.opts.jobs != "auto" else spec.build.max_jobs
    if memory_budget.applies(spec, bool(run.opts.rebuild_dir)):  # each unit waits for its memory
        cpus = memory_budget.cpuset_size(run.opts.cpuset) or res.cpus
        max_jobs, why = memory_budget.jobs(setting, cpus=cpus, mem_bytes=res.mem_bytes,
                                           accelerator=spec.accelerator, build_type=spec.build.type)
    else:
        max_jobs, why = parallel_jobs.max_jobs(setting, cpus=res.cpus, mem_bytes=res.mem_bytes,
                                               accelerator=spec.accelerator, build_type=spec.build.type)
    run.log(f"buildctl: MAX_JOBS={max_jobs} ({why})")
    return max_jobs


def _base_image(run: Run) -> dict | None:
    """The engine's inspection of the base image, after the pull policy (pull.decide) is applied: pulled
    when it says so, refused when the image is absent and may not be pulled; None if it is still absent."""
    spec = run.spec
    ref, policy = spec.base.image, spec.site.pull
    base = run.engine.inspect_image(ref)
    if pull.decide(ref, policy or "missing", base is not None) == "use":
        return base
    pull.ensure_images(run.client, [ref], policy, distro=spec.base.distro, on_line=run.log)
    return run.engine.inspect_image(ref)


def base_image_id(run: Run, base: dict | None) -> str:
    """The base image's id; refused when its label says another distro than the recipe's (a base image
    made by `invoke base-image` under any name carries buildctl.distro)."""
    spec = run.spec
    if base is None:
        return f"unresolved:{spec.base.image}"  # the image build will say what is missing
    distro = ((base.get("Config") or {}).get("Labels") or {}).get(engine.DISTRO_LABEL)
    if distro and distro != spec.base.distro:
        raise InputError(f"base image {spec.base.image} is {distro} (its {engine.DISTRO_LABEL} label), the recipe "
                         f"{spec.name} is for {spec.base.distro}; fix: give a {spec.base.distro} image (--base-image "
                         f"buildctl/base:{spec.base.distro}, made by `invoke base-image {spec.base.distro}`), or a "
                         f"recipe for {distro}")
    return base["Id"]


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def place_render(private: Path, dest: Path) -> Path:
    """Copy a build's rendered folder to `dest` (build/<recipe>/<key>/) atomically, for people to
    look at; builds never read it. A concurrent build of the same key may place it first."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        shutil.copytree(private, tmp, copy_function=_link_or_copy, dirs_exist_ok=True)
        tmp.chmod(0o755)
        old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex[:8]}")
        with contextlib.suppress(FileNotFoundError):
            dest.rename(old)
        try:
            tmp.rename(dest)
        except OSError:  # another build of this key placed its copy meanwhile (the same keyed files)
            pass
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest
