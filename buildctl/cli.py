"""The bodies of the invoke tasks. tasks.py parses arguments; everything else happens here.

Every command ends with exit 0 (ok), 1 (a run failed) or 2 (bad input), and reports errors as one
line on stderr, never as a traceback (set BUILDCTL_DEBUG=1 to see one for a bug).
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from invoke.exceptions import Exit
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from . import recipe as recipe_mod
from . import remotecache, resume
from . import render as render_mod
from .errors import BuildctlError, InputError
from .settings import Settings
from .ui import strip_controls

console = Console(stderr=True, highlight=False)
out = Console(highlight=False, soft_wrap=True)


def command(fn):
    """Map errors to one line and an exit code; Ctrl-C to 130."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exit:
            raise
        except BuildctlError as e:
            # The message may quote a build log, a probe or a wheel: text, never markup or terminal controls.
            console.print(f"[bold red]error:[/] {escape(strip_controls(str(e)))}", markup=True, soft_wrap=True)
            raise Exit(code=e.exit_code) from None
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/]")
            raise Exit(code=130) from None
        except Exception as e:  # a bug: say so in one line unless asked for the traceback
            if os.environ.get("BUILDCTL_DEBUG"):
                traceback.print_exc()
            console.print(f"[bold red]internal error:[/] {e.__class__.__name__}: {escape(strip_controls(str(e)))} "
                          "(rerun with BUILDCTL_DEBUG=1 for the traceback)", soft_wrap=True)
            raise Exit(code=1) from None

    return wrapper


def env_value(value: Any, var: str, default: Any = None) -> Any:
    if value not in (None, ""):
        return value
    return os.environ.get(var, default)


def site_options(chosen: Settings) -> dict:
    """The corporate / air-gapped settings that were set (flags over BUILDCTL_* variables), for `site:`."""
    site = chosen.site()
    if site.get("cache_url"):
        remotecache.check_url(site["cache_url"])
    return site


def read_ca_certs(paths) -> dict[str, str]:
    texts = {}
    for i, p in enumerate(paths):
        path = Path(p).expanduser()
        try:
            text = path.read_text()
        except OSError:
            raise InputError(f"--ca-cert {p}: file not found or unreadable; fix: give a PEM file "
                             "(e.g. /etc/ssl/certs/ca-certificates.crt)") from None
        if "-----BEGIN CERTIFICATE-----" not in text:
            raise InputError(f"--ca-cert {p}: no PEM certificate in it; fix: give a PEM file")
        texts[f"{i:02d}-{path.stem}.crt"] = text
    return texts


def load_spec(recipe: str, sets=None, *, base_image=None, site: dict | None = None, preflight=True):
    """Load + validate + (optionally) preflight. Returns (spec, warnings)."""
    if not recipe:
        raise InputError("--recipe is required; fix: give a name from `invoke recipes` or a YAML path")
    overrides = list(sets or [])
    if base_image:
        overrides.append(f"base.image={base_image}")
    spec = recipe_mod.load(recipe, overrides, site=site)
    warnings: list[str] = []
    if preflight:
        from . import compat

        warnings = compat.preflight(spec, source=_source(recipe)) or []
        for w in warnings:
            console.print(f"[yellow]warning:[/] {w}", soft_wrap=True)
    return spec, warnings


def _source(recipe: str) -> str:
    """The recipe file as error messages name it."""
    return recipe_mod._display(recipe_mod.recipe_path(recipe))


def print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


# --- tasks ------------------------------------------------------------------------------------


def recipe_rows() -> list[dict]:
    rows = []
    for path in recipe_mod.list_recipes():
        spec = recipe_mod.load(str(path))
        rows.append({"name": spec.name, "accelerator": spec.accelerator, "labels": list(spec.labels),
                     "description": spec.description, "path": str(path.relative_to(recipe_mod.REPO_ROOT))})
    return rows


@command
def recipes(*, as_json: bool) -> None:
    rows = recipe_rows()
    if as_json:
        return print_json(rows)
    print_recipes(rows, out)


