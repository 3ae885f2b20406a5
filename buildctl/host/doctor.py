"""`invoke doctor`: can this host build each recipe, and run its verification?

`doctor()` is pure: the caller passes the engine facts (the `docker info` dict, see below) or the
engine error, and optionally the GPU report (default: `gpus.inventory()`, which never raises).
`print_doctor()` renders the report with rich; `--json` prints the dict as is.

Engine facts: the dict of `engine.engine_facts()` (keys kind = Docker or Podman, server_version, os,
storage_driver, docker_root_dir, cpus, memory_bytes, runtimes, nvidia_runtime, rootless, memory_limits,
memory_limits_note, local, free_bytes = free bytes under the data root, known only for a local engine;
base_images = {ref: {state: present | pullable | missing, detail, fix}} for the recipes' base images,
`engine.facts_at(url, base_images=...)`). The raw `docker info` keys (ServerVersion, OperatingSystem,
Driver, DockerRootDir, NCPU, MemTotal, Runtimes) are read too. Missing keys show as unknown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from buildctl.errors import RecipeError
from buildctl.host.gpus import NO_DRIVER, GpuReport, inventory
from buildctl.recipe import parallel_jobs, preflight
from buildctl.recipe.schema import Spec

if TYPE_CHECKING:
    from rich.console import Console

GiB = 1024**3
GB, MB = 10**9, 10**6  # the units the figures were measured in (docker images, du, file sizes)


class DiskParts(NamedTuple):
    """What one build leaves on the engine's data root, in bytes."""

    image: int  # the builder image (base and toolchain layers, the build venv)
    build_dir: int  # the build-directory volume: source, objects, libraries
    compile_cache: int  # what the build adds to the compile-cache volume
    artifact: int  # the wheel and its records

    def plus(self, other: DiskParts) -> DiskParts:
        return DiskParts(*(a + b for a, b in zip(self, other, strict=True)))


# Free space one build needs: the sum of its parts plus a margin, from what the real builds measured
# (docs/evidence/*/README.md; the table with each figure's source is in docs/compatibility.md, "Doctor").
# Debug information is 72 % of the Debug libtorch_cpu.so (1,325.1 of 1,827.9 MB of DWARF): objects with
# it are about 3.6x those without. It turns the measured Debug figures into Release ones where only the
# Debug build was measured, and the other way round.
DEBUG_INFO_SIZE_FACTOR = 1827.9 / (1827.9 - 1325.1)
CPU_RELEASE_DISK = DiskParts(
    image=int(1.73 * GB),  # measured: pytorch2.6-cpu-trixie's builder image
    build_dir=int(16 * GB / DEBUG_INFO_SIZE_FACTOR),  # estimate, 4.4 GB: the Debug one without its DWARF
    compile_cache=int(1.2 * GB),  # measured: the cache that held the Release build's objects
    artifact=int(76.0 * MB),  # measured: the Release wheel
)
CPU_DEBUG_DISK = DiskParts(
    image=int(1.75 * GB),  # measured: the Debug builder image (gdb and binutils added)
    build_dir=16 * GB,  # measured: the Debug build-directory volume after the wheel
    compile_cache=int(CPU_RELEASE_DISK.compile_cache * DEBUG_INFO_SIZE_FACTOR),  # estimate, 4.4 GB
    artifact=int(711.8 * MB),  # measured: the Debug wheel
)
# What debug information (Debug, RelWithDebInfo) adds to a build of any accelerator: the host code's DWARF,
# as the CPU build measured it. Device code gets line tables only (PyTorch's Debug nvcc flags: -g -lineinfo,
# no -G).
DEBUG_INFO_DISK = DiskParts(*(debug - release for debug, release in zip(CPU_DEBUG_DISK, CPU_RELEASE_DISK,
                                                                        strict=True)))
