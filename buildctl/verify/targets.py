"""Where the probe runs: a fresh venv on this host, or a fresh container of a runtime image.

Either way the wheel under test is installed from the host file and its dependencies from the
wheelhouse runner.py filled; no network and no index are needed there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from buildctl.errors import InputError
from buildctl.in_container import PROBE, probe_inputs
from buildctl.recipe.schema import Spec
from buildctl.secrets import checked_argv, filtered
from buildctl.store import artifacts
from buildctl.verify import schema
from buildctl.verify.report import VerificationFailed

if TYPE_CHECKING:
    from buildctl.engine.run import ContainerSpec
    from buildctl.verify.options import VerifyOptions

DEFAULT_BASE_IMAGE = "buildctl/base:bookworm"
DEFAULT_VENV = "/opt/verify-venv"

LineSink = Callable[[str], None]


def _find_python(version: str) -> str:
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    found = shutil.which(f"python{version}")
    if not found:
        raise InputError(f"the wheel needs Python {version} and there is no python{version} on this machine; "
                         f"fix: install python{version}, or verify in a container (drop --host)")
    return found


def _stream(cmd: list[str], on_line: LineSink, env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run `cmd`, passing each output line to on_line; killed (with its process group) at `timeout`."""
    lines: list[str] = []
    with subprocess.Popen(checked_argv(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          bufsize=1, start_new_session=True) as p:
        expired = threading.Event()

        def kill() -> None:
            expired.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)  # the probe's spawned ranks too

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            assert p.stdout is not None
            for line in p.stdout:
                line = line.rstrip("\n")
                lines.append(line)
                on_line(line)
            rc = p.wait()
        except BaseException:
            kill()
            raise
        finally:
            timer.cancel()
    if expired.is_set():
        lines.append(f"killed after {timeout:.0f} s")
    return rc, "\n".join(lines)


def _clean_env(environ: Mapping[str, str] | None) -> dict[str, str]:
    """`environ` without another Python's settings: what a fresh venv on this host starts from."""
    if environ is None:
        raise ValueError("a verification on this host starts from the command's environment: VerifyOptions.environ")
    env = {k: v for k, v in environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PYTHONUNBUFFERED"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run_on_host(wheel: Path, wheelhouse: Path, reqs: Sequence[str], python: str, args_for: Callable[[str], list[str]],
                on_line: LineSink, timeout: float, environ: Mapping[str, str] | None) -> tuple[dict, dict]:
    """Fresh venv in a temp dir, install, probe. (probe JSON, environment facts). `environ`: the command's, what
    the venv starts from (required)."""
    interpreter = _find_python(python)
    with tempfile.TemporaryDirectory(prefix="buildctl-verify-") as tmp:
        venv = Path(tmp) / "venv"
        env = _clean_env(environ)
        rc, log = _stream([interpreter, "-m", "venv", str(venv)], on_line, env, 300)
        if rc != 0:
            raise VerificationFailed(f"cannot create a venv with {interpreter}: {log.strip()[-300:]}; "
                                     f"fix: install python{python}-venv")
        py = str(venv / "bin" / "python")
        on_line(f"installing {wheel.name} into a fresh venv ({venv})")
        rc, log = _stream([py, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse),
                           "--no-compile", str(wheel), *reqs], on_line, env, 1800)
        if rc != 0:
            raise VerificationFailed(f"installing {wheel.name} into a fresh venv failed: "
                                     f"{last_lines(log)}")
        out = Path(tmp) / "probe.json"
        rc, log = _stream([py, str(PROBE), *args_for(str(out))], on_line, env, timeout)
        if not out.is_file():
            raise VerificationFailed(f"the probe wrote no report (exit {rc}): {last_lines(log)}")
        probe = schema.load_probe(out, f"probe.json of {wheel.name} (written in a fresh venv)")
        return probe, {"python": py, "interpreter": interpreter}


def last_lines(log: str, n: int = 3) -> str:
    lines = [ln.strip() for ln in log.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])[-600:] or "(no output)"