def print_recipes(rows: list[dict], console: Console) -> None:
    """One line per recipe, whatever the terminal's width; the descriptions, long, follow the table."""
    table = Table(title="Recipes", title_justify="left")
    for col in ("name", "accelerator", "labels"):
        table.add_column(col, no_wrap=True, overflow="ellipsis")
    for r in rows:
        table.add_row(r["name"], r["accelerator"], ",".join(r["labels"]))
    console.print(table)
    for r in rows:
        if r["description"]:
            console.print(Text.assemble((r["name"], "bold"), f": {r['description']}"))


@command
def show(recipe: str, sets, *, as_json: bool, settings: Settings) -> None:
    spec, _ = load_spec(recipe, sets, base_image=settings.base_image, preflight=False)
    if as_json:
        return print_json(recipe_mod.masked_dump(spec))
    out.print(recipe_mod.resolved_yaml(spec), end="")


@command
def render(recipe: str, sets, *, out_dir: str | None, as_json: bool, settings: Settings,
           no_preflight: bool = False) -> None:
    site = site_options(settings)
    spec, _ = load_spec(recipe, sets, base_image=settings.base_image, site=site, preflight=not no_preflight)
    from . import compat

    # Rendering is pure and a placeholder is worth reading; the Dockerfile marks it, and `build` refuses it.
    for field, problem, fix in compat.placeholders(spec):
        console.print(f"[yellow]warning:[/] {escape(field)}: {escape(problem)}; `invoke build` refuses it until "
                      f"pinned; fix: {escape(fix)}", soft_wrap=True)
    rendered = render_mod.render(spec, ca_texts=read_ca_certs(site.get("ca_certs", [])))
    dest = Path(out_dir) if out_dir else Path("build") / spec.name
    render_mod.write(rendered, dest)
    files = sorted(rendered.files)
    if as_json:
        return print_json({"recipe": spec.name, "dir": str(dest), "files": files})
    table = Table(title=f"Rendered {spec.name} into {dest}/", title_justify="left")
    table.add_column("file")
    table.add_column("bytes", justify="right")
    for f in files:
        if not f.endswith(".keep"):
            table.add_row(f, str(len(rendered.files[f].encode())))
    out.print(table)
    out.print(f"build the image with: docker build -t buildctl/{spec.name} {dest}")


RUNNERS = {
    "cuda": ["self-hosted", "linux", "x64", "cuda"],
    "rocm": ["self-hosted", "linux", "x64", "rocm"],
    "ascend": ["self-hosted", "linux", "arm64", "ascend"],
    "cpu": "ubuntu-latest",
}


@command
def matrix(labels) -> None:
    include = []
    for path in recipe_mod.list_recipes():
        spec = recipe_mod.load(str(path))
        if labels and not set(labels) & set(spec.labels):
            continue
        include.append({"recipe": spec.name, "runs-on": RUNNERS[spec.accelerator], "labels": list(spec.labels)})
    if not include:
        raise InputError(f"--label {','.join(labels)}: no recipe has it; fix: see `invoke recipes` for labels")
    print_json({"include": include})


def _summary_rows(result) -> list[tuple[str, str]]:
    m = result.manifest
    rows = [("recipe", result.recipe), ("artifact", str(result.artifact)),
            ("status", "up to date (nothing rebuilt)" if result.cached else "built")]
    for w in m.get("wheels", []):
        rows.append(("wheel", f"{w['file']} ({w['bytes'] / 1e6:.1f} MB, sha256 {w['sha256'][:12]}…)"))
    tc = m.get("toolchain", {})
    if tc:
        rows.append(("toolchain", ", ".join(f"{k} {v}" for k, v in tc.items() if v)))
    cc = m.get("compile_cache") or {}
    if cc.get("hit_rate") is not None:
        rows.append(("compile cache", f"{cc['tool']}: {cc['hit_rate']:.0%} hits ({cc['hits']}/{cc['hits'] + cc['misses']})"))
    rows.extend(_cache_rows(cc))
    resumed = resume.summary(m.get("resumed"))
    if resumed:
        rows.append(("resumed", resumed))
    if result.report is not None or result.verify_error is not None:
        rows.append(("verification", "passed" if result.verify_error is None else "FAILED"))
    return rows


