"""A shell command run against a built artifact, in a fresh container of its runtime image (`invoke bisect
--test`): the framework's wheel and the extension wheels installed as verification installs them (the
files, their dependencies from the wheelhouse, no index), the venv first on PATH, then `sh -c COMMAND`;
its exit code is the result, as `git bisect run` reads a script's.

A set that does not install gives 125 (`git bisect run`'s "cannot test"): the command never ran, so it
can say nothing of the change. The container is removed on every path (engine.run_container).
"""

from __future__ import annotations

import platform
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from buildctl.verify.targets import RuntimeImage, install_lines

CANNOT_TEST = 125
DEFAULT_TIMEOUT_S = 1800
LOG_TAIL = 12


@dataclass(frozen=True)
class CommandResult:
    exit_code: int
    tail: tuple[str, ...]  # the last lines of its output, as untrusted text (strip_controls before showing)
    timed_out: bool = False


def container_script(venv: str, python: str, wheel_name: str | None, reqs: list[str], extension_wheels: list[str]) -> str:
    """Install (framework wheel, requirements, extension wheels), then the command from $BUILDCTL_TEST with the
    venv's bin first on PATH; an install that fails exits 125."""
    q = shlex.quote
    install = install_lines(venv, python, wheel_name, reqs)
    if extension_wheels:
        install.append(f"{q(venv)}/bin/python -m pip install -q --no-index --no-deps --no-compile "
                       + " ".join(q(f"/verify/ext/{w}") for w in extension_wheels))
    return "\n".join([
        "( set -e", *install, f") || {{ echo 'buildctl: the wheels did not install: the test cannot run'; exit {CANNOT_TEST}; }}",
        f"export PATH={q(venv)}/bin:\"$PATH\"",
        "cd /tmp",
        'echo "buildctl: test: $BUILDCTL_TEST"',
        'exec /bin/sh -c "$BUILDCTL_TEST"',
    ])


def run_command(command: str, *, artifact: Path, wheel: Path | None, runtime: RuntimeImage, cache_dir: Path,
                on_line: Callable[[str], None], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult:
    """`command` in a fresh container of the artifact's runtime image with the artifact's wheels."""
    from buildctl import engine
    from buildctl.store.manifest import Manifest
    from buildctl.verify import extensions
    from buildctl.verify.wheelhouse import DISTRO_GLIBC, manylinux_platforms, prepare_wheelhouse

    spec, image, namespace, client = runtime.spec, runtime.image, runtime.namespace, runtime.client
    python = spec.python.version
    manifest = Manifest.read(artifact)
    ext_set = extensions.from_artifact(artifact, manifest, spec.framework.dist, {}, python)
    reqs = ["numpy"] if wheel is not None and spec.framework.name == "pytorch" else []  # as verification installs torch
    reqs += [r for r in (ext_set.requirements if ext_set else ()) if r not in reqs]
    plats = manylinux_platforms(DISTRO_GLIBC.get(spec.base.distro, (2, 17)), platform.machine())
    wheelhouse, _ = prepare_wheelhouse(wheel, reqs, (), python, plats, cache_dir, on_line)
    ext_wheels = list(ext_set.wheels) if ext_set else []
    script = container_script(spec.python.venv, python, wheel.name if wheel else None, reqs, [w.name for w in ext_wheels])
    inputs = {"/verify/wheelhouse": Path(wheelhouse), **({f"/verify/in/{wheel.name}": wheel} if wheel else {}),
              **{f"/verify/ext/{w.name}": w for w in ext_wheels}}
    res = engine.run_container(
        client,
        engine.ContainerSpec(
            image,
            ["/bin/sh", "-c", script],
            env={"BUILDCTL_TEST": command, "PYTHONUNBUFFERED": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
            inputs=inputs,
            network_mode=engine.network_mode_for(spec.site.network),
            labels={
                "buildctl.role": "bisect-test",
                **engine.buildctl_labels(recipe=spec.name, namespace=namespace),
            },
            timeout=timeout,
        ),
        on_line=on_line,
    )
    lines = [ln for ln in (res.log or "").splitlines() if ln.strip()]
    code = res.exit_code if res.exit_code is not None else CANNOT_TEST
    return CommandResult(code, tuple(lines[-LOG_TAIL:]), bool(res.timed_out))