def verify_image_dockerfile(base_image: str, python: str) -> str:
    return "\n".join([
        f"FROM {base_image}",
        "ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1",
        "# hadolint ignore=DL3008",
        f"RUN apt-get update && apt-get install -y --no-install-recommends python{python} python{python}-venv "
        "ca-certificates && rm -rf /var/lib/apt/lists/*",
        "WORKDIR /verify",
        "",
    ])


def ensure_verify_image(client, base_image: str, python: str, *, network_mode: str | None,
                        on_line: LineSink) -> str:
    """A minimal runtime image (base + python + venv), built once and tagged by its Dockerfile's hash."""
    from buildctl import engine

    text = verify_image_dockerfile(base_image, python)
    tag = f"buildctl/verify-runtime:py{python}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    if engine.image_exists(client, tag):
        return tag
    on_line(f"building the verification image {tag} from {base_image}")
    with tempfile.TemporaryDirectory(prefix="buildctl-verify-image-") as ctx:
        Path(ctx, "Dockerfile").write_text(filtered(text))
        engine.build_image(
            client,
            engine.ImageSpec(
                Path(ctx), tag, network_mode=network_mode, labels={"buildctl.role": "verify-runtime"}
            ),
            on_line=on_line,
        )
    return tag


def install_lines(venv: str, python: str, wheel_name: str | None, reqs: Sequence[str]) -> list[str]:
    """Shell lines that install the wheel under test (/verify/in/<wheel_name>; None: only `reqs`) and `reqs`
    into `venv` (made when the image has none) from /verify/wheelhouse, with no index."""
    import shlex

    q = shlex.quote
    install = [q("/verify/in/" + wheel_name)] if wheel_name else []
    install += [q(r) for r in reqs]
    lines = [f'if [ ! -x {q(venv)}/bin/python ]; then python{python} -m venv {q(venv)}; fi',
             f"echo 'installing {wheel_name or 'the extension set'} into a fresh container ({venv})'"]
    if install:
        lines.append(f"{q(venv)}/bin/python -m pip install -q --no-index --find-links /verify/wheelhouse --no-compile "
                     f"{' '.join(install)}")
    return lines


def container_script(venv: str, python: str, wheel_name: str | None, reqs: Sequence[str], probe_argv: list[str],
                     ext_set=None) -> str:
    """Install (the wheel under test, or with a prebuilt framework only its requirements), probe; with an
    extension set, its wheels are installed after the probe and checked (extensions.container_lines)."""
    import shlex

    q = shlex.quote
    lines = ["set -e", "mkdir -p /verify/out", *install_lines(venv, python, wheel_name, reqs)]
    probe = f"{q(venv)}/bin/python /verify/in/probe.py {' '.join(q(a) for a in probe_argv)}"
    if ext_set is None:
        return "\n".join([*lines, f"exec {probe}"])
    from buildctl.verify import extensions

    return "\n".join([*lines, probe, *extensions.container_lines(f"{venv}/bin/python", ext_set)])


