"""`invoke debug`: a Python program run against a built wheel under gdb, in a fresh container of the
recipe's runtime image, and the crash chased to a source line.

The wheel is installed as verification installs it (runner.py: the exact file, its dependencies from the
wheelhouse, no index); gdb comes from a small layer FROM the runtime image (built once, under buildctl's
own image names; a Debug runtime image has gdb already). In the container, gdb runs the program in batch
mode with in_container/gdb_crash.py and Python's faulthandler (in_container/debug_main.py); both write
files into /debug/out, read back here capped and as untrusted text (debug_report.py).
"""

from __future__ import annotations

import csv
import hashlib
import io
import platform
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from buildctl.errors import InputError
from buildctl.in_container import HERE as IN_CONTAINER
from buildctl.recipe.schema import Spec
from buildctl.secrets import checked_argv, filtered, proxy_env, split_credentials
from buildctl.verify import debug_report
from buildctl.verify.debug_report import DebugResult
from buildctl.verify.targets import RuntimeImage, install_lines, last_lines

GDB_SCRIPT = IN_CONTAINER / "gdb_crash.py"
MAIN = IN_CONTAINER / "debug_main.py"
IN, PROGRAM_DIR, OUT = "/debug/in", "/debug/program", "/debug/out"
REPORT, STACK = "gdb.json", "python-stack.txt"
SOURCES = "/work"  # the build directory volume, mounted where the build had it: gdb finds src/ there
DEFAULT_TIMEOUT_S = 600
INSTALL_S = 600  # the wheel's installation before the program starts, beyond its own --timeout
CODE_NAME = "<string>"  # the file name code given as text runs under, as `python -c` shows it
# Libraries that install their own SIGSEGV handler when loaded replace faulthandler's, and the Python
# stack is lost. UCX does (libucs: "Caught signal 11 ... backtrace"); a torch with gloo from Debian loads
# it through OpenMPI. An empty signal list keeps UCX's hands off (seen on PyTorch 2.6's _fft_r2c crash).
NO_FOREIGN_CRASH_HANDLERS = {"UCX_ERROR_SIGNALS": ""}

# gdb, when the runtime image has none (a Release recipe's); a Debug recipe's runtime image has it.
LAYER = """FROM {runtime}
# hadolint ignore=DL3008
RUN if ! command -v gdb >/dev/null 2>&1; then \\
      if [ -f /usr/local/lib/buildctl/secrets.sh ]; then . /usr/local/lib/buildctl/secrets.sh; fi \\
      && apt-get update \\
      && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gdb \\
      && rm -rf /var/lib/apt/lists/*; \\
    fi
"""


@dataclass(frozen=True)
class Program:
    """What runs under gdb: a script file, or code given as text."""

    text: str
    name: str  # how tracebacks name it: <string>, or the script's path as given

    @classmethod
    def of(cls, code: str | None, script: str | None) -> Program:
        """One of --code / --script, refused in one line otherwise (before anything else happens)."""
        if (code is None) == (script is None):
            raise InputError("give the Python to run: --code 'import x; ...' or --script FILE (one of them); "
                             "fix: e.g. invoke debug --recipe R --code 'import torch; ...'")
        if code is not None:
            if not code.strip():
                raise InputError("--code is empty; fix: give the Python to run, e.g. --code 'import torch; ...'")
            return cls(code, CODE_NAME)
        path = Path(script)
        if not path.is_file():
            raise InputError(f"--script {script}: not a file; fix: give the path of a Python file")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"--script {script}: cannot be read as UTF-8 text ({e.__class__.__name__}); "
                             "fix: give a Python source file") from None
        return cls(text, script)

    @property
    def container_path(self) -> str:
        """Where it lies in the container (tracebacks name it as given: its frames point at the user's file)."""
        return f"{PROGRAM_DIR}/{'code.py' if self.name == CODE_NAME else Path(self.name).name}"


def check_timeout(timeout: float) -> float:
    if not timeout > 0:
        raise InputError(f"--timeout {timeout:g}: not a positive number of seconds; fix: e.g. --timeout 600")
    return float(timeout)


