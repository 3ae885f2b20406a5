"""`invoke verify --image`: the framework an existing image holds, probed in a fresh container of it
(never pulled, by id, as root, no shell, no ENTRYPOINT), checked against the expectations given."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from buildctl.errors import InputError
from buildctl.in_container import probe_inputs
from buildctl.recipe.schema import Spec
from buildctl.store import artifacts
from buildctl.verify import report as rep
from buildctl.verify.expectations import Expectations, evaluate, verdict
from buildctl.verify.options import VerifyOptions, connected
from buildctl.verify.runner import (
    MODULES,
    check_probe_options,
    console_lines,
    engine_gives_gpus,
    inspect_image,
    probe_args,
    publish_report,
    resolved,
    spec_facts,
    timed,
)
from buildctl.verify.targets import LineSink, last_lines, probe_in_container

# A reference as Docker reads one (name[:tag][@digest], or an image id); refused before the engine sees it.
IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}")
# `python3` (looked up on the image's PATH) or an absolute path; the probe runs it directly, no shell.
PYTHON_PATH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}|(/[A-Za-z0-9._+-]+){1,32}")
# What the engine says when the container's command is not there (runc's exec error, on start).
_NO_EXECUTABLE = re.compile(r"executable file not found|no such file or directory|not a directory|permission denied")


def default_image_out_dir(reference: str, image_id: str, root: Path | None = None) -> Path:
    """<root>/verify/images/<reference>-<id12>/ (root: artifacts/ when None): one folder per image verified, the
    tag kept readable."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", reference).strip("._") or "image"
    return artifacts.root_or_default(root) / "verify" / "images" / f"{safe[:100]}-{image_id.removeprefix('sha256:')[:12]}"


def verify_image(
    image: str,
    *,
    python: str = "python3",
    expect: Expectations | None = None,
    spec: Spec | None = None,
    options: VerifyOptions | None = None,
    out_dir: Path | None = None,
    console: Console,
    client=None,
) -> rep.Report:
    """Verify the framework installed in `image`: the probe runs with the image's own `python` in a fresh
    container of it (root, removed on every path), nothing installed; the same report, checks and files
    as verify_wheel, printed on `console` as verify_wheel prints them (the caller's, as the JSON is).
    Expectations: the recipe's (`spec`), then `expect` over them.

    Raises InputError for a bad reference or Python path, an image the engine lacks or a Python the image
    lacks; VerificationFailed (one line, after writing the report) when a check fails.
    """
    from buildctl import engine
    from buildctl.verify.expectations import merge

    options = options or VerifyOptions()
    _check_arguments(image, python, options)
    client = connected(client, options)
    info = inspect_image(client, image)
    ident = str(info["Id"])
    out_dir = Path(out_dir) if out_dir else default_image_out_dir(image, ident, options.artifacts_root)
    options = resolved(options, spec, options.module or "torch")
    on_line = console_lines(console)
    gpus = engine_gives_gpus(client)  # the image may hold a CUDA build: give it the GPUs its engine has
    console.print(f"[bold]verify[/] {escape(image)} ({escape(ident[:19])}, {escape(python)}, fresh container)")
    if engine.is_buildctl_image(info.get("RepoTags") or [], (info.get("Config") or {}).get("Labels")):
        artifacts.record_images(client, [ident], options.artifacts_root)  # for invoke clean (by id: any name); a user's image is not its to age
    probe, environment = timed(lambda: _probe_image(client, image, ident, python, options, gpus, on_line))
    exp = Expectations.from_spec(spec) if spec is not None else Expectations()
    if expect is not None:
        exp = merge(exp, expect)
    report = rep.Report(
        wheel=None, image={"reference": image, "id": ident, "python": python}, mode="image", module=options.module,
        environment=environment, expectations=exp.to_dict(), checks=evaluate(exp, probe, subject="image"),
        probe=probe, verdict=verdict(probe), spec=spec_facts(spec),
    )
    return publish_report(report, out_dir, options, console)


def _check_arguments(image: str, python: str, options: VerifyOptions) -> None:
    """The image reference, the Python path, the module and the probe's options, each refused in one line when
    malformed, before the engine is asked."""
    if not IMAGE_REF.fullmatch(image or ""):
        raise InputError(f"--image {ascii(str(image)[:100])[1:-1]}: not an image reference; fix: give a local image as "
                         "docker images lists it, e.g. --image nvcr.io/nvidia/pytorch:25.01-py3")
    if not PYTHON_PATH.fullmatch(python or ""):
        raise InputError(f"--python {ascii(str(python)[:100])[1:-1]}: not a command name or an absolute path; fix: "
                         "e.g. --python python3 (on the image's PATH) or --python /opt/venv/bin/python")
    module = options.module or "torch"
    if module not in MODULES.values():
        raise InputError(f"--module {ascii(str(module)[:40])[1:-1]}: not a framework module buildctl probes; fix: --module torch")
    check_probe_options(options)


def _probe_image(client, image: str, ident: str, python: str, options: VerifyOptions, gpus: bool,
                 on_line: LineSink) -> tuple[dict, dict]:
    """The probe, run by the image's own `python` in a fresh container of `ident` (`image`'s id); (probe JSON,
    environment facts). InputError when the image has no such Python."""
    from buildctl import engine
    from buildctl.engine import EngineError

    with tempfile.TemporaryDirectory(prefix="buildctl-verify-empty-") as empty:
        try:
            # By id, not by name: what runs is what is recorded, even if the tag moves meanwhile. As root, so
            # that the probe can write /verify/out whatever USER the image sets; no shell (distroless images)
            # and no ENTRYPOINT (an image's `python` or launcher script would take the command as arguments).
            command = [python, "/verify/in/probe.py", *probe_args(options, "/verify/out/probe.json")]
            container = engine.ContainerSpec(
                ident,
                command,
                inputs={**probe_inputs("/verify/in"), "/verify/out": Path(empty)},
                gpus=gpus,
                network_mode=options.network_mode,
                timeout=options.timeout,
                user="0",
                entrypoint=[""],
            )
            probe, res = probe_in_container(client, container, shown=image, on_line=on_line,
                                            what=f"probe.json of {image} (written by its own {python})")
        except EngineError as e:
            if python in str(e) and _NO_EXECUTABLE.search(str(e)):
                found = re.search(r'exec: "[^"]*": .*?(?=: unknown|$)', str(e))
                raise InputError(
                    f"image {image} has no Python at {python} "
                    f"({found.group(0)[:200] if found else last_lines(str(e), 1)[-200:]}); "
                    "fix: give the image's interpreter with --python: a command on its PATH "
                    "(python3.12) or an absolute path (/opt/conda/bin/python)"
                ) from None
            raise
    return probe, {"image": image, "image_id": ident, "python": python, "exit_code": res.exit_code}
