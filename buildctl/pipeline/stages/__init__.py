"""The build's stages and the frozen records they hand each other (docs/architecture.md).

    spec ─fetch→ Prepared ─image→ ImageBuilt ─configure→ Configured ─compile→ Compiled ─publish→ Published
         ─verify→ Verified

Each stage is a function of a Run (what the whole build shares: the spec, the options, the engine,
the log) and the record before it; it returns the next record and changes none. A stage that
fails raises errors.StepFailed; the pipeline turns that into BuildFailed (stages.failure).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from buildctl.engine.lazy import EngineConnection
from buildctl.recipe.schema import Spec
from buildctl.render.rendering import Rendered
from buildctl.secrets import Credentials, secret_values_from_env_and_site, split_credentials
from buildctl.store import artifacts, git_refs
from buildctl.store.key import KeyInputs
from buildctl.verify.options import VerifyOptions

if TYPE_CHECKING:
    from buildctl.engine.snapshot import Snapshot
    from buildctl.pipeline.configure_gate import Gate
    from buildctl.store.manifest import Manifest
    from buildctl.verify.report import Report



# The steps a build may stop after (--until), in the order it runs them.
UNTIL_STEPS = ("image", "configure", "compile", "wheel", "extensions")


@dataclass(frozen=True)
class BuildOptions:
    jobs: str | int = "auto"
    verify: bool = True
    keep_container: bool = False
    memory: str | None = None  # container memory limit, e.g. "2g" (shared CI hosts; OOM repro)
    cpuset: str | None = None  # the CPUs the compile container may use (docker's --cpuset-cpus): bench/dist.py
    dist_local_jobs: str | int = "auto"  # with a dist scheduler: compiles run here at once (pipeline/build_cluster.py)
    render_root: Path = Path("build")
    template_cache: Path | None = None  # where rendering keeps compiled templates (the CLI: Settings.template_cache)
    artifacts_root: Path | None = None  # the CLI gives Settings.artifacts; None: artifacts/ of the current folder
    # The engine objects' namespace (the CLI gives Settings.namespace, BUILDCTL_NAMESPACE); None: the artifacts
    # root's (artifacts.namespace). Never read from the environment here.
    namespace: str | None = None
    verify_options: VerifyOptions = VerifyOptions()
    engine_url: str | None = None  # the engine to build on (--engine); None: DOCKER_HOST's, else the local one
    until: str | None = None  # one of UNTIL_STEPS: stop after that step, publish nothing
    targets: tuple[str, ...] = ()  # with until=compile: build only these ninja outputs (a sample)
    lock_timeout: float | None = None  # seconds; None: the recipe's build.timeout + LOCK_SLACK_S
    # --check-reproducible's second build (pipeline/rebuild_check.py): a fresh build directory mounted here, no
    # compile cache
    rebuild_dir: str | None = None
    offline: bool = False  # --offline: each git ref's last resolution here, no git ls-remote (store/git_refs.py)
    # The command's environment (Settings.environ(), handed down by the CLI; required): the secrets masked in what
    # the build writes, the host's key salt, the engine's DOCKER_* variables. Never shown nor compared.
    environ: Mapping[str, str] = field(kw_only=True, repr=False, compare=False)


class BuildLog:
    """The build's log as it streams: every line kept (build.log, the repro bundle) and passed on."""

    def __init__(self, on_line: Callable[[str], None] = lambda line: None) -> None:
        self.lines: list[str] = []
        self._on_line = on_line

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        self._on_line(line)

    def text(self, start: int = 0) -> str:
        return "\n".join(self.lines[start:])