def _cache_rows(cc: dict) -> list[tuple[str, str]]:
    """The local volume's and the shared server's figures (remotecache.stats), when a server was set."""
    remote = cc.get("remote")
    if not isinstance(remote, dict):
        return []

    def rate(hits, misses) -> str:
        return f"{hits / (hits + misses):.0%} hits ({hits}/{hits + misses})" if hits + misses else "no lookups"

    rows = [("  local", rate(cc.get("local_hits", 0), cc.get("local_misses", 0)))]
    if remote.get("state") == "used":
        shared = rate(remote.get("hits", 0), remote.get("misses", 0))
        errors = remote.get("errors", 0) + remote.get("timeouts", 0)
        rows.append(("  shared", f"{shared} at {remote.get('url')}" + (f", {errors} failed lookups" if errors else "")))
    else:
        rows.append(("  shared", f"not used: {remote.get('reason') or remote.get('state')}"))
    return rows


UNTIL_STEPS = ("configure", "compile", "wheel")


def _print_partial(result, as_json: bool) -> None:
    """`--until STEP`: show what the step produced (the CMake summary for configure)."""
    from rich.table import Table
    from rich.text import Text

    from . import stepreport

    facts = stepreport.configure_facts(result.out_dir)
    ninja = stepreport.ninja_steps(result.out_dir)
    wheels = sorted(p.name for p in result.out_dir.glob("*.whl"))
    if as_json:
        print_json({"recipe": result.recipe, "ok": True, "key": result.key, "until": result.until,
                    "out_dir": str(result.out_dir.resolve()), "build_volume": result.volume, "configure": facts,
                    "ninja": ninja, "wheels": wheels})
        return
    table = Table(title=f"{result.recipe}: stopped after {result.until}", show_header=False, expand=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in stepreport.headline(facts):
        table.add_row(Text(key), Text(value))
    if result.until != "configure":
        table.add_row("ninja steps", f"{ninja['steps']} built ({ninja['busy_s']:.0f} s of compile time)")
    for name in wheels:
        table.add_row("wheel", Text(str(result.out_dir / name)))
    if (result.out_dir / "cuobjdump.txt").is_file():
        table.add_row("device code", Text(str(result.out_dir / "cuobjdump.txt")))
    console.print(table)
    console.print(Text(f"outputs: {result.out_dir} (full CMake summary: cmake-summary.txt)\n"
                       f"the build directory stays in volume {result.volume}: "
                       "`invoke build` without --until resumes from it"))


@command
def build(recipe: str, sets, *, settings: Settings, no_preflight=False, as_json=False, verify_kwargs=None,
          until=None, targets=None, check_reproducible=False) -> None:
    from . import compat, engine, pipeline, ui
    from .errors import BuildFailed, NotReproducible, VerificationFailed

    site = site_options(settings)
    spec, warnings = load_spec(recipe, sets, base_image=settings.base_image, site=site, preflight=not no_preflight)
    # Even with --no-preflight: no file has the all-zero digest, so the fetch could only fail.
    compat.refuse_placeholders(spec, source=_source(recipe))
    jobs = settings.jobs
    if jobs != "auto":
        try:
            jobs = int(jobs)
            assert jobs >= 1
        except (ValueError, AssertionError):
            raise InputError(f"--jobs {jobs}: not a positive integer; fix: --jobs 4 or --jobs auto") from None
    if check_reproducible and until:
        raise InputError("--check-reproducible compares two whole wheels; fix: drop --until")
    if until and until not in UNTIL_STEPS:
        raise InputError(f"--until {until}: not a step; fix: --until {'|'.join(UNTIL_STEPS)}")
    targets = tuple(targets or ())
    if targets and until != "compile":
        raise InputError("--target builds a sample of the compile step; fix: add --until compile")
    for target in targets:
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_./+-]*", target) or ".." in target.split("/"):
            raise InputError(f"--target {target!r}: not a ninja output path; fix: a path under build/, "
                             "e.g. caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/cuda/Copy.cu.o")
    opts = pipeline.BuildOptions(
        jobs=jobs, verify=not settings.no_verify, keep_container=settings.keep_container,
        memory=settings.memory, artifacts_root=settings.artifacts, ca_texts=read_ca_certs(site.get("ca_certs", [])),
        verify_kwargs={**({"console": Console(stderr=True)} if as_json else {}), **(verify_kwargs or {})},
        until=until or None, targets=targets,
    )
    view = ui.make_view(as_json)
    result = error = reproducibility = None
    try:
        with engine.terminate_as_interrupt():
            if check_reproducible:
                from . import reproducible

                result, reproducibility = reproducible.check(spec, opts, view, lambda: ui.make_view(as_json))
            else:
                result = pipeline.run(spec, opts, view)
        if isinstance(result, pipeline.PartialResult):
            view.close()
            _print_partial(result, as_json)
            return
        error = result.verify_error
    except (BuildFailed, VerificationFailed) as e:
        error = e
    finally:
        view.close()
    if error is None and reproducibility is not None and not reproducibility.ok:
        error = NotReproducible(reproducibility.comparison.reason())
    if as_json:
        payload = {"recipe": spec.name, "ok": error is None, "warnings": warnings,
                   "durations_s": view.durations}
        if result is not None:
            report = result.report if result.verify_error is None else result.verify_error.report
            payload.update(key=result.key, artifact=str(result.artifact), cached=result.cached,
                           manifest=result.manifest, verification=report.to_dict() if report is not None else None)
        if reproducibility is not None:
            payload["reproducible"] = reproducibility.to_dict()
        if error is not None:
            payload["error"] = str(error).splitlines()[0]
            payload["bundle"] = str(error.bundle) if isinstance(error, BuildFailed) else None
            payload["diagnosis"] = error.diagnosis.to_dict() if error.diagnosis else None
        print_json(payload)
    elif result is not None:
        view.summary(_summary_rows(result))
        if reproducibility is not None:
            out.print(reproducible.table(reproducibility))
    if result is not None and result.verify_error is not None and not as_json:
        console.print(f"the wheel is built and published at {escape(str(result.artifact))}, but it is not what the "
                      "recipe asks for")
        if result.verify_error.diagnosis is not None:
            from .diagnose import render_diagnosis

            console.print(strip_controls(render_diagnosis(result.verify_error.diagnosis)), markup=False, highlight=False)
    if error is not None:
        raise error