# A CUDA Release wheel carries about as many bytes of device code as the Debug CPU wheel carries of DWARF
# (PyPI's 2.6.0+cu124, 766.7 MB, against 711.8 MB), so its build directory and compile cache are estimated
# as the Debug CPU build's in that ratio: 17.2 GB and 4.7 GB. No full CUDA build ran here (the sample did).
CUDA_OVER_CPU_DEBUG = 766.7 / 711.8
CUDA_RELEASE_DISK = DiskParts(
    image=int(3.8 * GB),  # measured: pytorch2.15-cuda13.2's builder image (CUDA 13.2 as pip wheels)
    build_dir=int(CPU_DEBUG_DISK.build_dir * CUDA_OVER_CPU_DEBUG),
    compile_cache=int(CPU_DEBUG_DISK.compile_cache * CUDA_OVER_CPU_DEBUG),
    artifact=int(766.7 * MB),  # measured: PyPI's 2.6.0+cu124 wheel (docs/evidence/pytorch2.6-cpu-trixie)
)
# Not measured: ROCm builds as CUDA's, their image 4x (AMD's base image holds the ROCm stack with each
# math library's kernels for every gfx target); Ascend as two CPU builds (PyTorch and torch_npu, host
# C++ both) in an image with a vendor toolkit, taken as CUDA's.
ROCM_IMAGE_OVER_CUDA = 4
RELEASE_DISK: dict[str, DiskParts] = {
    "cpu": CPU_RELEASE_DISK,
    "cuda": CUDA_RELEASE_DISK,
    "rocm": CUDA_RELEASE_DISK._replace(image=CUDA_RELEASE_DISK.image * ROCM_IMAGE_OVER_CUDA),
    "ascend": CPU_RELEASE_DISK.plus(CPU_RELEASE_DISK)._replace(image=CUDA_RELEASE_DISK.image),
}
# On top of the parts: what is not counted (the runtime image verification builds, the download cache,
# layers unpacked while an image builds) and what is estimated.
DISK_MARGIN = 0.25
DEMOFW_DISK_NEEDED_BYTES = 5 * GiB  # the demo framework needs little


def disk_parts(spec: Spec) -> dict[str, int]:
    """The free space one build of `spec` needs on the engine's data root, part by part (bytes)."""
    if spec.framework.name == "demofw":
        return {"demo framework build": DEMOFW_DISK_NEEDED_BYTES}
    parts = RELEASE_DISK[spec.accelerator]
    if spec.build.type in parallel_jobs.BUILD_TYPES_WITH_DEBUG_INFO:
        parts = parts.plus(DEBUG_INFO_DISK)
    if spec.build.cache == "none":
        parts = parts._replace(compile_cache=0)
    named = {"image": parts.image, "build directory": parts.build_dir, "compile cache": parts.compile_cache,
             "artifact": parts.artifact}
    named["margin"] = int(sum(named.values()) * DISK_MARGIN)
    return named


def disk_needed(spec: Spec) -> int:
    return sum(disk_parts(spec).values())


def _disk_explanation(parts: dict[str, int]) -> str:
    """e.g. "~30.8 GiB (image 3.5 + build directory 16.1 + compile cache 4.4 + artifact 0.7 + margin 6.2 GiB)"."""
    total = f"~{_gib(sum(parts.values()))}"
    if len(parts) == 1:
        return total
    return f"{total} ({' + '.join(f'{name} {n / GiB:.1f}' for name, n in parts.items())} GiB)"


def _gib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / GiB:.1f} GiB"


def _pick(facts: dict, *keys: str):
    for k in keys:
        if facts.get(k) is not None:
            return facts[k]
    return None


def _engine_section(engine_facts: dict | None, engine_error: str | None) -> dict:
    if engine_facts is None or engine_error:
        return {"ok": False, "error": engine_error or "no container engine facts"}
    runtimes = _pick(engine_facts, "runtimes", "Runtimes") or []
    free = _pick(engine_facts, "free_bytes", "DataRootFreeBytes")
    kind = engine_facts.get("kind") or "Docker"
    gpus = bool(engine_facts.get("nvidia_runtime", "nvidia" in runtimes))
    return {
        "ok": True,
        "error": None,
        "kind": kind,
        "version": _pick(engine_facts, "server_version", "ServerVersion"),
        "rootless": engine_facts.get("rootless"),
        # what it can do for a build: limit memory (--memory, OOM reported), give GPUs (--gpus)
        "supports": {
            "memory_limits": engine_facts.get("memory_limits", True),
            "memory_limits_note": engine_facts.get("memory_limits_note") or "",
            "gpus": gpus,
            "gpus_note": "" if gpus else (
                "Podman's Docker API ignores --gpus (containers/podman#22645)" if kind == "Podman"
                else "no 'nvidia' runtime: --gpus needs the NVIDIA Container Toolkit"),
        },
        "os": _pick(engine_facts, "os", "OperatingSystem"),
        "storage_driver": _pick(engine_facts, "storage_driver", "Driver"),
        "data_root": _pick(engine_facts, "docker_root_dir", "DockerRootDir"),
        "data_root_free_bytes": int(free) if isinstance(free, int | float) and free >= 0 else None,
        "cpus": _pick(engine_facts, "cpus", "NCPU"),
        "mem_bytes": _pick(engine_facts, "memory_bytes", "MemTotal"),
        "runtimes": sorted(runtimes),
        "local": engine_facts.get("local"),
        # the recipes' base images: present, pullable (its registry answered) or missing, with the fix
        "base_images": dict(engine_facts.get("base_images") or {}),
    }


