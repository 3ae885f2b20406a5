"""verify: the published wheel in a fresh container of the recipe's runtime image.

The runtime image is built from the context the artifact records (stages.artifact), never from
the recipe rendered again: what is verified is what was built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from buildctl import engine
from buildctl.engine import registry
from buildctl.engine.dockerfile import recorded_base_image_arg
from buildctl.errors import BuildctlError
from buildctl.pipeline.engine_names import image_tag
from buildctl.pipeline.stages import Published, Verified
from buildctl.pipeline.stages.artifact import recorded_runtime
from buildctl.recipe.schema import Spec
from buildctl.secrets import proxy_env, split_credentials
from buildctl.store import artifacts
from buildctl.verify.options import VerifyOptions, connected

if TYPE_CHECKING:
    from rich.console import Console


def stored_report(published: Published, spec: Spec):
    """The passing verification report stored beside an unchanged artifact, for this very wheel, made against
    the recipe as it is now (its expectations: verify.expect and the pins) by the verification's files as they
    are now; else None (a report that records neither, an older buildctl's, proves nothing of them)."""
    from buildctl.verify import report as rep
    from buildctl.verify.runner import spec_facts

    path = published.artifact / rep.JSON_NAME
    if not path.is_file() or not published.manifest.wheels:
        return None
    own = published.manifest.framework_wheel  # None: a prebuilt framework, whose report names no wheel
    try:
        report = rep.load_report(path)
    except (BuildctlError, KeyError, TypeError, ValueError):
        return None
    expected = own.sha256 if own is not None else None
    now = spec_facts(spec)
    made_for = {k: (report.spec or {}).get(k) for k in ("sha256", "checks_sha256")}
    if made_for != {k: now[k] for k in made_for}:
        return None
    return report if report.ok and (report.wheel or {}).get("sha256") == expected else None


def _bases(context_dir: Path, spec: Spec) -> list[str]:
    """The images the runtime image is built FROM, as its Dockerfile names them."""
    try:
        return engine.base_image_refs((context_dir / "Dockerfile").read_text(errors="replace"), proxy_env(spec))
    except (OSError, BuildctlError):
        return []  # the image build says what is wrong


@dataclass(frozen=True)
class Recorded:
    """What a published artifact's manifest records of its images: the runtime image's name in a registry
    (`image_key`) and the base image's id its key names."""

    image_key: str = ""
    base_image_id: str = ""


def runtime_image(spec: Spec, key: str, *, client, context_dir: Path, namespace: str,
                  on_line: Callable[[str], None], secrets: Iterable[str] = (),
                  recorded: Recorded = Recorded()) -> str:
    """The recipe's runtime image (base + toolchain runtime + venv): where verification installs the wheel.
    Pulled from the site registry when another engine built it (by its `image_key`, as the manifest records
    it); built FROM the base id the key names while the engine has it (else the tag: an old artifact)."""
    image_key = recorded.image_key
    tag = image_tag(spec.name, key, namespace, target="runtime")
    if engine.image_exists(client, tag):
        return tag
    shared = registry.Shared.of(spec, client, image_key, on_line)
    if shared and shared.fetch("runtime", tag):
        return tag
    credentials = split_credentials(spec)[1]
    engine.build_image(
        client,
        engine.ImageSpec(
            context_dir,
            tag,
            target="runtime",
            buildargs={**proxy_env(spec), **recorded_base_image_arg(client, recorded.base_image_id)},
            network_mode=engine.network_mode_for(spec.site.network),
            labels=engine.buildctl_labels(recipe=spec.name, namespace=namespace),
        ),
        on_line=on_line,
        secrets=[*secrets, *credentials.values()],
        credentials=credentials,
    )
    if shared:
        shared.share("runtime", tag)
    return tag


def artifact_runtime_image(spec: Spec, published: Published, *, client, context_dir: Path | None = None,
                           on_line: Callable[[str], None], secrets: Iterable[str] = (),
                           namespace: str | None = None) -> tuple[str, str]:
    """The runtime image of a published artifact (built from the context it records unless `context_dir`
    names the build's own) and the namespace it was built in; both images stamped as used."""
    artifact, manifest = published.artifact, published.manifest
    if context_dir is None:
        context_dir, _ = recorded_runtime(artifact, manifest)
    # the namespace the artifact was built in (its root's, for manifests older than the field)
    namespace = namespace or manifest.namespace or artifacts.namespace(artifact.parent.parent)
    # invoke clean: the runtime image's base is in use (stamped first: the image may be built from it now)
    artifacts.record_images(client, _bases(context_dir, spec), artifact.parent.parent)
    image = runtime_image(spec, published.key, client=client, context_dir=context_dir, namespace=namespace,
                          on_line=on_line, secrets=secrets,
                          recorded=Recorded(manifest.runtime.image_key if manifest.runtime else "",
                                            (manifest.key_inputs or {}).get("base_image", "")))
    artifacts.record_images(client, [image], artifact.parent.parent)
    return image, namespace


@dataclass(frozen=True)
class OwnBuild:
    """A build verifying what it has just built: its own rendered folder (the same files the artifact
    records), its secrets (masked in the log) and the namespace of its engine objects."""

    context_dir: Path | None
    secrets: Iterable[str] = ()
    namespace: str | None = None


def verify(spec: Spec, published: Published, *, client=None, on_line: Callable[[str], None], console: Console,
           options: VerifyOptions | None = None, own: OwnBuild | None = None) -> Verified:
    """Verify a published artifact's wheel; the report is stored beside it and printed on `console` (the view's
    or the command's). Raises VerificationFailed (with the report) when an expectation does not hold.

    `own`: the build that made it; a verify run on its own (None) builds the runtime image from the
    artifact's recorded context."""
    from buildctl.verify import runner

    own = own or OwnBuild(None)
    context_dir, secrets, namespace = own.context_dir, own.secrets, own.namespace

    options = options or VerifyOptions()
    artifact, manifest = published.artifact, published.manifest
    # A package tried beside the set is a question about the set, not its verification: its own folder
    if options.beside:
        from buildctl.verify.extensions import beside_folder

        out_dir = artifact / "beside" / beside_folder(options.beside)
    else:
        out_dir = artifact
    client = connected(client, options)
    image, namespace = artifact_runtime_image(spec, published, client=client, context_dir=context_dir,
                                              on_line=on_line, secrets=secrets, namespace=namespace)
    own = manifest.framework_wheel  # None: a prebuilt framework, verified as the image has it, with its set
    wheel = artifact / own.file if own is not None else None
    options = replace(options, network_mode=engine.network_mode_for(spec.site.network),
                      artifacts_root=artifact.parent.parent)  # its use stamped where its artifact is
    report = runner.verify_wheel(wheel, spec=spec, options=options, image=image, out_dir=out_dir, artifact=artifact,
                                 client=client, console=console)
    return Verified(report, cached=False)
