"""`invoke verify`: install a wheel somewhere fresh, run probe.py there, judge, report.

Never the build environment: by default a fresh container of a runtime image (the recipe's, or a
minimal Python image made from the recipe's base), with `host=True` a fresh venv in a temp dir on
this machine. Either way the wheel is installed from the host file, its dependencies from a
wheelhouse that the host's pip fills once per (requirements, Python, platform) and that is copied
in: the target needs no network and no index, and the exact wheel under test is what gets installed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from packaging.metadata import parse_email
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from rich.console import Console
from rich.markup import escape

from buildctl import artifacts
from buildctl.artifacts import sha256_of
from buildctl.compat import PYTHON_BY_DISTRO
from buildctl.errors import InputError, VerificationFailed
from buildctl.spec import Spec
from buildctl.ui import strip_controls
from buildctl.verify import report as rep
from buildctl.verify import schema
from buildctl.verify.expectations import Expectations, evaluate, summary_line, verdict

PROBE = Path(__file__).resolve().parent / "probe.py"
CHECKS = PROBE.with_name("checks.py")  # imported by the probe from its own folder
DEFAULT_BASE_IMAGE = "buildctl/base:bookworm"
DEFAULT_VENV = "/opt/verify-venv"
# glibc of each distro's own Python, for the wheelhouse's manylinux tags.
DISTRO_GLIBC = {"bookworm": (2, 36), "trixie": (2, 41), "jammy": (2, 35), "noble": (2, 39)}
# Installed next to the wheel when they can be had; the probe degrades gracefully without them.
OPTIONAL_TOOLS = ("nvidia-ml-py",)
CUDA_TOOLS = ("nvidia-cuda-cuobjdump",)  # cuobjdump for the arch coverage (nvidia/cu13/bin)
MODULES = {"pytorch": "torch", "torch": "torch", "demofw": "demofw"}

LineSink = Callable[[str], None]


# --------------------------------------------------------------------------- wheel facts


def wheel_tags(wheel: Path) -> dict:
    """name, version, python ('3.11'), abi, platform from a wheel file name (PEP 427, read by `packaging`)."""
    try:
        name, version, _build, tags = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename:
        raise InputError(f"{ascii(wheel.name)[1:-1][:200]} is not a wheel file name (name-version-python-abi-platform.whl); "
                         "fix: give the .whl that the build produced") from None
    pythons = sorted({t.interpreter for t in tags})
    cpython = sorted({f"{m.group(1)}.{m.group(2)}" for t in tags if (m := re.fullmatch(r"cp(\d)(\d+)", t.interpreter))})
    return {"name": str(name), "version": str(version), "python_tag": ".".join(pythons),
            "abi": ".".join(sorted({t.abi for t in tags})), "platform": ".".join(sorted({t.platform for t in tags})),
            "python": cpython[0] if len(cpython) == 1 else None}


# A wheel is a zip the host opens, and pip unpacks, before anything else: bounded before it is parsed.
# torch 2.14 wheels: ~13k members, a 38 KB METADATA, 1.1 GB unpacked from 528 MB (2.1x); 3.6x for CPU.
MAX_WHEEL_MEMBERS = 200_000
MAX_CENTRAL_DIRECTORY = 16 << 20
MAX_METADATA_BYTES = 1 << 20
MAX_WHEEL_UNCOMPRESSED = 64 << 30
MAX_EXPANSION = 50  # unpacked / on disk, checked beyond 1 GiB unpacked: a 1 MB zip of zeros unpacks to 1 GB
_EOCD = struct.Struct("<4s4H2LH")  # end of central directory record
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")


def _central_directory_size(f, file_size: int) -> tuple[int, int]:
    """(members, bytes) of a zip's central directory, from its end records, before zipfile reads it."""
    tail = min(file_size, _EOCD.size + 0xFFFF)
    f.seek(file_size - tail)
    data = f.read(tail)
    at = data.rfind(b"PK\x05\x06")
    if at < 0 or len(data) - at < _EOCD.size:
        raise zipfile.BadZipFile("no end of central directory record")
    _, _, _, _, members, cd_bytes, _, _ = _EOCD.unpack_from(data, at)
    if (members == 0xFFFF or cd_bytes == 0xFFFFFFFF) and at >= _ZIP64_LOCATOR.size:
        sig, _, zip64_at, _ = _ZIP64_LOCATOR.unpack_from(data, at - _ZIP64_LOCATOR.size)
        if sig == b"PK\x06\x07" and zip64_at + _ZIP64_EOCD.size <= file_size:
            f.seek(zip64_at)
            rec = f.read(_ZIP64_EOCD.size)
            if rec[:4] == b"PK\x06\x06":
                fields = _ZIP64_EOCD.unpack(rec)
                members, cd_bytes = fields[7], fields[8]
    return members, cd_bytes