def debug_image(client, runtime: str, *, spec: Spec, namespace: str, on_line: Callable[[str], None],
                secrets: Iterable[str] = ()) -> str:
    """The runtime image with gdb: a layer FROM it, named after it and after this layer and the runtime
    image's id (a rebuilt runtime image gets its own), built once."""
    from buildctl import engine
    from buildctl.verify.runner import image_id

    text = LAYER.format(runtime=runtime)
    digest = hashlib.sha256(f"{text}\0{image_id(client, runtime)}".encode()).hexdigest()[:12]
    tag = f"{runtime}-gdb-{digest}"
    if engine.image_exists(client, tag):
        return tag
    on_line(f"adding gdb to {runtime} ({tag})")
    credentials = split_credentials(spec)[1]
    with tempfile.TemporaryDirectory(prefix="buildctl-debug-image-") as ctx:
        Path(ctx, "Dockerfile").write_text(filtered(text))
        engine.build_image(
            client,
            engine.ImageSpec(
                Path(ctx),
                tag,
                buildargs=proxy_env(spec),
                network_mode=engine.network_mode_for(spec.site.network),
                labels=engine.buildctl_labels(recipe=spec.name, namespace=namespace),
            ),
            on_line=on_line,
            secrets=[*secrets, *credentials.values()],
            credentials=credentials,
        )
    return tag


def container_script(venv: str, python: str, wheel_name: str, reqs: list[str], program: Program) -> str:
    """Install the wheel as verification does, then the program under gdb; gdb's status is the container's."""
    q = shlex.quote
    argv = [f"{venv}/bin/python", f"{IN}/{MAIN.name}", f"{OUT}/{STACK}", program.container_path, program.name]
    return "\n".join([
        "set -e", f"mkdir -p {OUT}", *install_lines(venv, python, wheel_name, reqs),
        f"echo {q(f'running {program.name} under gdb')}",
        f"exec gdb -q -nx -batch -x {IN}/{GDB_SCRIPT.name} --args {' '.join(q(a) for a in argv)}",
    ])


def _read_capped(path: Path, cap: int) -> str | None:
    """A file of the container's output as text, at most `cap` bytes (the rest is cut); None when absent."""
    if not path.is_file():
        return None
    with path.open("rb") as f:
        return f.read(cap).decode("utf-8", errors="replace")


def _prepared(wheel: Path, runtime: RuntimeImage, cache_dir: Path,
              on_line: Callable[[str], None]) -> tuple[str, list[str], Path, str]:
    """(python, requirements, wheelhouse, the gdb image): what the container installs from and runs in."""
    from buildctl.store import artifacts
    from buildctl.verify.wheelhouse import DISTRO_GLIBC, manylinux_platforms, prepare_wheelhouse

    spec = runtime.spec
    python = spec.python.version
    reqs = ["numpy"] if spec.framework.name in ("pytorch", "torch") else []  # as verification installs torch
    plats = manylinux_platforms(DISTRO_GLIBC.get(spec.base.distro, (2, 17)), platform.machine())
    wheelhouse, _ = prepare_wheelhouse(wheel, reqs, (), python, plats, cache_dir, on_line)
    image = debug_image(runtime.client, runtime.image, spec=spec, namespace=runtime.namespace, on_line=on_line)
    artifacts.record_images(runtime.client, [image], runtime.artifacts_root)  # for invoke clean: in use
    return python, reqs, Path(wheelhouse), image


def run_program(
    wheel: Path,
    program: Program,
    *,
    runtime: RuntimeImage,
    on_line: Callable[[str], None],
    timeout: float = DEFAULT_TIMEOUT_S,
    cache_dir: Path,
    facts: dict | None = None,
) -> DebugResult:
    """`program` under gdb in a fresh container of the recipe's runtime image with `wheel` installed; the
    container is removed on every path (run_container), Ctrl-C included."""
    from buildctl import engine

    spec, image, namespace, client = runtime.spec, runtime.image, runtime.namespace, runtime.client
    python, reqs, wheelhouse, image = _prepared(wheel, runtime, cache_dir, on_line)
    with tempfile.TemporaryDirectory(prefix="buildctl-debug-") as tmp:
        source = Path(tmp, "program.py")
        source.write_text(filtered(program.text), encoding="utf-8")
        out = Path(tmp, "out")
        out.mkdir()
        res = engine.run_container(
            client,
            engine.ContainerSpec(
                image,
                ["/bin/sh", "-c", container_script(spec.python.venv, python, wheel.name, reqs, program)],
                env={
                    "PYTHONUNBUFFERED": "1",
                    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                    **NO_FOREIGN_CRASH_HANDLERS,
                    "GDB_CRASH_TIMEOUT": f"{timeout:g}",
                    "GDB_CRASH_JSON": f"{OUT}/{REPORT}",
                },
                inputs={
                    f"/verify/in/{wheel.name}": wheel,
                    "/verify/wheelhouse": wheelhouse,
                    f"{IN}/{GDB_SCRIPT.name}": GDB_SCRIPT,
                    f"{IN}/{MAIN.name}": MAIN,
                    program.container_path: source,
                },
                outputs={OUT: out},
                network_mode=engine.network_mode_for(spec.site.network),
                labels={
                    "buildctl.role": "debug",
                    **engine.buildctl_labels(recipe=spec.name, namespace=namespace),
                },
                timeout=timeout + INSTALL_S,
            ),
            on_line=on_line,
        )
        result = debug_report.parse(_read_capped(out / REPORT, debug_report.MAX_REPORT_BYTES),
                                    _read_capped(out / STACK, debug_report.MAX_STACK_BYTES),
                                    hidden_files=(f"{IN}/{MAIN.name}",), facts=facts)
    if result.outcome is None:
        why = ("it ran past its time limit" if res.timed_out else "out of memory" if res.oom_killed
               else f"exit {res.exit_code}")
        result = DebugResult(None, exit_code=res.exit_code, facts=result.facts,
                             error=f"{result.error} ({why}): {last_lines(res.log)}")
    return result