def probe_in_container(client, container: ContainerSpec, *, shown: str, what: str, on_line: LineSink,
                        read_out: Callable[[Path], None] | None = None):
    """Run `container`'s command (which writes /verify/out/probe.json) in a fresh container of its image,
    always removed; (probe.json validated by schema.py, the container result). `shown` names the image in
    messages. `read_out` is given the folder of /verify/out, to read the command's other files before it goes.
    The container gets the verification's environment, label and (with GPUs) shared memory here."""
    from buildctl import engine

    timeout = container.timeout
    with tempfile.TemporaryDirectory(prefix="buildctl-verify-out-") as out:
        res = engine.run_container(
            client,
            replace(
                container,
                env={"PYTHONUNBUFFERED": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
                outputs={"/verify/out": Path(out)},
                shm_size="4g"
                if container.gpus
                else None,  # NCCL's shared-memory transport outgrows Docker's 64 MiB
                labels={"buildctl.role": "verify"},
            ),
            on_line=on_line,
        )
        probe_json = Path(out) / "probe.json"
        if res.timed_out:
            raise VerificationFailed(f"verification in {shown} was stopped after {timeout:.0f} s (a hung CUDA/NCCL "
                                     f"init?): {last_lines(res.log)}")
        if res.oom_killed:
            raise VerificationFailed(f"the verification container ran out of memory: {last_lines(res.log)}")
        if not probe_json.is_file():
            raise VerificationFailed(f"verification in {shown} failed (exit {res.exit_code}): {last_lines(res.log)}")
        if read_out is not None:
            read_out(Path(out))
        return schema.load_probe(probe_json, what), res


@dataclass(frozen=True)
class RuntimeImage:
    """An artifact's runtime image on an engine, as verification builds it (`invoke debug`, `invoke bisect
    --test` run there): the recipe, the image, the namespace of the engine objects, the engine's client."""

    spec: Spec
    image: str
    namespace: str | None
    client: Any
    artifacts_root: Path | None = None  # where its use is stamped for `invoke clean`: the artifact's root


@dataclass(frozen=True)
class VenvContents:
    """What the verification's fresh venv gets: the wheel (None: the framework the image has), the
    wheelhouse it installs from offline, the requirements, the Python version, an extension set."""

    wheel: Path | None
    wheelhouse: Path
    requirements: Sequence[str]
    python: str
    ext_set: Any = None  # verify/extensions.py's ExtensionSet, or None


def run_in_container(
    venv: VenvContents,
    image: str | None,
    spec: Spec | None,
    args_for: Callable[[str], list[str]],
    on_line: LineSink,
    *,
    gpus: bool,
    options: VerifyOptions,
    client=None,
) -> tuple[dict, dict]:
    """The probe (and, with an extension set, its check) in a fresh container; (probe JSON, environment
    facts, with the set's results under "extensions"). `options`: its network_mode and timeout."""
    from buildctl import engine
    from buildctl.verify.options import connected

    client = connected(client, options)
    if image is None:
        base = spec.base.image if spec else DEFAULT_BASE_IMAGE
        # for invoke clean: in use (the image may be built from it now)
        artifacts.record_images(client, [base], options.artifacts_root)
        image = ensure_verify_image(client, base, venv.python, network_mode=options.network_mode, on_line=on_line)
    artifacts.record_images(client, [image], options.artifacts_root)  # for invoke clean: this image is in use
    venv_dir = spec.python.venv if spec else DEFAULT_VENV
    wheel = venv.wheel
    script = container_script(venv_dir, venv.python, wheel.name if wheel else None, venv.requirements,
                              args_for("/verify/out/probe.json"), venv.ext_set)
    subject = wheel.name if wheel else "the extension set"
    with tempfile.TemporaryDirectory(prefix="buildctl-verify-set-") as set_dir:
        inputs = {**({f"/verify/in/{wheel.name}": wheel} if wheel else {}), **probe_inputs("/verify/in"),
                  "/verify/wheelhouse": venv.wheelhouse}
        if venv.ext_set is not None:
            from buildctl.verify import extensions

            inputs.update(extensions.container_inputs(venv.ext_set, Path(set_dir)))
        results: dict = {}

        def read_out(out: Path) -> None:
            if venv.ext_set is not None:
                from buildctl.verify import extensions

                results["extensions"] = extensions.load_result(out / extensions.RESULT_FILE, f"{subject} in {image}")

        container = engine.ContainerSpec(image, ["/bin/sh", "-c", script], inputs=inputs, gpus=gpus,
                                         network_mode=options.network_mode, timeout=options.timeout)
        probe, res = probe_in_container(client, container, shown=image, on_line=on_line, read_out=read_out,
                                        what=f"probe.json of {subject} (written in a container of {image})")
    return probe, {"image": image, "venv": venv_dir, "exit_code": res.exit_code, **results}