def _read_metadata(wheel: Path) -> str:
    """The text of the wheel's .dist-info/METADATA, read within the caps above."""
    refuse = f"{wheel.name}: {{}}; fix: give the .whl that the build produced (this one is not a sane wheel)"
    with open(wheel, "rb") as f:
        on_disk = os.fstat(f.fileno()).st_size
        members, cd_bytes = _central_directory_size(f, on_disk)
        if members > MAX_WHEEL_MEMBERS or cd_bytes > MAX_CENTRAL_DIRECTORY:
            raise InputError(refuse.format(f"{members} members in a {cd_bytes >> 20} MiB directory "
                                           f"(caps {MAX_WHEEL_MEMBERS}, {MAX_CENTRAL_DIRECTORY >> 20} MiB)"))
        f.seek(0)
        with zipfile.ZipFile(f) as z:
            infos = z.infolist()
            if len(infos) > MAX_WHEEL_MEMBERS:
                raise InputError(refuse.format(f"{len(infos)} members (cap {MAX_WHEEL_MEMBERS})"))
            total = sum(i.file_size for i in infos)
            if total > MAX_WHEEL_UNCOMPRESSED or (total > 1 << 30 and total > MAX_EXPANSION * on_disk):
                raise InputError(refuse.format(f"it unpacks to {total / 2**20:.0f} MiB from {on_disk / 2**20:.1f} MiB (caps "
                                               f"{MAX_WHEEL_UNCOMPRESSED >> 30} GiB, {MAX_EXPANSION}x): a zip bomb?"))
            metas = [i for i in infos if re.fullmatch(r"[^/]+\.dist-info/METADATA", i.filename)]
            if len(metas) != 1:
                raise InputError(refuse.format(f"{len(metas)} .dist-info/METADATA files, a wheel has exactly one"))
            meta = metas[0]
            if meta.file_size > MAX_METADATA_BYTES:
                raise InputError(refuse.format(f"its METADATA unpacks to {meta.file_size} bytes "
                                               f"(cap {MAX_METADATA_BYTES}): a zip bomb?"))
            with z.open(meta) as member:
                data = member.read(MAX_METADATA_BYTES + 1)  # the declared size may lie: read no further
            if len(data) > MAX_METADATA_BYTES:
                raise InputError(refuse.format(f"its METADATA unpacks beyond {MAX_METADATA_BYTES} bytes: a zip bomb?"))
    return data.decode("utf-8", "replace")


def wheel_requires(wheel: Path) -> list[str]:
    """Requires-Dist of the wheel's METADATA (for the wheelhouse key), read with bounded memory."""
    try:
        text = _read_metadata(wheel)
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError, ValueError) as e:
        raise InputError(f"{wheel.name}: not a readable wheel ({str(e)[:200]}); fix: rebuild or re-download it") from None
    raw, _ = parse_email(text)
    requires = list(raw.get("requires_dist") or [])
    for r in requires:
        try:
            Requirement(r)
        except InvalidRequirement:
            raise InputError(f"{wheel.name}: METADATA has an invalid Requires-Dist {ascii(r[:100])}; "
                             "fix: give the .whl that the build produced") from None
    return requires


def requires_for_python(requires: Sequence[str], python: str) -> list[str]:
    """The requirements (no extras) whose markers hold on CPython `python` on Linux."""
    env = {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux",
           "platform_system": "Linux", "implementation_name": "cpython", "extra": ""}
    out = []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is None or req.marker.evaluate(env):
            req.marker = None
            out.append(str(req))
    return out


