"""`invoke build --dry-run`: the key a request would use, whether its artifact is there and can be vouched
for, and what changed since the recipe's latest artifact; nothing built, nothing pulled, nothing stamped as
used. The engine is asked one thing: the base image's id (part of the key)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from buildctl import engine
from buildctl.engine import pull
from buildctl.errors import InputError
from buildctl.pipeline.stages import BuildOptions, KeyedRender, Run, prepare
from buildctl.recipe.loader import masked_dump
from buildctl.recipe.schema import Spec
from buildctl.store import artifacts, source_tree
from buildctl.store import key as key_mod
from buildctl.store.manifest import Manifest


@dataclass(frozen=True)
class DryRun:
    recipe: str
    key: str
    up_to_date: bool
    artifact: Path | None  # the artifact this request would be answered from
    latest: Path | None  # the recipe's latest artifact, `changed` is relative to it
    changed: list[dict[str, str]]
    base_image: str  # the base image's id, or why the key could not name one
    resolved: tuple[str, ...] = ()  # what the resolve step asked (a git ref's commit, git ls-remote), one line each
    source_rule: str | None = None  # a local source: what it sends and keys (store/source_tree.py)
    pip: str = ""  # what pip installs into the builder venv: the lock, or that pip chooses (render/pip_lock.py)
    spec: Spec | None = None  # the request resolved (git refs pinned): a build after it starts from this one
    # what was rendered and keyed of `spec`: a build after it takes them (pipeline.run's `keyed`), rendering
    # and keying once; it keys again only what it builds differently (prepare.build_inputs: a pulled base)
    keyed: KeyedRender | None = None

    def to_json(self) -> dict:
        return {"recipe": self.recipe, "key": self.key, "up_to_date": self.up_to_date,
                "artifact": str(self.artifact) if self.artifact else None,
                "latest": str(self.latest) if self.latest else None, "changed": self.changed,
                "base_image": self.base_image, "resolved": list(self.resolved),
                "source_rule": self.source_rule, "pip": self.pip}


def dry_run(spec: Spec, opts: BuildOptions) -> DryRun:
    from buildctl.render.pip_lock import pip_line

    run = Run.of(spec, opts)
    rendered = prepare.render_files(run)
    base = engine.EngineConnection.open(opts.engine_url, environ=opts.environ).inspect_image(spec.base.image)  # never pulled here
    base_id = prepare.base_image_id(run, base)
    policy = spec.site.pull or "missing"
    asks = base is not None and pull.decide(spec.base.image, policy, True) == "pull"
    inputs = prepare.request_inputs(run, rendered, base_id)
    root = opts.artifacts_root
    here = artifacts.artifact_dir(spec.name, inputs.key, root)
    published = artifacts.is_published(here)
    problem = _why_not_served(here, spec) if published else None
    up_to_date = published and problem is None
    latest, since = changes_since_latest(run.spec, inputs, root)  # the resolved spec: its commits
    changed: list[dict[str, str]] = []
    if problem is not None:
        changed.append({"kind": "artifact", "name": str(here), "change": problem})
    elif not up_to_date:
        changed += since
    return DryRun(spec.name, inputs.key, up_to_date, here if up_to_date else None, latest, changed,
                  f"{base_id} on the engine now; the build would ask the registry for {spec.base.image} first (pull "
                  f"{policy}), and the key takes the id it answers" if asks else
                  base_id if base is not None else f"absent on the engine: {spec.base.image} (the build pulls it "
                                                    f"by the pull policy, and the key then names its id)",
                  tuple(run.log.lines),
                  source_tree.rule(Path(spec.framework.source.path)) if spec.framework.source.kind == "path" else None,
                  pip_line(spec, "pip.lock" in rendered.files), run.spec, KeyedRender(run.spec, rendered, inputs))


def changes_since_latest(spec: Spec, inputs: key_mod.KeyInputs, root: Path | None) -> tuple[Path | None, list[dict]]:
    """The recipe's latest artifact and what differs between its key's inputs and `inputs` (store.key.changed);
    (None, []) when the recipe has none."""
    latest = artifacts.newest(spec.name, root)
    if latest is None:
        return None, []
    try:
        was = Manifest.read(latest)
    except InputError as e:
        return latest, [{"kind": "artifact", "name": str(latest), "change": str(e)}]
    return latest, key_mod.changed(inputs, key_mod.KeyInputs.from_json(was.key_inputs), masked_dump(spec),
                                   was.resolved_recipe)


def _why_not_served(artifact: Path, spec: Spec) -> str | None:
    """What the build would find wrong with the artifact of this key (pipeline._found): a wheel that is not
    the one published, a manifest of an older buildctl without the runtime image's context, or a policy of the
    recipe it fails (the size guard: the build refuses it at the wheel step)."""
    problem = artifacts.unvouched(artifact)
    if problem is not None:
        return problem
    try:
        manifest = Manifest.read(artifact)
    except InputError as e:
        return str(e)
    if manifest.runtime is None:
        return "records no runtime image context (an older buildctl built it)"
    from buildctl.pipeline.stages import artifact as artifact_stage

    section = manifest.portability
    return artifact_stage.refusal(spec, section.model_dump(mode="json") if section is not None else None)