def base_images_needed(recipes: list[tuple[str, Spec]]) -> dict[str, str | None]:
    """{base image: its distro} over the recipes, in order: what doctor asks the engine about."""
    return {spec.base.image: spec.base.distro for _, spec in recipes}


def _recipe_entry(source: str, spec: Spec, engine: dict, engine_facts: dict | None, gpu: GpuReport) -> dict:
    acc = spec.accelerator
    reasons: list[str] = []
    warnings: list[str] = []
    build_ok = True

    try:
        preflight.refuse_placeholders(spec, source=source)
        warnings = preflight.preflight(spec, source=source)
    except RecipeError as e:
        build_ok = False
        reasons.append(str(e))

    parts = disk_parts(spec)
    need = sum(parts.values())
    kind = f"{acc} {spec.build.type}"
    jobs_n, jobs_why = None, None
    if not engine["ok"]:
        build_ok = False
        reasons.append(f"no container engine: {engine['error']}")
    else:
        base = (engine.get("base_images") or {}).get(spec.base.image)
        if base is not None and base["state"] == "missing":
            build_ok = False
            reasons.append(f"base image {spec.base.image} missing; {base['fix']}")
        free = engine["data_root_free_bytes"]
        if free is None:
            where = "remote engine" if engine.get("local") is False else "engine"
            reasons.append(f"free disk on the {where}'s data root unknown; "
                           f"a {kind} build needs {_disk_explanation(parts)}")
        elif free < need:
            build_ok = False
            reasons.append(
                f"{_gib(free)} free on {engine['data_root'] or 'the data root'}, a {kind} build needs "
                f"{_disk_explanation(parts)}; "
                "free space (docker system prune) or move the engine's data-root"
            )
        try:
            res = parallel_jobs.engine_resources(engine_facts or {})
            jobs_n, jobs_why = parallel_jobs.max_jobs(spec.build.max_jobs, cpus=res.cpus, mem_bytes=res.mem_bytes,
                                                      accelerator=acc, build_type=spec.build.type)
        except ValueError as e:
            jobs_why = f"MAX_JOBS unknown: {e}"
    if build_ok and not reasons:
        reasons.append("ok")

    gpu_ok, gpu_why = preflight.can_run(spec, gpu.gpus, gpu.driver)
    if acc == "cuda" and gpu_ok:
        mode, verify_ok = "gpu", True
        if engine["ok"] and not engine["supports"]["gpus"]:
            gpu_why += f"; {engine['supports']['gpus_note']}"
    elif acc == "cuda" and gpu.gpus and gpu.driver:
        mode, verify_ok = "cpu", False  # GPUs present but unusable for this build: worth fixing
    else:
        mode, verify_ok = "cpu", True
    if acc == "cuda" and engine["ok"] and engine.get("local") is False:
        gpu_why += "; the engine is remote: this host's GPU inventory may not be the engine host's"
    return {
        "name": spec.name,
        "source": source,
        "framework": spec.framework.name,
        "accelerator": acc,
        "cuda": spec.toolchain.cuda.version if spec.toolchain.cuda else None,
        "build": {
            "ok": build_ok,
            "reasons": reasons,
            "disk_needed_bytes": need,
            "disk_needed_parts": parts,
            "max_jobs": jobs_n,
            "max_jobs_explanation": jobs_why,
        },
        "verify": {"ok": verify_ok, "mode": mode, "reason": gpu_why},
        "warnings": warnings,
    }