def is_cuda_wheel(wheel: Path, spec: Spec | None, requires: Sequence[str] | None = None) -> bool:
    if spec is not None:
        return spec.accelerator == "cuda"
    if re.search(r"\+cu\d+", wheel.name):
        return True
    reqs = wheel_requires(wheel) if requires is None else requires
    return any(canonicalize_name(Requirement(r).name).startswith("nvidia-") for r in reqs)


def manylinux_platforms(glibc: tuple[int, int], machine: str) -> list[str]:
    plats = [f"manylinux_2_{m}_{machine}" for m in range(glibc[1], 4, -1)] if glibc[0] == 2 else []
    legacy = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}
    plats += [f"{k}_{machine}" for k, m in legacy.items() if glibc >= (2, m)]
    return plats + [f"linux_{machine}"]


def host_glibc() -> tuple[int, int]:
    lib, ver = platform.libc_ver()
    m = re.match(r"(\d+)\.(\d+)", ver or "")
    return (int(m.group(1)), int(m.group(2))) if lib == "glibc" and m else (2, 17)


# --------------------------------------------------------------------------- wheelhouse


def _pip_download(dest: Path, reqs: Sequence[str], python: str, plats: Sequence[str],
                  on_line: LineSink) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--dest", str(dest),
           "--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    for p in plats:
        cmd += ["--platform", p]
    cmd += list(reqs)
    on_line(f"pip download {' '.join(reqs)}")
    return subprocess.run(cmd, capture_output=True, text=True)


def prepare_wheelhouse(wheel: Path, requirements: Sequence[str], optional: Sequence[str], python: str,
                       plats: Sequence[str], cache_dir: Path, on_line: LineSink) -> tuple[Path, list[str]]:
    """A directory with every wheel that installing `wheel` + `requirements` needs, except `wheel`
    itself (two different builds can share a file name); and the optional requirements it holds."""
    # pip download judges markers by the interpreter it runs on, not --python-version: name the
    # wheel's own requirements that hold for the target Python (torch: setuptools on >= 3.12).
    own = requires_for_python(wheel_requires(wheel), python)
    key_src = json.dumps({"requires": wheel_requires(wheel), "reqs": sorted([*own, *requirements]),
                          "optional": sorted(optional), "python": python, "platforms": list(plats)},
                         sort_keys=True)
    wh = cache_dir / "wheelhouse" / hashlib.sha256(key_src.encode()).hexdigest()[:16]
    done = wh / ".complete.json"
    if done.is_file():
        return wh, json.loads(done.read_text())["optional"]
    wh.mkdir(parents=True, exist_ok=True)
    r = _pip_download(wh, [str(wheel), *own, *requirements], python, plats, on_line)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise VerificationFailed(f"cannot fetch the dependencies of {wheel.name} for Python {python}: "
                                 f"{' '.join(tail)}; fix: check pip's index and proxy settings (pip config list)")
    have = []
    for req in optional:
        r = _pip_download(wh, [req], python, plats, on_line)
        if r.returncode == 0:
            have.append(req)
        else:
            on_line(f"optional {req} not available ({(r.stderr or '').strip().splitlines()[-1:]}); going on")
    copied = wh / wheel.name
    if copied.exists():
        copied.unlink()
    done.write_text(json.dumps({"optional": have}))
    return wh, have


# --------------------------------------------------------------------------- probe invocation


def probe_args(module: str, out: str, *, sweep: bool, sizes: str, iters: int, warmup: int) -> list[str]:
    args = ["--module", module, "--out", out]
    if sweep:
        args += ["--sweep", "--sizes", sizes, "--iters", str(iters), "--warmup", str(warmup)]
    return args


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
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
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


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PYTHONUNBUFFERED"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run_on_host(wheel: Path, wheelhouse: Path, reqs: Sequence[str], python: str, args_for: Callable[[str], list[str]],
                on_line: LineSink, timeout: float) -> tuple[dict, dict]:
    """Fresh venv in a temp dir, install, probe. (probe JSON, environment facts)."""
    interpreter = _find_python(python)
    with tempfile.TemporaryDirectory(prefix="buildctl-verify-") as tmp:
        venv = Path(tmp) / "venv"
        env = _clean_env()
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
                                     f"{_last_lines(log)}")
        out = Path(tmp) / "probe.json"
        rc, log = _stream([py, str(PROBE), *args_for(str(out))], on_line, env, timeout)
        if not out.is_file():
            raise VerificationFailed(f"the probe wrote no report (exit {rc}): {_last_lines(log)}")
        probe = schema.load_probe(out, f"probe.json of {wheel.name} (written in a fresh venv)")
        return probe, {"python": py, "interpreter": interpreter}