@command
def doctor(recipe: str | None, *, as_json: bool) -> None:
    from . import doctor as doctor_mod
    from . import engine

    facts, error = None, None
    try:
        facts = engine.engine_facts(engine.connect())
    except BuildctlError as e:
        error = str(e)
    paths = [recipe_mod.recipe_path(recipe)] if recipe else recipe_mod.list_recipes()
    specs = [(str(p), recipe_mod.load(str(p))) for p in paths]
    report = doctor_mod.doctor(specs, engine_facts=facts, engine_error=error)
    if as_json:
        print_json(report)
    else:
        doctor_mod.print_doctor(report, console=out)
    if not report["engine"]["ok"]:
        raise Exit(code=1)


@command
def base_image(distro: str, *, mirror: str | None, tag: str | None, force: bool, no_check_gpg: bool) -> None:
    from . import baseimage, engine

    if distro not in baseimage.DISTROS:
        raise InputError(f"--distro {distro}: unknown; fix: one of {', '.join(baseimage.DISTROS)}")
    client = engine.connect()
    maker = baseimage.make_base_image if force else baseimage.ensure_base_image
    image_id = maker(client, distro, mirror=mirror or None, tag=tag or None, no_check_gpg=no_check_gpg,
                     on_line=lambda line: console.print(strip_controls(line), markup=False, highlight=False))
    out.print(f"{tag or baseimage.default_tag(distro)} {image_id}")


