"""fetch: the rendered files, the pre-staged downloads, the artifact key and the jobs to compile with."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from .. import artifacts, downloads, engine, jobs, render
from . import Prepared, Run


def render_files(run: Run) -> render.Rendered:
    """The build's files (pure: no engine, no network)."""
    return render.render(run.spec, ca_texts=dict(run.opts.ca_texts))


def prepare(run: Run, rendered: render.Rendered) -> Prepared:
    """This build's own folder with the pre-staged downloads in it, its key, and MAX_JOBS."""
    spec = run.spec
    staged, notes = downloads.stage(rendered.downloads, spec.site.download_cache)
    for note in notes:
        run.log(note)
    private = run.opts.render_root / f".tmp-{spec.name}-{uuid.uuid4().hex[:12]}"
    context_dir = render.write(rendered, private, staged=staged)
    facts = engine.engine_facts(run.client)
    key = artifacts.artifact_key(rendered.files, artifacts.source_digest(rendered.spec), _image_id(run.client, spec.base.image))
    place_render(context_dir, run.opts.render_root / spec.name / key)
    res = jobs.engine_resources(facts)
    max_jobs, why = jobs.max_jobs(run.opts.jobs if run.opts.jobs != "auto" else spec.build.max_jobs,
                                  cpus=res.cpus, mem_bytes=res.mem_bytes, accelerator=spec.accelerator)
    run.log(f"buildctl: MAX_JOBS={max_jobs} ({why})")
    return Prepared(rendered, context_dir, key, max_jobs, facts)


def _image_id(client, ref: str) -> str:
    try:
        return client.images.get(ref).id
    except Exception:
        return f"unresolved:{ref}"  # the image build will say what is missing


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