@dataclass(frozen=True)
class Run:
    """What every stage of one build shares."""

    spec: Spec
    opts: BuildOptions
    log: BuildLog
    engine: EngineConnection | None  # docker-py connected when a stage first asks for `client`
    credentials: Credentials  # what the build needs at run time and nothing may record
    secrets: frozenset[str]  # values masked in every log, layer and file the build writes
    namespace: str  # the engine objects' namespace: the options', else the artifacts root's (artifacts.namespace)

    @classmethod
    def of(cls, spec: Spec, opts: BuildOptions, log: BuildLog | None = None,
           client: EngineConnection | Any = None) -> Run:
        """`client`: the engine's connection, or a docker client already connected. The resolve step runs
        here, before anything renders: each git ref pinned to its commit (store/git_refs.py)."""
        log = log or BuildLog()
        spec = git_refs.pin(spec, opts.artifacts_root, offline=opts.offline, on_note=log, environ=opts.environ)
        credentials = split_credentials(spec)[1]
        secrets = frozenset(secret_values_from_env_and_site(spec.site, opts.environ) | credentials.values())
        engine = client if client is None or isinstance(client, EngineConnection) else EngineConnection(client=client)
        namespace = artifacts.namespace(opts.artifacts_root, explicit=opts.namespace)
        return cls(spec, opts, log, engine, credentials, secrets, namespace)

    @property
    def client(self) -> Any:
        """The engine's docker client (docker.DockerClient), connected on first use."""
        return None if self.engine is None else self.engine.client


@dataclass(frozen=True)
class KeyedRender:
    """What a dry run (pipeline/dry_run.py) computed of a request: the spec as it resolved it, its rendered
    files and its key's inputs, read with the base image the engine had then. A build of that same spec starts
    from them (pipeline.run's `keyed`): a bisect step renders and keys once."""

    spec: Spec
    rendered: Rendered
    inputs: KeyInputs


@dataclass(frozen=True)
class Prepared:
    """fetch: the rendered files in this build's private folder (the images are built from exactly
    the files the key is computed from) and the artifact key; all an unchanged artifact needs."""

    rendered: Rendered
    context_dir: Path
    inputs: KeyInputs  # what the key is made of (manifest key_inputs; the no-op memo's source digest)
    image_key: str = ""  # what the images are made from (registry.image_key): their name in a registry
    # a local source's tar, made once at the key (store/source_tree.py): what configure and compile are sent
    source_snapshot: Snapshot | None = None

    @property
    def key(self) -> str:
        return self.inputs.key

    @property
    def base_image_id(self) -> str:  # part of the key: the no-op memo compares it with the engine's
        return self.inputs.base_image


@dataclass(frozen=True)
class Planned:
    """What only a build that compiles needs (prepare.plan): the engine's facts, MAX_JOBS within them,
    and the compile container's environment and mounts (a failure's repro bundle records these)."""

    prepared: Prepared
    max_jobs: int
    engine_facts: Mapping[str, Any]
    env: Mapping[str, str]  # the compile container's config: nothing secret; MAX_JOBS as planned
    mounts: Mapping[str, str]  # volume -> path in the container

    @property
    def key(self) -> str:
        return self.prepared.key

    def env_with_jobs(self, max_jobs: int | None) -> dict[str, str]:
        """The environment with MAX_JOBS as an attempt ran (an OOM retry halves it)."""
        return {**self.env, **({"MAX_JOBS": str(max_jobs)} if max_jobs else {})}


@dataclass(frozen=True)
class ImageBuilt:
    planned: Planned
    image_id: str  # the builder image

    @property
    def prepared(self) -> Prepared:
        return self.planned.prepared


@dataclass(frozen=True)
class Configured:
    """The build script ran up to its configure step in the key's build directory, and what CMake decided
    is what the recipe asks (the configure gate)."""

    image: ImageBuilt
    gate: Gate | None  # None: a framework not built here (prebuilt) configures nothing


@dataclass(frozen=True)
class Compiled:
    """The build script ran to its end; its outputs (wheel, versions, cache stats) are in out_dir."""

    image: ImageBuilt
    out_dir: Path
    max_jobs: int  # as the compile finished: halved once when memory killed the first attempt
    configure: Gate | None = None  # the configure gate's table (the manifest records it)
    # the build cluster's part (pipeline/build_cluster.py), when a scheduler was set
    dist: Mapping[str, Any] | None = None
    memory: Mapping[str, Any] | None = None  # the memory budget's record (pipeline/memory_budget.py), when it ran


@dataclass(frozen=True)
class Published:
    """The artifact folder: the wheel, build.log, manifest.json and the runtime image's context."""

    recipe: str
    key: str
    artifact: Path
    manifest: Manifest
    cached: bool  # found published already: nothing was built
    # False: its verification failed, so it was never published: `artifact` is the folder kept in failures/
    stored: bool = True


@dataclass(frozen=True)
class Verified:
    report: Report  # passing
    cached: bool  # the stored report of an unchanged artifact: no container ran