def shell_script(venv: str, python: str, wheel_name: str, reqs: list[str], program: Program | None,
                 sources: bool) -> str:
    """Install the wheel as verification does, point gdb at the sources, then an interactive bash."""
    q = shlex.quote
    run = [f"{venv}/bin/python", *([program.container_path] if program else [])]
    gdbinit = ["set disable-randomization off", *([f"directory {SOURCES}/src"] if sources else [])]
    hint = f"gdb -q --args {' '.join(run)}"
    where = f"the sources: {SOURCES}/src (read-only)" if sources else \
        "no build directory on the engine: frames show file:line without the sources"
    return "\n".join([
        "set -e", *install_lines(venv, python, wheel_name, reqs),
        f"printf '%s\\n' {' '.join(q(line) for line in gdbinit)} > /root/.gdbinit",
        f"echo {q(where)}", f"echo {q(f'try: {hint}')}",
        "exec bash",
    ])


def shell_command(image: str, script: str, *, mounts: dict[str, str], env: dict[str, str], labels: dict[str, str],
                  network: str | None) -> list[str]:
    """The docker CLI's `run --rm -it` of the debug shell (an interactive terminal is the CLI's job);
    `mounts`: host path or volume -> container path, all read-only. As --mount fields, which the CLI reads
    as CSV (quoted where a path holds ',' or '"'): `-v SRC:DST:ro` is split at every ':' of a path."""
    cmd = ["docker", "run", "--rm", "-it"]
    for src, dst in mounts.items():
        kind = "bind" if src.startswith("/") else "volume"
        cmd += ["--mount", _csv(["type=" + kind, f"source={src}", f"target={dst}", "readonly"])]
    for k in env:
        cmd += ["-e", k]  # the value travels in the CLI's environment, not on its command line
    for k, v in labels.items():
        cmd += ["--label", f"{k}={v}"]
    if network:
        cmd += ["--network", network]
    return [*cmd, image, "/bin/sh", "-c", script]


def _csv(fields: list[str]) -> str:
    line = io.StringIO()
    csv.writer(line, lineterminator="").writerow(fields)
    return line.getvalue()


def open_shell(wheel: Path, program: Program | None, *, runtime: RuntimeImage, volume: str | None,
               on_line: Callable[[str], None], cache_dir: Path, environ: Mapping[str, str]) -> int:
    """`invoke debug --shell`: the container `run_program` would run, interactive, with gdb, the program
    and the build directory's sources (when its volume is still there) mounted; the shell's exit code.
    `environ`: the command's, what `docker run` starts from."""
    from buildctl import engine

    if shutil.which("docker") is None:
        raise InputError("--shell needs the docker command line (it opens the interactive terminal); fix: install "
                         "it (apt-get install docker.io or docker-ce-cli), or run without --shell")
    spec, image, namespace, client = runtime.spec, runtime.image, runtime.namespace, runtime.client
    python, reqs, wheelhouse, image = _prepared(wheel, runtime, cache_dir, on_line)
    sources = volume is not None and engine.volume_exists(client, volume)
    with tempfile.TemporaryDirectory(prefix="buildctl-debug-") as tmp:
        mounts = {str(wheel.resolve()): f"/verify/in/{wheel.name}", str(wheelhouse.resolve()): "/verify/wheelhouse"}
        if program is not None:
            source = Path(tmp, "program.py")
            source.write_text(filtered(program.text), encoding="utf-8")
            mounts[str(source)] = program.container_path
        if sources:
            mounts[volume] = SOURCES
        env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", **NO_FOREIGN_CRASH_HANDLERS}
        cmd = shell_command(image, shell_script(spec.python.venv, python, wheel.name, reqs, program, sources),
                            mounts=mounts, env=env, network=engine.network_mode_for(spec.site.network),
                            labels={"buildctl.role": "debug", **engine.buildctl_labels(recipe=spec.name, namespace=namespace)})
        return subprocess.run(checked_argv(cmd), env={**environ, **env}, check=False).returncode