@command
def clean(*, older_than_days: float | None, keep_gb: float | None, images: bool, caches: bool, containers: bool,
          dry_run: bool, as_json: bool, namespace: str | None = None) -> None:
    from rich.text import Text

    from . import housekeeping

    if (older_than_days is not None and older_than_days < 0) or (keep_gb is not None and keep_gb < 0):
        raise InputError("--older-than-days and --keep-gb take a number >= 0")
    report = housekeeping.clean(older_than_days=older_than_days,
                                keep_bytes=int(keep_gb * 1e9) if keep_gb is not None else None, images=images,
                                caches=caches, containers=containers, dry_run=dry_run,
                                namespace=namespace)
    if as_json:
        return print_json(report)
    table = Table(title="Would free" if dry_run else "Freed", title_justify="left")
    for col in ("kind", "item", "why"):
        table.add_column(col, overflow="fold")
    table.add_column("MB", justify="right")
    for item in report["removed"]:  # names come from the disk and the engine: text, not markup
        table.add_row(item["kind"], Text(strip_controls(item["name"])), item["reason"], f"{item['bytes'] / 1e6:.1f}")
    if report["removed"]:
        out.print(table)
    for kind, f in sorted(report["freed"].items()):
        out.print(f"{kind}: {f['count']} {'would be ' if dry_run else ''}removed, {f['bytes'] / 1e6:.1f} MB")
    out.print(f"total: {report['freed_bytes'] / 1e6:.1f} MB {'would be ' if dry_run else ''}freed")
    for item in report["failed"]:
        console.print(Text(strip_controls(f"not removed: {item['kind']} {item['name']}: {item['error']}"),
                           style="yellow"))
    for link in report["symlinks_left_alone"]:
        console.print(Text(strip_controls(f"left alone: {link} is a symlink (clean never follows one)"), style="dim"))


@command
def repro(bundle: str, *, shell: bool, as_json: bool) -> None:
    from . import repro as repro_mod

    if not bundle:
        raise InputError("BUNDLE is required; fix: invoke repro artifacts/failures/<recipe>-<time>")
    sink = None if as_json else (lambda line: out.print(strip_controls(line), markup=False, highlight=False))
    # A bundle is untrusted: it is validated on opening, and what it will run is shown before it runs.
    with repro_mod.open_bundle(Path(bundle)) as b:
        client = repro_mod.preflight(b, shell=shell)
        for line in repro_mod.summary(b, shell=shell):
            console.print(strip_controls(line), markup=False, highlight=False, soft_wrap=True)
        if shell:
            code = repro_mod.shell(b, client)
            if code:
                raise Exit(code=code)
            return
        outcome = repro_mod.replay(b, client, on_line=sink)
    if as_json:
        print_json(outcome)
    else:
        # Titles and the step come from the bundle and the replayed log: shown as text.
        expected, got, step = (escape(strip_controls(str(x))) if x else x for x in (
            (outcome.get("expected") or {}).get("title"), (outcome.get("diagnosis") or {}).get("title"),
            outcome["step"]))
        if outcome["reproduced"]:
            out.print(f"[bold red]reproduced[/]: step {step} fails again (exit {outcome['exit_code']})"
                      + (f"; diagnosis: {got}" if got else ""))
        elif outcome["exit_code"]:
            out.print(f"[yellow]failed differently[/]: step {step} exit {outcome['exit_code']}; "
                      f"diagnosis {got or 'unknown'} (bundle said: {expected or 'unknown'})")
        else:
            out.print(f"[green]not reproduced[/]: step {step} passes now (bundle said: {expected or 'unknown'})")
    # The exit code mirrors the replayed step, so a CI job can assert the failure still happens.
    if outcome["exit_code"]:
        raise Exit(code=1)


def _latest_artifact(spec) -> Path:
    from . import artifacts

    found = artifacts.latest(spec.name)
    if found is None:
        raise InputError(f"no artifact of {spec.name} yet; fix: invoke build --recipe {spec.name}")
    return found


def _artifact_wheel(artifact: Path) -> Path:
    """The wheel an artifact's manifest names: a plain file name inside the artifact folder."""
    from .verify import schema

    fix = "fix: rebuild it (invoke build), or give the wheel with --wheel"
    manifest = schema.read_json(artifact / "manifest.json", f"{artifact}/manifest.json", fix)
    wheels = manifest.get("wheels") if isinstance(manifest, dict) else None
    name = wheels[0].get("file") if isinstance(wheels, list) and wheels and isinstance(wheels[0], dict) else None
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise InputError(f"{artifact}/manifest.json names no wheel file (wheels[0].file); {fix}")
    return artifact / name


