"""`invoke build`: recipe → rendered folder → image → compile in a container → wheel → artifact → verify.

Stages run in order and hand plain data to the next. A failing stage leaves a repro bundle with a
diagnosis (repro.py) and raises BuildFailed; Ctrl-C/SIGTERM removes the build container and leaves
no partial artifact (the staging folder is deleted, the published folder appears only by rename).

Each build renders into a folder of its own (build/.tmp-<recipe>-*), computes the key from exactly
those files and builds its images from that folder, so two builds of one recipe started together
never build from each other's files; a copy is left in build/<recipe>/<key>/ to look at. The engine
objects it creates (image tags, volumes, the compile container) are named in the namespace of its
artifacts root (artifacts.namespace), so two roots never share a build directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from . import __version__, artifacts, diagnose, downloads, engine, jobs, remotecache, render, repro, resume
from .errors import BuildctlError, BuildFailed, EngineError, VerificationFailed
from .pull import ensure_images
from .recipe import masked_dump
from .secrets import mask_url, secret_values_from_env_and_site, split_credentials, strip_credentials
from .spec import Spec
from .ui import View

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
BUILD_COMMAND = ["/usr/local/bin/buildctl-build"]
# A build waits for another build of its key at most this much longer than that build may compile.
LOCK_SLACK_S = 2 * 3600
WORK_DIR = "/work"  # where the build directory is mounted (the build script's $WORK)


@dataclass
class BuildOptions:
    jobs: str | int = "auto"
    verify: bool = True
    keep_container: bool = False
    memory: str | None = None  # container memory limit, e.g. "2g" (shared CI hosts; OOM repro)
    render_root: Path = Path("build")
    artifacts_root: Path | None = None
    ca_texts: dict[str, str] = field(default_factory=dict)
    verify_kwargs: dict = field(default_factory=dict)
    until: str | None = None  # configure | compile | wheel: stop after that step, publish nothing
    targets: tuple[str, ...] = ()  # with until=compile: build only these ninja outputs (a sample)
    lock_timeout: float | None = None  # seconds; None: the recipe's build.timeout + LOCK_SLACK_S
    # --check-reproducible's second build (reproducible.py): a fresh build directory mounted here, no compile cache
    rebuild_dir: str | None = None


@dataclass
class BuildResult:
    recipe: str
    key: str
    artifact: Path
    manifest: dict
    cached: bool
    report: object | None = None  # verify.report.Report
    verify_error: Exception | None = None  # VerificationFailed: the wheel is built but not what was asked


@dataclass(frozen=True)
class PartialResult:
    """What `invoke build --until STEP` produced: the step's outputs, kept in out_dir."""

    recipe: str
    key: str
    until: str
    out_dir: Path
    volume: str  # the build-dir volume a full build resumes from


def _proxy_env(spec: Spec) -> dict[str, str]:
    """Proxy variables for build args and the container's config: without credentials (a proxy's
    password reaches the build with the other credentials, secrets.Credentials)."""
    site = spec.site
    env = {"HTTP_PROXY": site.http_proxy, "HTTPS_PROXY": site.https_proxy, "NO_PROXY": site.no_proxy}
    env = {k: strip_credentials(v) for k, v in env.items() if v}
    # Docker leaves its predefined proxy build args (upper and lower case) out of the image history.
    return {**env, **{k.lower(): v for k, v in env.items()}}