def _last_lines(log: str, n: int = 3) -> str:
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
        Path(ctx, "Dockerfile").write_text(text)
        engine.build_image(client, Path(ctx), tag, network_mode=network_mode, on_line=on_line,
                           labels={"buildctl.role": "verify-runtime"})
    return tag


def container_script(venv: str, python: str, wheel_name: str, reqs: Sequence[str], probe_argv: list[str]) -> str:
    import shlex

    q = shlex.quote
    return "\n".join([
        "set -e",
        "mkdir -p /verify/out",
        f'if [ ! -x {q(venv)}/bin/python ]; then python{python} -m venv {q(venv)}; fi',
        f"echo 'installing {wheel_name} into a fresh container ({venv})'",
        f"{q(venv)}/bin/python -m pip install -q --no-index --find-links /verify/wheelhouse --no-compile "
        f"{q('/verify/in/' + wheel_name)} {' '.join(q(r) for r in reqs)}",
        f"exec {q(venv)}/bin/python /verify/in/probe.py {' '.join(q(a) for a in probe_argv)}",
    ])


def _probe_in_container(client, image: str, command: list[str], inputs: dict[str, Path], *, shown: str,
                        what: str, on_line: LineSink, gpus: bool, network_mode: str | None,
                        timeout: float | None, user: str | None = None, entrypoint: list[str] | None = None):
    """Run `command` (which writes /verify/out/probe.json) in a fresh container of `image`, always removed;
    (probe.json validated by schema.py, the container result). `shown` names the image in messages."""
    from buildctl import engine

    with tempfile.TemporaryDirectory(prefix="buildctl-verify-out-") as out:
        res = engine.run_container(
            client, image, command,
            env={"PYTHONUNBUFFERED": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
            inputs=inputs, outputs={"/verify/out": Path(out)}, user=user, entrypoint=entrypoint,
            network_mode=network_mode, gpus=gpus, on_line=on_line,
            shm_size="4g" if gpus else None,  # NCCL's shared-memory transport outgrows Docker's 64 MiB
            labels={"buildctl.role": "verify"}, timeout=timeout,
        )
        probe_json = Path(out) / "probe.json"
        if res.timed_out:
            raise VerificationFailed(f"verification in {shown} was stopped after {timeout:.0f} s (a hung CUDA/NCCL "
                                     f"init?): {_last_lines(res.log)}")
        if res.oom_killed:
            raise VerificationFailed(f"the verification container ran out of memory: {_last_lines(res.log)}")
        if not probe_json.is_file():
            raise VerificationFailed(f"verification in {shown} failed (exit {res.exit_code}): {_last_lines(res.log)}")
        return schema.load_probe(probe_json, what), res


def run_in_container(wheel: Path, wheelhouse: Path, reqs: Sequence[str], python: str, image: str | None,
                     spec: Spec | None, args_for: Callable[[str], list[str]], on_line: LineSink, *,
                     gpus: bool, network_mode: str | None, client=None, timeout: float | None = None) -> tuple[dict, dict]:
    from buildctl import engine

    client = client or engine.connect()
    if image is None:
        base = spec.base.image if spec else DEFAULT_BASE_IMAGE
        image = ensure_verify_image(client, base, python, network_mode=network_mode, on_line=on_line)
    artifacts.record_use({"image": [image]})  # for invoke clean: this image is in use
    venv = spec.python.venv if spec else DEFAULT_VENV
    script = container_script(venv, python, wheel.name, reqs, args_for("/verify/out/probe.json"))
    probe, res = _probe_in_container(
        client, image, ["/bin/sh", "-c", script],
        {f"/verify/in/{wheel.name}": wheel, "/verify/in/probe.py": PROBE, "/verify/in/checks.py": CHECKS,
         "/verify/wheelhouse": wheelhouse},
        shown=image, what=f"probe.json of {wheel.name} (written in a container of {image})", on_line=on_line,
        gpus=gpus, network_mode=network_mode, timeout=timeout)
    return probe, {"image": image, "venv": venv, "exit_code": res.exit_code}


# --------------------------------------------------------------------------- entry point


def default_out_dir(wheel: Path) -> Path:
    """Beside the artifact when that folder is writable, else artifacts/verify/<wheel>/ here."""
    if os.access(wheel.parent, os.W_OK):
        return wheel.parent
    return Path("artifacts") / "verify" / wheel.name[: -len(".whl")]


def verify_wheel(
    wheel: Path,
    *,
    spec: Spec | None = None,
    host: bool = False,
    module: str | None = None,
    sizes: str = "8:256M",
    iters: int = 20,
    warmup: int = 5,
    out_dir: Path | None = None,
    json_out: bool = False,
    image: str | None = None,
    network_mode: str | None = None,
    extra_requirements: Sequence[str] = (),
    sweep: bool | None = None,
    cache_dir: Path | None = None,
    console: Console | None = None,
    timeout: float = 3600,
    client=None,
) -> rep.Report:
    """Verify `wheel`; write report.json/.md/.png to `out_dir`; print tables (or the JSON with json_out).

    Raises VerificationFailed (one line) when an expectation fails, InputError for bad arguments.
    """
    wheel = Path(wheel).resolve()
    if not wheel.is_file():
        raise InputError(f"{wheel}: no such wheel; fix: give the path of a .whl file")
    tags = wheel_tags(wheel)
    if module is None:
        module = MODULES.get(spec.framework.name if spec else tags["name"])
        if module is None:
            raise InputError(f"cannot tell the module of {wheel.name}; fix: pass module='torch' or 'demofw'")
    python = spec.python.version if spec else tags["python"]
    if python is None:
        raise InputError(f"{wheel.name} names no CPython version; fix: verify with a recipe (--recipe)")
    if tags["python"] and tags["python"] != python:
        raise InputError(f"{wheel.name} is for Python {tags['python']}, the recipe's Python is {python}; "
                         "fix: verify the wheel built by this recipe")
    if not host and spec is None and image is None and python != PYTHON_BY_DISTRO["bookworm"]:
        raise InputError(f"{wheel.name} needs Python {python} and the default verification image "
                         f"({DEFAULT_BASE_IMAGE}) has Python {PYTHON_BY_DISTRO['bookworm']}; fix: --recipe with a "
                         f"matching base, or --host with python{python} installed")
    from buildctl.verify.probe import parse_sizes

    try:
        parse_sizes(sizes)
    except ValueError as e:
        raise InputError(f"--sizes: {e}") from None
    if iters < 1 or warmup < 0:
        raise InputError("--iters must be >= 1 and warm-up >= 0")
    requires = wheel_requires(wheel)  # a bounded read of an untrusted zip, before pip or anything else opens it
    console = console or Console(stderr=json_out)
    cache_dir = Path(cache_dir or os.environ.get("BUILDCTL_CACHE", ".cache/buildctl"))
    out_dir = Path(out_dir) if out_dir else default_out_dir(wheel)
    if sweep is None:
        sweep = spec.verify.allreduce if spec is not None else True

    def on_line(line: str) -> None:
        console.print(f"  {strip_controls(line)}", style="dim", markup=False, highlight=False)

    cuda = is_cuda_wheel(wheel, spec, requires)
    reqs = [*(["numpy"] if module == "torch" else []), *extra_requirements]
    if host and spec is not None:  # the runtime pip packages of the recipe (in its image otherwise)
        from buildctl import render

        reqs += [p for f in render.render(spec).fragments for p in f.pip_runtime if p not in reqs]
    optional = [*OPTIONAL_TOOLS, *(CUDA_TOOLS if cuda else ())]
    if host:
        glibc = host_glibc()
    else:
        glibc = DISTRO_GLIBC.get(spec.base.distro if spec else "bookworm", (2, 17))
    plats = manylinux_platforms(glibc, platform.machine())
    console.print(f"[bold]verify[/] {escape(wheel.name)} ({'fresh venv on this host' if host else 'fresh container'})")
    wheelhouse, have_optional = prepare_wheelhouse(wheel, reqs, optional, python, plats, cache_dir, on_line)
    install = reqs + have_optional

    def args_for(out: str) -> list[str]:
        return probe_args(module, out, sweep=sweep, sizes=sizes, iters=iters, warmup=warmup)

    t0 = time.monotonic()
    if host:
        probe, environment = run_on_host(wheel, wheelhouse, install, python, args_for, on_line, timeout)
    else:
        gpus = False
        if cuda:
            from buildctl import gpus as host_gpus

            gpus = bool(host_gpus.inventory().gpus)
        probe, environment = run_in_container(wheel, wheelhouse, install, python, image, spec, args_for,
                                              on_line, gpus=gpus, network_mode=network_mode, client=client,
                                              timeout=timeout)
    environment["seconds"] = round(time.monotonic() - t0, 1)

    exp = Expectations.from_spec(spec) if spec is not None else Expectations.from_wheel_name(wheel.name)
    report = rep.Report(
        wheel={"path": str(wheel), "name": wheel.name, "size": wheel.stat().st_size, "sha256": sha256_of(wheel)},
        mode="host" if host else "container", module=module, environment=environment,
        expectations=exp.to_dict(), checks=evaluate(exp, probe), probe=probe, verdict=verdict(probe),
        spec=_spec_facts(spec),
    )
    return _publish(report, out_dir, json_out, console)


def _spec_facts(spec: Spec | None) -> dict | None:
    return {"name": spec.name, "accelerator": spec.accelerator, "framework": spec.framework.name} if spec else None


def _publish(report: rep.Report, out_dir: Path, json_out: bool, console: Console) -> rep.Report:
    """Write report.json/.md/.png, append the step summary, print it; VerificationFailed when a check failed."""
    rep.write_all(report, out_dir)
    rep.append_step_summary(report)
    if json_out:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2, default=str) + "\n")
        sys.stdout.flush()
        console.print(f"{'passed' if report.ok else 'FAILED'}: {summary_line(report.checks)}; "
                      f"{rep.headline_text(report)}", markup=False, highlight=False)
    else:
        rep.render(report, console)
    if not report.ok:
        raise VerificationFailed(f"{report.subject}: {summary_line(report.checks)} (report: {report.files['json']})")
    return report