@command
def verify(recipe: str | None, wheel: str | None, sets, *, host: bool, as_json: bool, sizes: str, iters: int,
           settings: Settings, module: str | None = None, image: str | None = None, python: str | None = None,
           expect=None) -> None:
    from . import engine, pipeline
    from .stages.artifact import recorded_requirements
    from .verify import runner

    if image is not None:
        return _verify_image(image, recipe, wheel, sets, host=host, python=python, expect=expect, as_json=as_json,
                             sizes=sizes, iters=iters, module=module, settings=settings)
    if python or expect:
        raise InputError(f"{'--python' if python else '--expect'} is for --image; fix: add --image IMAGE, or put "
                         "a wheel's expectations in its recipe (--recipe R, --set verify.expect.cuda=12.4)")
    if not recipe and not wheel:
        raise InputError("give --recipe R (its latest artifact), --wheel PATH or --image IMAGE")
    kwargs = dict(sizes=sizes, iters=iters, json_out=as_json, module=module or None)
    spec = None
    if recipe:
        spec, _ = load_spec(recipe, sets, site=site_options(settings), preflight=False)
    if wheel or host:
        wheel_path = Path(wheel) if wheel else None
        if wheel_path is None:
            wheel_path = _artifact_wheel(_latest_artifact(spec))
        network = spec.site.network if spec else settings.network
        if host and spec is not None:  # as the recipe's runtime image has them, from what its build recorded
            kwargs["runtime_requirements"] = recorded_requirements(wheel_path.resolve().parent, wheel_path)
        runner.verify_wheel(wheel_path, spec=spec, host=host, network_mode=engine.network_mode_for(network), **kwargs)
        return
    # The runtime image is built from the context the artifact records (the recipe is not rendered again).
    pipeline.verify_artifact(spec, _latest_artifact(spec),
                             on_line=lambda line: console.print(f"  {strip_controls(line)}", style="dim",
                                                                markup=False, highlight=False),
                             **kwargs)


def _verify_image(image: str, recipe: str | None, wheel: str | None, sets, *, host: bool, python: str | None,
                  expect, as_json: bool, sizes: str, iters: int, module: str | None, settings: Settings) -> None:
    from . import engine
    from .verify import runner
    from .verify.expectations import parse_expect

    if wheel or host:
        raise InputError(f"--image verifies what the image holds; {'--wheel' if wheel else '--host'} verifies a wheel; "
                         "fix: give one of them")
    module = module or "torch"
    expectations = parse_expect(expect or (), module)  # bad input refused before the engine is asked
    spec = None
    if recipe:
        spec, _ = load_spec(recipe, sets, site=site_options(settings), preflight=False)
    elif sets:
        raise InputError("--set changes a recipe; fix: add --recipe R, or use --expect key=value")
    network = spec.site.network if spec else settings.network
    runner.verify_image(image, python=python or "python3", module=module, expect=expectations, spec=spec,
                        sizes=sizes, iters=iters, json_out=as_json, network_mode=engine.network_mode_for(network))


@command
def diff(a: str, b: str, *, as_json: bool, show_all: bool) -> None:
    from .verify import diff as diff_mod

    if not a or not b:
        raise InputError("give two builds: invoke diff A B (artifact folders or report.json files)")
    result = diff_mod.diff_paths(Path(a), Path(b))
    if as_json:
        return print_json(result)
    diff_mod.print_diff(result, out, show_all=show_all)


@command
def publish(recipe: str | None, artifact_dirs, *, to: str | None, as_json: bool) -> None:
    from . import publish as publish_mod

    to = env_value(to, "BUILDCTL_PUBLISH_TO", "")
    result = publish_mod.publish(to, recipe=recipe or None, artifact_dirs=artifact_dirs or ())
    if as_json:
        return print_json(result)
    table = Table(title=f"Published to {result['to']}", title_justify="left")
    for col in ("wheel", "recipe", "status", "sha256"):
        table.add_column(col, overflow="fold")
    for row in result["wheels"]:
        table.add_row(row["file"], row["recipe"], row["status"], row["sha256"][:12] + "…")
    out.print(table)
    first = result["wheels"][0]
    if result["index_url"]:
        index_url = result["index_url"]
    else:
        index_url = "http://HOST:8080/simple/"
        out.print(f"serve it: python3 -m http.server --directory {result['to']} 8080")
    out.print(f"install: pip install --index-url {index_url} '{first['project']}=={first['version']}'", markup=False)