def spec_hash(spec: Spec) -> str:
    data = masked_dump(spec)
    data.pop("site", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _ns(namespace: str) -> str:
    """The namespace's part of an engine object's name: none for the default namespace (the names
    buildctl always used, so existing build directories and caches stay in use)."""
    return "" if namespace == artifacts.DEFAULT_NAMESPACE else f"{namespace}-"


def image_tag(recipe: str, key: str, namespace: str, target: str = "builder") -> str:
    """The tag of a build's builder image (or, target='runtime', its runtime image)."""
    return f"buildctl/{recipe}:{_ns(namespace)}{'runtime-' if target == 'runtime' else ''}{key}"


def compile_container_name(recipe: str, key: str, namespace: str) -> str:
    """One name per key and namespace: the engine refuses a second compile into the same build directory."""
    return f"buildctl-compile-{_ns(namespace)}{recipe}-{key}"


def work_volume_name(recipe: str, key: str, namespace: str) -> str:
    return f"buildctl-work-{_ns(namespace)}{recipe}-{key}"


def rebuild_volume_name(recipe: str, key: str, namespace: str) -> str:
    return f"buildctl-rebuild-{_ns(namespace)}{recipe}-{key}"


def volume_names(spec: Spec, key: str, namespace: str) -> tuple[str, str]:
    """The build-dir volume (per artifact key: a retry or a rerun after a failure resumes it; two
    different builds never share a tree) and the compile-cache volume (per toolchain image: builds
    with the same compilers share it, so a changed source recompiles only what changed); both in
    `namespace`."""
    tc = spec.toolchain
    compilers = json.dumps([spec.base.image, spec.base.distro, *(m.model_dump(mode="json") if m else None
                                                                 for m in (tc.cuda, tc.rocm, tc.ascend))],
                           sort_keys=True)
    toolchain = hashlib.sha256(compilers.encode()).hexdigest()[:12]
    # ccache hashes compiler contents (CCACHE_COMPILERCHECK=content), so sharing never mixes toolchains.
    return work_volume_name(spec.name, key, namespace), f"buildctl-cache-{_ns(namespace)}{spec.build.cache}-{toolchain}"


def retry_with_fewer_jobs(result: engine.ContainerResult, diagnosis, attempt: int, max_jobs: int | None) -> bool:
    """Retry a failed compile once with half the jobs: only when memory killed it (the engine's
    OOMKilled, or the compiler's own words in the log), never for a timeout or another SIGKILL."""
    if result.timed_out or attempt > 0 or not max_jobs or max_jobs <= 1:
        return False
    return result.oom_killed or getattr(diagnosis, "id", None) == "oom"


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


def _parse_kv(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _cache_stats(out_dir: Path, cache_url: str | None = None) -> dict:
    """hits, misses, hit rate from ccache --print-stats (tab-separated) or sccache's JSON stats; with
    ccache also the local volume's and the shared server's own figures (remotecache.stats)."""
    if (out_dir / "cache-stats.json").is_file():
        return _sccache_stats((out_dir / "cache-stats.json").read_text())
    if not (out_dir / "cache-stats.txt").is_file():
        return {}
    text = (out_dir / "cache-stats.txt").read_text()
    stats = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 2 and parts[1].strip().isdigit():
            stats[parts[0].strip()] = int(parts[1])
    hits = stats.get("direct_cache_hit", 0) + stats.get("preprocessed_cache_hit", 0)
    misses = stats.get("cache_miss", 0)
    total = hits + misses
    state_file = out_dir / remotecache.STATE_FILE
    state = state_file.read_text(errors="replace")[:500] if state_file.is_file() else ""
    return {"hits": hits, "misses": misses, "hit_rate": round(hits / total, 3) if total else None,
            **remotecache.stats(stats, state, cache_url)}


def _sccache_stats(text: str) -> dict:
    """sccache --show-stats --stats-format=json: hits and misses are per-language counters."""
    try:
        stats = json.loads(text).get("stats", {})
        hits = sum((stats.get("cache_hits") or {}).get("counts", {}).values())
        misses = sum((stats.get("cache_misses") or {}).get("counts", {}).values())
    except (ValueError, AttributeError, TypeError):
        return {}
    total = hits + misses
    return {"hits": hits, "misses": misses, "hit_rate": round(hits / total, 3) if total else None}


class Build:
    """One run of the pipeline for one spec."""

    def __init__(self, spec: Spec, opts: BuildOptions, view: View):
        self.spec, self.opts, self.view = spec, opts, view
        self.log_lines: list[str] = []
        # What the build needs at run time and nothing may record (the rendered files carry none).
        self.credentials = split_credentials(spec)[1]
        self.secrets = secret_values_from_env_and_site(spec.site) | self.credentials.values()
        self.client = None
        self.rendered: render.Rendered | None = None
        self.context_dir: Path | None = None
        self.image_id: str | None = None
        self.max_jobs: int | None = None
        self.key: str | None = None
        self.namespace: str = artifacts.namespace(opts.artifacts_root)
        self.engine_facts: dict = {}

    # -- helpers ---------------------------------------------------------------------------------
    def _on_line(self, line: str) -> None:
        self.log_lines.append(line)
        self.view.line(line)

    def _fail(self, exc: engine.StepFailed) -> BuildFailed:
        self.view.done(self.view.current or exc.step, "failed")
        log = "\n".join(self.log_lines) if self.log_lines else exc.log
        context = {"max_jobs": self.max_jobs, "python": f"{self.spec.python.venv}/bin/python"}
        if self.spec.toolchain.cuda:
            context.update(cuda_version=self.spec.toolchain.cuda.major_minor, cuda_arch=list(self.spec.build.cuda_arch))
        if self.spec.toolchain.nccl:
            context["nccl_pin"] = self.spec.toolchain.nccl.version
        step = self.view.current if exc.step == "compile" and self.view.current else exc.step
        diag = diagnose.diagnose(log, step=step, exit_code=exc.returncode, oom_killed=exc.oom_killed,
                                 context=context)
        bundle = repro.write_bundle(
            spec=self.spec, rendered=self.rendered, context_dir=self.context_dir, step=step,
            exit_code=exc.returncode, log=log, diagnosis=diag, image_id=self.image_id,
            command=BUILD_COMMAND if exc.step == "compile" else None,
            env=self._container_env(), volumes=self._volumes() if self.key else {},
            network=engine.network_mode_for(self.spec.site.network), memory=self.opts.memory, secrets=self.secrets,
            namespace=self.namespace, root=self.opts.artifacts_root,
        )
        first = diagnose.first_error(log)
        lines = [f"build of {self.spec.name} failed in step {step} (exit {exc.returncode})"]
        if exc.timed_out:
            lines.append(str(exc))
        elif diag:
            lines.append(diagnose.render_diagnosis(diag))
        elif first:
            lines.append("first error:\n  " + "\n  ".join(first[:20]))
        lines.append(f"repro bundle: {bundle}  (replay: invoke repro {bundle})")
        err = BuildFailed("\n".join(lines))
        err.bundle, err.diagnosis = bundle, diag
        return err

    def _container_env(self) -> dict[str, str]:
        env = dict(_proxy_env(self.spec))
        if self.max_jobs:
            env["MAX_JOBS"] = str(self.max_jobs)
        if self.opts.until:
            env["BUILDCTL_UNTIL"] = self.opts.until
        if self.opts.targets:
            env["BUILDCTL_TARGETS"] = " ".join(self.opts.targets)
        if self.opts.rebuild_dir:
            env.update(BUILDCTL_WORK=self.opts.rebuild_dir, BUILDCTL_COMPILE_CACHE="off")
        return env

    def _compile_credentials(self):
        """The build's credentials plus the shared compile cache's URL: the container gets them as a
        file at its start (never in its config, the rendered files or the key)."""
        url = self.spec.site.cache_url
        if not url or self.spec.build.cache != "ccache" or self.opts.rebuild_dir:
            return self.credentials
        return dataclasses.replace(self.credentials, env=(*self.credentials.env, *remotecache.runtime_env(url)))

    def _volumes(self) -> dict[str, str]:
        if self.opts.rebuild_dir:
            return {rebuild_volume_name(self.spec.name, self.key, self.namespace): self.opts.rebuild_dir}
        work, cache = volume_names(self.spec, self.key, self.namespace)
        return {work: WORK_DIR, cache: "/cache"}

    def cleanup(self) -> None:
        """Remove the build's private render folder."""
        if self.context_dir is not None:
            shutil.rmtree(self.context_dir, ignore_errors=True)

    # -- stages ----------------------------------------------------------------------------------
    def prepare(self) -> None:
        """fetch: render (pure), stage pre-downloaded files, connect, compute the artifact key."""
        spec = self.spec
        self.view.stage("fetch")
        self.rendered = render.render(spec, ca_texts=self.opts.ca_texts)
        staged, notes = downloads.stage(self.rendered.downloads, spec.site.download_cache)
        for n in notes:
            self._on_line(n)
        # This build's own folder: the images are built from exactly the files the key is computed from.
        private = self.opts.render_root / f".tmp-{spec.name}-{uuid.uuid4().hex[:12]}"
        self.context_dir = render.write(self.rendered, private, staged=staged)
        self.client = engine.connect()
        self.engine_facts = engine.engine_facts(self.client)
        ensure_images(self.client, [spec.base.image], spec.site.pull, distro=spec.base.distro, on_line=self._on_line)
        base_id = _image_id(self.client, spec.base.image)
        self.key = artifacts.artifact_key(self.rendered.files, artifacts.source_digest(self.rendered.spec), base_id)
        place_render(self.context_dir, self.opts.render_root / spec.name / self.key)
        res = jobs.engine_resources(self.engine_facts)
        self.max_jobs, why = jobs.max_jobs(self.opts.jobs if self.opts.jobs != "auto" else spec.build.max_jobs,
                                           cpus=res.cpus, mem_bytes=res.mem_bytes, accelerator=spec.accelerator)
        self._on_line(f"buildctl: MAX_JOBS={self.max_jobs} ({why})")
        self.view.done("fetch")

    def build_images(self) -> None:
        self.view.stage("image")
        tag = image_tag(self.spec.name, self.key, self.namespace)
        common = dict(buildargs=_proxy_env(self.spec), network_mode=engine.network_mode_for(self.spec.site.network), on_line=self._on_line,
                      secrets=self.secrets, credentials=self.credentials,
                      labels=engine.buildctl_labels(recipe=self.spec.name, namespace=self.namespace))
        self.image_id = engine.build_image(self.client, self.context_dir, tag, target="builder", **common)
        self.view.done("image")

    def compile(self, out_dir: Path) -> engine.ContainerResult:
        self.view.stage("source")  # then configure, compile, wheel, from the script's step lines
        spec = self.spec
        src = spec.framework.source
        work = self.opts.rebuild_dir or WORK_DIR
        inputs = {f"{work}/src": Path(src.path)} if src.kind == "path" else None
        name = compile_container_name(spec.name, self.key, self.namespace)
        deadline = time.monotonic() + spec.build.timeout_s
        attempt = 0
        if spec.site.cache_url and spec.build.cache != "ccache":
            self._on_line(f"buildctl: warning: the shared compile cache works through ccache, and build.cache is "
                          f"{spec.build.cache}; compiling without it (fix: --set build.cache=ccache)")
        while True:
            self._clear_compile_container(name)
            first_line = len(self.log_lines)
            result = engine.run_container(
                self.client, self.image_id, BUILD_COMMAND, env=self._container_env(), inputs=inputs,
                outputs={f"{work}/out": out_dir}, volumes=self._volumes(), network_mode=engine.network_mode_for(spec.site.network),
                mem_limit=self.opts.memory, on_line=self._on_line, keep=self.opts.keep_container,
                secrets=self.secrets, credentials=self._compile_credentials(),
                labels=engine.buildctl_labels({"buildctl.step": "compile"}, recipe=spec.name, namespace=self.namespace),
                name=name, timeout=max(1.0, deadline - time.monotonic()), on_interrupt=self._record_interrupt,
            )
            if result.ok:
                break
            if result.timed_out:
                raise engine.StepFailed(
                    "compile", result.exit_code, result.log, timed_out=True,
                    detail=f"the compile ran past build.timeout ({spec.build.timeout}) and was stopped; fix: raise "
                           f"build.timeout (e.g. --set build.timeout=24h) or build less (fewer archs or features)")
            log = "\n".join(self.log_lines[first_line:])  # this attempt only
            diag = diagnose.diagnose(log, exit_code=result.exit_code, oom_killed=result.oom_killed)
            if retry_with_fewer_jobs(result, diag, attempt, self.max_jobs):
                attempt += 1
                self.max_jobs = max(1, self.max_jobs // 2)
                self._on_line(f"buildctl: the compiler was killed for memory; retrying once with "
                              f"MAX_JOBS={self.max_jobs}, resuming the same build directory")
                continue
            raise engine.StepFailed("compile", result.exit_code, result.log, oom_killed=result.oom_killed)
        self.view.done(self.view.current or "compile")
        return result

    def _clear_compile_container(self, name: str) -> None:
        """A stopped container of this key's name (left by a killed buildctl, or kept with
        --keep-container) is removed; a running one means another build compiles this key."""
        state = engine.container_state(self.client, name)
        if state is None:
            return
        if state.get("Running"):
            raise EngineError(
                f"another build of {self.spec.name} key {self.key} is compiling in container {name} (namespace "
                f"{self.namespace}, since {state.get('StartedAt', '?')}); fix: wait for it, or `docker rm -f {name}` "
                "if the buildctl that started it is gone")
        engine.remove_container(self.client, name)

    def _record_interrupt(self, container_id: str) -> None:
        """Ctrl-C/SIGTERM while compiling: what was in flight (lost, done again) and where ninja was."""
        top = self.client.api.top(container_id, ps_args="-eo pid,etimes,comm")
        record = resume.interrupt_record(top, self.log_lines, "docker top of the compile container at the interrupt")
        path = resume.write(self.spec.name, self.key, record, self.opts.artifacts_root)
        lost = f"{len(record['in_flight'])} compile(s) in flight, {record['lost_core_s']} core-s"
        self._on_line(f"buildctl: interrupted at {record['at_step'] or 'an unknown step'} ({lost} lost); "
                      f"`invoke build` again resumes from the build directory (record: {path})")

    def assemble(self, out_dir: Path, staging: Path, timings: dict) -> dict:
        self.view.stage("publish")
        wheels = sorted(out_dir.glob("*.whl"))
        if not wheels:
            raise engine.StepFailed("wheel", 1, "\n".join(self.log_lines), detail="the build produced no wheel")
        versions = _parse_kv((out_dir / "versions.txt").read_text()) if (out_dir / "versions.txt").exists() else {}
        cache = _cache_stats(out_dir, self.spec.site.cache_url if self.spec.build.cache == "ccache" else None)
        peak = (out_dir / "peak-memory.txt").read_text().strip() if (out_dir / "peak-memory.txt").exists() else ""
        counts = _parse_kv((out_dir / "resumed.txt").read_text()) if (out_dir / "resumed.txt").is_file() else {}
        source_date_epoch = versions.pop("source_date_epoch", "")
        interrupt, warning = resume.read(self.spec.name, self.key, self.opts.artifacts_root)
        if warning:
            self._on_line(f"buildctl: {warning}")
        entries = []
        for w in wheels:
            shutil.copy2(w, staging / w.name)
            entries.append({"file": w.name, "sha256": artifacts.sha256_of(w), "bytes": w.stat().st_size})
        (staging / "build.log").write_text("\n".join(self.log_lines) + "\n")
        if (out_dir / "ninja_log.txt").is_file():  # per-step compile times, for bench/realbuild.py
            shutil.copy2(out_dir / "ninja_log.txt", staging / "ninja_log.txt")
        spec = self.spec
        src = spec.framework.source
        manifest = {
            "schema_version": 1,
            "recipe": spec.name,
            "key": self.key,
            "spec_sha256": spec_hash(spec),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "buildctl_version": __version__,
            "framework": spec.framework.name,
            "source": {"kind": src.kind, "git": src.git and mask_url(src.git), "ref": src.ref,
                       "path": src.path, "tarball": src.tarball and mask_url(src.tarball.url),
                       "commit": versions.pop("source_commit", None)},
            "source_date_epoch": int(source_date_epoch) if source_date_epoch.isdigit() else None,
            "build_type": spec.build.type,
            "cuda_arch": list(spec.build.cuda_arch),
            "rocm_arch": list(spec.toolchain.rocm.arch) if spec.toolchain.rocm else [],
            "accelerator": spec.accelerator,
            "toolchain": versions,
            "pins": _pins(spec),
            "max_jobs": self.max_jobs,
            "peak_memory_bytes": int(peak) if peak.isdigit() else None,
            "compile_cache": {"tool": spec.build.cache, **cache},
            "resumed": resume.resumed_section(counts, interrupt),
            "wheels": entries,
            "namespace": self.namespace,
            "images": {"builder": self.image_id, "base": spec.base.image},
            "durations_s": timings,
            "engine": {k: self.engine_facts.get(k) for k in ("server_version", "api_version", "storage_driver",
                                                             "os", "arch", "cpus", "memory_bytes")},
            "host": {"platform": platform.platform(), "python": platform.python_version(),
                     "cpus": os.cpu_count()},
            "resolved_recipe": masked_dump(spec),
        }
        return manifest


def _pins(spec: Spec) -> dict:
    tc = spec.toolchain
    return {"cuda": tc.cuda.version if tc.cuda else None, "cudnn": tc.cudnn.version if tc.cudnn else None,
            "nccl": tc.nccl.version if tc.nccl and tc.nccl.install != "none" else None,
            "rocm": tc.rocm.version if tc.rocm else None, "cann": tc.ascend.cann_version if tc.ascend else None,
            "python": spec.python.version}


def _image_id(client, ref: str) -> str:
    try:
        return client.images.get(ref).id
    except Exception:
        return f"unresolved:{ref}"  # the image build will say what is missing


def run(spec: Spec, opts: BuildOptions, view: View) -> BuildResult:
    """Build (or find) the artifact of `spec`; verify it unless told not to."""
    b = Build(spec, opts, view)
    try:
        return _run(b)
    finally:
        b.cleanup()


def _run(b: Build) -> BuildResult:
    spec, opts, view = b.spec, b.opts, b.view
    t0 = time.monotonic()
    lock_timeout = opts.lock_timeout if opts.lock_timeout is not None else spec.build.timeout_s + LOCK_SLACK_S
    if opts.until:
        try:
            b.prepare()
            with artifacts.key_lock(spec.name, b.key, opts.artifacts_root, timeout=lock_timeout, on_wait=b._on_line):
                return _build_until(b)
        except engine.StepFailed as exc:
            raise b._fail(exc) from None
    try:
        b.prepare()
        found = artifacts.lookup(spec.name, b.key, opts.artifacts_root)
        if found is None:
            with artifacts.key_lock(spec.name, b.key, opts.artifacts_root, timeout=lock_timeout, on_wait=b._on_line):
                found = artifacts.lookup(spec.name, b.key, opts.artifacts_root)  # built while we waited?
                if found is None:
                    found = _build(b)
                    cached = False
                else:
                    cached = True
        else:
            cached = True
    except engine.StepFailed as exc:
        raise b._fail(exc) from None
    if cached:
        for name in ("image", "compile", "wheel"):
            view.status[name] = "cached"
    manifest = json.loads((found / "manifest.json").read_text())
    result = BuildResult(spec.name, b.key, found, manifest, cached)
    if opts.verify:
        stored = _stored_report(found, manifest) if cached else None
        if stored is not None:  # a no-op starts no container: the artifact passed verification already
            view.status["verify"] = "cached"
            result.report = stored
        else:
            try:
                result.report = _verify(b, found, manifest)
            except VerificationFailed as e:  # built and published, but not what the recipe asks for
                result.verify_error = e
    manifest_total = round(time.monotonic() - t0, 2)
    view.durations.setdefault("total", manifest_total)
    return result


def diagnose_verification(result: BuildResult):
    """The known cause of a failed verification (e.g. the wheel loads another NCCL than pinned),
    also recorded beside the artifact as diagnosis.json; None when no signature matches."""
    report_file = result.artifact / "report.json"
    if not report_file.is_file():
        return None
    spec_pins = result.manifest.get("pins") or {}
    diag = diagnose.diagnose("", step="verify", report=json.loads(report_file.read_text()),
                             context={"nccl_pin": spec_pins.get("nccl")})
    if diag is not None:
        artifacts.write_json(result.artifact / "diagnosis.json", diag.to_dict())
    return diag


def _build(b: Build) -> Path:
    spec, opts = b.spec, b.opts
    b.build_images()
    artifacts.record_use({"image": [b.image_id], "volume": list(b._volumes())}, opts.artifacts_root)  # invoke clean
    with artifacts.staging(spec.name, b.key, opts.artifacts_root) as staging:
        out_dir = Path(tempfile.mkdtemp(prefix="buildctl-out-"))
        try:
            b.compile(out_dir)
            manifest = b.assemble(out_dir, staging, {})
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
        b.view.stage("publish")
        manifest["durations_s"] = dict(b.view.durations)
        artifacts.write_json(staging / "manifest.json", manifest)
        (staging / "recipe.resolved.yaml").write_text(b.rendered.files["recipe.resolved.yaml"])
        final = artifacts.publish(staging, spec.name, b.key, opts.artifacts_root)
        resume.discard(spec.name, b.key, opts.artifacts_root)  # the manifest holds it now
        b.view.done("publish")
    return final


def _build_until(b: Build) -> PartialResult:
    """Run the build script up to opts.until in the key's build directory; keep what it produced."""
    b.build_images()
    # outside the render folder, and per key: two --until builds of one recipe never share it
    out_dir = b.opts.render_root / ".until" / b.spec.name / b.key / b.opts.until
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    b.compile(out_dir)
    (out_dir / "build.log").write_text("\n".join(b.log_lines) + "\n")
    work, _ = volume_names(b.spec, b.key, b.namespace)
    return PartialResult(b.spec.name, b.key, b.opts.until, out_dir, work)


def _stored_report(artifact: Path, manifest: dict):
    """The passing verification report stored beside an unchanged artifact, for this very wheel; else None."""
    from .verify import report as rep

    path = artifact / rep.JSON_NAME
    wheels = manifest.get("wheels") or []
    if not path.is_file() or not wheels:
        return None
    try:
        report = rep.load_report(path)
    except (BuildctlError, KeyError, TypeError, ValueError):
        return None
    return report if report.ok and (report.wheel or {}).get("sha256") == wheels[0].get("sha256") else None


def _verify(b: Build, artifact: Path, manifest: dict):  # -> verify.report.Report
    """Verify the wheel in a fresh container of the recipe's runtime image; report stored beside it."""
    b.view.stage("verify")
    if b.client is None:
        b.client = engine.connect()
    try:
        report = verify_artifact(b.spec, artifact, manifest, client=b.client, context_dir=b.context_dir,
                                 on_line=b._on_line, secrets=b.secrets, namespace=b.namespace,
                                 **b.opts.verify_kwargs)
    except BaseException:
        b.view.done("verify", "failed")
        raise
    b.view.done("verify")
    return report


def runtime_image(spec: Spec, key: str, *, client, context_dir: Path, namespace: str, on_line=None,
                  secrets=()) -> str:
    """The recipe's runtime image (base + toolchain runtime + venv): where verification installs the wheel."""
    tag = image_tag(spec.name, key, namespace, target="runtime")
    if not engine.image_exists(client, tag):
        credentials = split_credentials(spec)[1]
        engine.build_image(client, context_dir, tag, target="runtime", buildargs=_proxy_env(spec),
                           network_mode=engine.network_mode_for(spec.site.network), on_line=on_line,
                           secrets=[*secrets, *credentials.values()], credentials=credentials,
                           labels=engine.buildctl_labels(recipe=spec.name, namespace=namespace))
    return tag


def verify_artifact(spec: Spec, artifact: Path, manifest: dict | None = None, *, client=None,
                    context_dir: Path | None = None, on_line=None, secrets=(), namespace: str | None = None,
                    ca_texts: dict[str, str] | None = None, **verify_kwargs):
    """Verify a published artifact's wheel in a fresh container of its recipe's runtime image.

    Without `context_dir` (a verify run on its own) the recipe is rendered again, with `ca_texts` as
    the build had them, into a private folder removed afterwards."""
    from .verify import runner

    manifest = manifest or json.loads((artifact / "manifest.json").read_text())
    # the namespace the artifact was built in (its root's, for manifests older than the field)
    namespace = namespace or manifest.get("namespace") or artifacts.namespace(artifact.parent.parent)
    client = client or engine.connect()
    private = None
    if context_dir is None:  # a verify run on its own: render the same files again (pure), privately
        private = Path(tempfile.mkdtemp(prefix=f"buildctl-render-{spec.name}-"))
        context_dir = render.write(render.render(spec, ca_texts=ca_texts), private / "context")
    try:
        image = runtime_image(spec, manifest["key"], client=client, context_dir=context_dir, namespace=namespace,
                              on_line=on_line, secrets=secrets)
    finally:
        if private is not None:
            shutil.rmtree(private, ignore_errors=True)
    wheel = artifact / manifest["wheels"][0]["file"]
    return runner.verify_wheel(wheel, spec=spec, image=image, out_dir=artifact, network_mode=engine.network_mode_for(spec.site.network),
                               client=client, **verify_kwargs)