# --------------------------------------------------------------------------- an existing image

# A reference as Docker reads one (name[:tag][@digest], or an image id); refused before the engine sees it.
IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}")
# `python3` (looked up on the image's PATH) or an absolute path; the probe runs it directly, no shell.
PYTHON_PATH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}|(/[A-Za-z0-9._+-]+){1,32}")
# What the engine says when the container's command is not there (runc's exec error, on start).
_NO_EXECUTABLE = re.compile(r"executable file not found|no such file or directory|not a directory|permission denied")


def default_image_out_dir(reference: str, image_id: str) -> Path:
    """artifacts/verify/images/<reference>-<id12>/: one folder per image verified, the tag kept readable."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", reference).strip("._") or "image"
    return artifacts.artifacts_root() / "verify" / "images" / f"{safe[:100]}-{image_id.removeprefix('sha256:')[:12]}"


def image_id(client, reference: str) -> str:
    """The id (sha256:...) of a local image; InputError when the engine does not have it (never pulled)."""
    from docker import errors as derr

    from buildctl.engine import _api_error

    try:
        return str(client.api.inspect_image(reference)["Id"])
    except derr.NotFound:
        raise InputError(f"image {reference} is not in the Docker engine, and buildctl never pulls; fix: "
                         f"`docker pull {reference}` (or docker load / docker build it) first") from None
    except derr.APIError as e:
        raise _api_error(e, f"looking up image {reference}") from e


def verify_image(
    image: str,
    *,
    python: str = "python3",
    module: str = "torch",
    expect: Expectations | None = None,
    spec: Spec | None = None,
    sizes: str = "8:256M",
    iters: int = 20,
    warmup: int = 5,
    out_dir: Path | None = None,
    json_out: bool = False,
    network_mode: str | None = None,
    sweep: bool | None = None,
    console: Console | None = None,
    timeout: float = 3600,
    client=None,
) -> rep.Report:
    """Verify the framework installed in `image`: the probe runs with the image's own `python` in a fresh
    container of it (root, removed on every path), nothing installed; the same report, checks and files
    as verify_wheel. Expectations: the recipe's (`spec`), then `expect` over them.

    Raises InputError for a bad reference or Python path, an image the engine lacks or a Python the image
    lacks; VerificationFailed (one line, after writing the report) when a check fails.
    """
    from buildctl import engine
    from buildctl.engine import EngineError
    from buildctl.verify.expectations import merge
    from buildctl.verify.probe import parse_sizes

    if not IMAGE_REF.fullmatch(image or ""):
        raise InputError(f"--image {ascii(str(image)[:100])[1:-1]}: not an image reference; fix: give a local image as "
                         "docker images lists it, e.g. --image nvcr.io/nvidia/pytorch:25.01-py3")
    if not PYTHON_PATH.fullmatch(python or ""):
        raise InputError(f"--python {ascii(str(python)[:100])[1:-1]}: not a command name or an absolute path; fix: "
                         "e.g. --python python3 (on the image's PATH) or --python /opt/venv/bin/python")
    if module not in MODULES.values():
        raise InputError(f"--module {ascii(str(module)[:40])[1:-1]}: not a framework module buildctl probes; fix: --module torch")
    try:
        parse_sizes(sizes)
    except ValueError as e:
        raise InputError(f"--sizes: {e}") from None
    if iters < 1 or warmup < 0:
        raise InputError("--iters must be >= 1 and warm-up >= 0")
    client = client or engine.connect()
    ident = image_id(client, image)
    console = console or Console(stderr=json_out)
    out_dir = Path(out_dir) if out_dir else default_image_out_dir(image, ident)
    if sweep is None:
        sweep = spec.verify.allreduce if spec is not None else True

    def on_line(line: str) -> None:
        console.print(f"  {strip_controls(line)}", style="dim", markup=False, highlight=False)

    from buildctl import gpus as host_gpus

    gpus = bool(host_gpus.inventory().gpus)  # the image may hold a CUDA build: give it the GPUs there are
    console.print(f"[bold]verify[/] {escape(image)} ({escape(ident[:19])}, {escape(python)}, fresh container)")
    with tempfile.TemporaryDirectory(prefix="buildctl-verify-empty-") as empty:
        t0 = time.monotonic()
        try:
            # By id, not by name: what runs is what is recorded, even if the tag moves meanwhile. As root, so
            # that the probe can write /verify/out whatever USER the image sets; no shell (distroless images)
            # and no ENTRYPOINT (an image's `python` or launcher script would take the command as arguments).
            probe, res = _probe_in_container(
                client, ident, [python, "/verify/in/probe.py",
                                *probe_args(module, "/verify/out/probe.json", sweep=sweep, sizes=sizes,
                                            iters=iters, warmup=warmup)],
                {"/verify/in/probe.py": PROBE, "/verify/in/checks.py": CHECKS, "/verify/out": Path(empty)},
                shown=image, what=f"probe.json of {image} (written by its own {python})", on_line=on_line,
                gpus=gpus, network_mode=network_mode, timeout=timeout, user="0", entrypoint=[""])
        except EngineError as e:
            if python in str(e) and _NO_EXECUTABLE.search(str(e)):
                found = re.search(r'exec: "[^"]*": .*?(?=: unknown|$)', str(e))
                raise InputError(f"image {image} has no Python at {python} "
                                 f"({found.group(0)[:200] if found else _last_lines(str(e), 1)[-200:]}); "
                                 "fix: give the image's interpreter with --python: a command on its PATH "
                                 "(python3.12) or an absolute path (/opt/conda/bin/python)") from None
            raise
    artifacts.record_use({"image": [image]})  # for invoke clean, when it is one of buildctl's images
    environment = {"image": image, "image_id": ident, "python": python, "exit_code": res.exit_code,
                   "seconds": round(time.monotonic() - t0, 1)}
    exp = Expectations.from_spec(spec) if spec is not None else Expectations()
    if expect is not None:
        exp = merge(exp, expect)
    report = rep.Report(
        wheel=None, image={"reference": image, "id": ident, "python": python}, mode="image", module=module,
        environment=environment, expectations=exp.to_dict(), checks=evaluate(exp, probe, subject="image"),
        probe=probe, verdict=verdict(probe), spec=_spec_facts(spec),
    )
    return _publish(report, out_dir, json_out, console)