def doctor(
    recipes: list[tuple[str, Spec]],
    *,
    engine_facts: dict | None,
    engine_error: str | None,
    gpu_report: GpuReport | None = None,
) -> dict:
    """The doctor report: engine, GPUs, and per recipe whether it can build and verify here."""
    gpu = gpu_report if gpu_report is not None else inventory()
    engine = _engine_section(engine_facts, engine_error)
    entries = [_recipe_entry(src, spec, engine, engine_facts, gpu) for src, spec in recipes]
    return {
        "ok": engine["ok"] and all(e["build"]["ok"] and e["verify"]["ok"] for e in entries),
        "engine": engine,
        "gpus": gpu.to_dict(),
        "recipes": entries,
    }


def print_doctor(report: dict, console: Console) -> None:
    """Render a doctor report with rich tables on the caller's console."""
    from rich.table import Table
    from rich.text import Text

    from buildctl.terminal_text import print_detail

    eng = report["engine"]
    if not eng["ok"]:
        console.print(f"[bold red]engine:[/] {eng['error']}")
    else:
        t = Table(title="Container engine", show_header=False)
        rootless = {True: " (rootless)", False: ""}.get(eng.get("rootless"), "")
        t.add_row("engine", f"{eng.get('kind') or 'Docker'} {eng.get('version') or 'unknown'}{rootless}")
        t.add_row("os", str(eng.get("os") or "unknown"))
        t.add_row("storage driver", str(eng.get("storage_driver") or "unknown"))
        t.add_row("data root", f"{eng.get('data_root') or 'unknown'} ({_gib(eng.get('data_root_free_bytes'))} free)")
        mem = eng.get("mem_bytes")
        t.add_row("cpus / memory", f"{eng.get('cpus') or '?'} / {_gib(mem) if isinstance(mem, int) else 'unknown'}")
        t.add_row("runtimes", ", ".join(eng.get("runtimes") or []) or "-")
        sup = eng["supports"]
        t.add_row("memory limits", "yes" if sup["memory_limits"] else f"no: {sup['memory_limits_note']}")
        t.add_row("GPUs (--gpus)", "yes" if sup["gpus"] else f"no: {sup['gpus_note']}")
        console.print(t)
        if eng.get("base_images"):
            t = Table(title="Base images")
            for col in ("image", "state"):
                t.add_column(col, overflow="fold")
            for ref, b in eng["base_images"].items():
                t.add_row(Text(ref), Text(b["state"], {"present": "green", "pullable": "yellow"}.get(b["state"], "red")))
            console.print(t)
            # Why and the fix, long: text after the table, as the recipes' reasons.
            for ref, b in eng["base_images"].items():
                if b["state"] != "present":
                    print_detail(console, f"base image {ref}", f"{b['detail']}" + (f"; {b['fix']}" if b["fix"] else ""),
                                 style="")

    g = report["gpus"]
    if not g["gpus"]:
        console.print(f"GPUs: {g['note'] or NO_DRIVER}" + (f" (driver {g['driver']})" if g.get("driver") else ""))
    else:
        t = Table(title=f"GPUs (driver {g['driver']}, CUDA <= {g['cuda_driver_max']})")
        for col in ("#", "name", "capability", "memory"):
            t.add_column(col)
        for gi in g["gpus"]:
            t.add_row(str(gi["index"]), gi["name"], gi["compute_capability"], _gib(gi["memory_total_bytes"]))
        console.print(t)
        if g["note"] and not g["note"].endswith("GPU(s)"):
            console.print(f"[yellow]{g['note']}[/]")

    if report["recipes"]:
        # One line per recipe, whatever the terminal's width; the reasons, long, follow the table.
        t = Table(title="Recipes")
        for col in ("recipe", "accelerator", "build", "verify", "MAX_JOBS"):
            t.add_column(col, no_wrap=True, overflow="ellipsis")
        for r in report["recipes"]:
            b, v = r["build"], r["verify"]
            t.add_row(Text(r["name"]), r["accelerator"], Text("yes", "green") if b["ok"] else Text("no", "red"),
                      Text(v["mode"], "green" if v["ok"] else "red"), str(b["max_jobs"] or "?"))
        console.print(t)
        # Reasons quote paths and recipe values: text, never markup.
        for r in report["recipes"]:
            for reason in r["build"]["reasons"]:
                if reason != "ok":
                    print_detail(console, f"{r['name']} build", reason, style="")
            print_detail(console, f"{r['name']} verify", r["verify"]["reason"], style="")
            for w in r["warnings"]:
                print_detail(console, f"warning {r['name']}", w, style="yellow")
    console.print("[bold green]doctor: ok[/]" if report["ok"] else "[bold red]doctor: problems found[/]")
