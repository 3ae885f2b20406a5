"""`invoke build`: the checks on its options, the run, and what it prints (summary rows, the partial
result of --until, the JSON payload).

A build that finds its artifact (a no-op) imports only what it runs: the failure path, verification,
the reproducibility check and --until's report are imported where they are used
(tests/unit/test_import_budget.py)."""

from __future__ import annotations

import re

from rich.markup import escape

from buildctl.cli.common import (
    command,
    console,
    load_spec,
    out,
    print_json,
    recipe_source,
    site_options,
)
from buildctl.errors import BuildctlError, InputError
from buildctl.pipeline import memory_budget, resume, stages
from buildctl.settings import Settings
from buildctl.terminal_text import strip_controls
from buildctl.verify.options import VerifyOptions


def _summary_rows(result) -> list[tuple[str, str]]:
    m = result.manifest
    status = ("up to date (nothing rebuilt)" if result.cached else "built and published" if result.published
              else "built, NOT published: its verification failed")
    rows = [("recipe", result.recipe), ("artifact" if result.published else "kept in", str(result.artifact)),
            ("status", status)]
    for w in m.wheels:
        rows.append(("wheel", f"{w.file} ({(w.bytes or 0) / 1e6:.1f} MB, sha256 {w.sha256[:12]}…)"))
    tc = m.toolchain
    if tc:
        rows.append(("toolchain", ", ".join(f"{k} {v}" for k, v in tc.items() if v)))
    cc = m.compile_cache
    if cc.get("hit_rate") is not None:
        rows.append(("compile cache", f"{cc['tool']}: {cc['hit_rate']:.0%} hits ({cc['hits']}/{cc['hits'] + cc['misses']})"))
    rows.extend(_cache_rows(cc))
    if m.dist:
        rows.append(("cluster", _dist_row(m.dist)))
    if m.memory:
        rows.append(("memory", memory_budget.summary_row(m.memory)))
    resumed = resume.summary(m.resumed)
    if resumed:
        rows.append(("resumed", resumed))
    if m.configure is not None and not result.cached:
        rows.append(("configure gate", f"{m.configure.judged} facts as the recipe asks"))
    if result.report is not None or result.verify_error is not None:
        rows.append(("verification", "passed" if result.verify_error is None else "FAILED"))
    return rows


def _cache_rows(cc: dict) -> list[tuple[str, str]]:
    """The local volume's and the shared server's figures (compile_cache.stats), when a server was set."""
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


def _dist_row(section: dict) -> str:
    """The build cluster's row: where the compiles ran, or why it was not used."""
    if section.get("state") != "used":
        return f"not used: {section.get('reason') or section.get('state')}"
    units = section.get("units") or {}
    text = (f"{section.get('remote', 0)} compiles on {section.get('servers', 0)} server(s) at {section.get('scheduler')}, "
            f"{units.get('local', 0)} units here")
    if section.get("left"):
        text += f"; left it: {section['left']}"
    if section.get("retried_locally"):
        text += "; compiled again locally after a failure"
    return text


def _count(option: str, value: str, *, minimum: int) -> str | int:
    """`auto`, or a whole number from `minimum` up (InputError otherwise)."""
    if value == "auto":
        return value
    if not value.isdigit() or int(value) < minimum:
        raise InputError(f"{option} {value}: not a whole number from {minimum}; fix: {option} 2 or {option} auto")
    return int(value)


def _print_partial(result, as_json: bool) -> None:
    """`--until STEP`: show what the step produced (the CMake summary for configure)."""
    from rich.table import Table
    from rich.text import Text

    from buildctl.pipeline import until_report

    facts = until_report.configure_facts(result.out_dir)
    ninja = until_report.ninja_steps(result.out_dir)
    wheels = sorted(p.name for p in result.out_dir.glob("*.whl"))
    if as_json:
        image = (result.out_dir / "image.txt").read_text().split() if result.until == "image" else [None]
        print_json({"recipe": result.recipe, "ok": True, "key": result.key, "until": result.until, "image": image[0],
                    "out_dir": str(result.out_dir.resolve()), "build_volume": result.volume, "configure": facts,
                    "gate": result.gate.to_dict() if result.gate is not None else None,
                    "ninja": ninja, "wheels": wheels, "durations_s": dict(result.durations)})
        return
    table = Table(title=f"{result.recipe}: stopped after {result.until}", show_header=False, expand=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in until_report.headline(facts):
        table.add_row(Text(key), Text(value))
    image = (result.out_dir / "image.txt").read_text().split() if result.until == "image" else []
    if image:
        table.add_row("builder image", Text(f"{image[0]} ({image[1][:19]})"))
    elif result.until != "configure":
        table.add_row("ninja steps", f"{ninja['steps']} built ({ninja['busy_s']:.0f} s of compile time)")
    for name in wheels:
        table.add_row("wheel", Text(str(result.out_dir / name)))
    if (result.out_dir / "cuobjdump.txt").is_file():
        table.add_row("device code", Text(str(result.out_dir / "cuobjdump.txt")))
    console.print(table)
    if result.gate is not None:
        console.print(gate_table(result.gate.rows))
    if image:
        console.print(Text(f"the toolchain's pins were checked as the image was built (build log: "
                           f"{result.out_dir / 'build.log'}); `invoke build` without --until builds on it"))
        return
    console.print(Text(f"outputs: {result.out_dir} (full CMake summary: cmake-summary.txt)\n"
                       f"the build directory stays in volume {result.volume}: "
                       "`invoke build` without --until resumes from it"))


def gate_table(rows):
    """The configure gate's rows (configure_gate.Row): what the recipe asks, what CMake decided, whether
    they agree. Values come from the build container's files: text, never markup."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title="configure gate: what CMake decided, against what the recipe asks", title_justify="left")
    for col in ("fact", "recipe asks", "CMake decided", ""):
        table.add_column(col, overflow="fold")
    for row in rows:
        style = {"ok": "green", "mismatch": "bold red"}.get(row.status, "dim")
        asked = f"{row.asked} ({row.asked_by})" if row.asked is not None else "-"
        table.add_row(Text(row.fact), Text(asked), Text(row.decided if row.decided is not None else "-"),
                      Text(row.status, style=style))
    return table


def build_options(settings: Settings, *, until: str | None = None, targets: tuple[str, ...] = (),
                  check_reproducible: bool = False) -> stages.BuildOptions:
    """A build's options from the settings and its own flags, each checked (one line, exit 2, before anything
    runs); `invoke build` and a child build (cli/child.py) alike."""
    jobs = settings.jobs
    if jobs != "auto":
        try:
            jobs = int(jobs)
            assert jobs >= 1
        except (ValueError, AssertionError):
            raise InputError(f"--jobs {jobs}: not a positive integer; fix: --jobs 4 or --jobs auto") from None
    dist_local_jobs = _count("--dist-local-jobs", settings.dist_local_jobs, minimum=0)
    if settings.cpuset and not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", settings.cpuset):
        raise InputError(f"--cpuset {settings.cpuset!r}: not a CPU list; fix: e.g. --cpuset 0 or --cpuset 0-3,6")
    if check_reproducible and until:
        raise InputError("--check-reproducible compares two whole wheels; fix: drop --until")
    if until and until not in stages.UNTIL_STEPS:
        raise InputError(f"--until {until}: not a step; fix: --until {'|'.join(stages.UNTIL_STEPS)}")
    if targets and until != "compile":
        raise InputError("--target builds a sample of the compile step; fix: add --until compile")
    for target in targets:
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_./+-]*", target) or ".." in target.split("/"):
            raise InputError(f"--target {target!r}: not a ninja output path; fix: a path under build/, "
                             "e.g. caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/cuda/Copy.cu.o")
    return stages.BuildOptions(
        jobs=jobs, verify=not settings.no_verify, keep_container=settings.keep_container,
        memory=settings.memory, cpuset=settings.cpuset, dist_local_jobs=dist_local_jobs,
        artifacts_root=settings.artifacts, namespace=settings.namespace, template_cache=settings.template_cache,
        until=until or None, targets=targets, engine_url=settings.engines[0] if settings.engines else None,
        offline=settings.offline, environ=settings.environ(),
        verify_options=VerifyOptions(cache_dir=settings.cache_dir, step_summary=settings.step_summary,
                                     environ=settings.environ()),
    )


def remember_noop(recipe: str, sets, *, settings: Settings, no_preflight: bool, spec, reads: list,
                  result, warnings) -> None:
    """A no-op (the artifact found, nothing built or verified): recorded in the memo, for the next identical
    request to repeat without the work; `invoke build` and a child build (cli/child.py) alike."""
    if not result.cached or "verify" in result.durations:
        return
    from buildctl.cli import noop

    skipped = ["image", "compile", "wheel", *(["extensions"] if spec.extensions else []),
               *(["verify"] if result.report is not None else [])]
    noop.remember(recipe, sets, settings=settings, no_preflight=no_preflight, spec=spec, reads=reads,
                  result=result, shown=noop.Shown(warnings, _summary_rows(result), skipped))


@command
def build(recipe: str, sets, *, settings: Settings, no_preflight=False, as_json=False, until=None, targets=None,
          check_reproducible=False) -> None:
    from buildctl import engine, ui
    from buildctl.pipeline import pipeline
    from buildctl.recipe import preflight

    site = site_options(settings)
    reads: list = []
    spec, warnings = load_spec(recipe, sets, base_image=settings.base_image, site=site, preflight=not no_preflight,
                               reads=reads)
    # Even with --no-preflight: no file has the all-zero digest, so the fetch could only fail.
    preflight.refuse_placeholders(spec, source=recipe_source(recipe), image_only=until == "image")
    opts = build_options(settings, until=until, targets=tuple(targets or ()), check_reproducible=check_reproducible)
    view = ui.make_view(as_json)
    result = error = reproducibility = None
    try:
        with engine.terminate_as_interrupt():
            if check_reproducible:
                from buildctl.pipeline import rebuild_check

                result, reproducibility = rebuild_check.check(spec, opts, view, lambda: ui.make_view(as_json))
            else:
                result = pipeline.run(spec, opts, view)
        if isinstance(result, pipeline.PartialResult):
            view.close()
            _print_partial(result, as_json)
            return
        error = result.verify_error
    except BuildctlError as e:
        if not _run_failed(e):
            raise
        error = e
    finally:
        view.close()
    if error is None and reproducibility is not None and not reproducibility.ok:
        from buildctl.pipeline.rebuild_check import NotReproducible

        error = NotReproducible(reproducibility.comparison.reason())
    if as_json:
        durations = result.durations if result is not None else getattr(error, "durations", {})
        payload = {"recipe": spec.name, "ok": error is None, "warnings": warnings, "durations_s": dict(durations)}
        if result is not None:
            report = result.report if result.verify_error is None else result.verify_error.report
            payload.update(key=result.key, artifact=str(result.artifact), cached=result.cached, published=result.published,
                           manifest=result.manifest.to_json(), verification=report.to_dict() if report is not None else None)
        if reproducibility is not None:
            payload["reproducible"] = reproducibility.to_dict()
        if error is not None:
            from buildctl.pipeline.stages.failure import BuildFailed

            payload["error"] = str(error).splitlines()[0]
            payload["bundle"] = str(error.bundle) if isinstance(error, BuildFailed) else None
            payload["diagnosis"] = error.diagnosis.to_dict() if error.diagnosis else None
        print_json(payload)
    elif result is not None:
        view.summary(_summary_rows(result))
        if reproducibility is not None:
            out.print(rebuild_check.table(reproducibility))
    if result is not None and reproducibility is None:
        remember_noop(recipe, sets, settings=settings, no_preflight=no_preflight, spec=spec, reads=reads,
                      result=result, warnings=warnings)
    if result is not None and result.verify_error is not None and not as_json:
        where = (f"published at {escape(str(result.artifact))}" if result.published else
                 f"NOT published: the wheel, its manifest and the report are kept in {escape(str(result.artifact))}")
        console.print(f"the wheel is built but it is not what the recipe asks for; {where}")
        if result.verify_error.diagnosis is not None:
            from buildctl.failure.diagnose import render_diagnosis

            console.print(strip_controls(render_diagnosis(result.verify_error.diagnosis)), markup=False, highlight=False)
    if error is not None:
        raise error


@command
def dry_run(recipes: list[str], sets, *, settings: Settings, no_preflight=False, as_json=False,
            other_options=False) -> None:
    """`invoke build --dry-run`: the key, whether it is up to date, and what changed (pipeline.dry_run)."""
    from rich.table import Table
    from rich.text import Text

    from buildctl.pipeline.dry_run import dry_run as look
    from buildctl.store import key as key_mod

    if len(recipes) > 1 or len(settings.engines) > 1 or other_options:
        raise InputError("--dry-run says one recipe's key on one engine; fix: give one --recipe, and drop --label, "
                         "--until, --target and --check-reproducible")
    spec, _ = load_spec(recipes[0] if recipes else "", sets, base_image=settings.base_image, site=site_options(settings),
                        preflight=not no_preflight)
    opts = stages.BuildOptions(artifacts_root=settings.artifacts, namespace=settings.namespace,
                               offline=settings.offline, template_cache=settings.template_cache,
                               engine_url=settings.engines[0] if settings.engines else None,
                               environ=settings.environ())
    found = look(spec, opts)
    if as_json:
        print_json(found.to_json())
        return
    table = Table(title=f"{spec.name}: invoke build would", show_header=False, expand=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("key", found.key)
    table.add_row("status", Text(f"up to date: {found.artifact}" if found.up_to_date else "build it"))
    if found.latest is None and not found.up_to_date:
        table.add_row("why", Text(f"no artifact of {spec.name} yet"))
    elif found.latest is not None and not found.up_to_date:
        table.add_row("since", Text(f"{found.latest}: {key_mod.describe(found.changed)}"))
    elif found.changed:
        table.add_row("why", Text(key_mod.describe(found.changed)))
    table.add_row("base image", Text(found.base_image))
    table.add_row("pip", Text(found.pip))
    for note in found.resolved:
        table.add_row("resolved", Text(note.removeprefix("buildctl: ")))
    if found.source_rule:
        table.add_row("source sends", Text(found.source_rule))
    out.print(table)


def _run_failed(error: BuildctlError) -> bool:
    """Whether `error` is the run's own failure (a failed step, a verification that does not hold), which
    the build reports with its payload; any other error ends the command as it is."""
    from buildctl.pipeline.stages.failure import BuildFailed
    from buildctl.verify.report import VerificationFailed

    return isinstance(error, (BuildFailed, VerificationFailed))


def build_several(recipes: list[str], labels: list[str], sets, *, settings: Settings, no_preflight: bool,
                  as_json: bool, one_build_options: bool) -> None:
    """`invoke build` with several --recipe, a --label or several --engine (scaleout.multibuild);
    `one_build_options`: --until, --target or --check-reproducible was given (refused here)."""
    from buildctl.cli.child_command import CHILD
    from buildctl.scaleout.multibuild import outcomes_json, print_outcomes, run, select

    if one_build_options:
        raise InputError("--until, --target and --check-reproducible take one recipe on one engine; "
                         "fix: build that recipe on its own")
    chosen = select(recipes, labels, settings.recipes_dir)
    if not chosen:
        raise InputError("--recipe is required; fix: give a name from `invoke recipes`, or --label L")
    specs, names = [], set()
    for arg in chosen:  # every recipe checked before anything starts
        spec, _ = load_spec(arg, sets, base_image=settings.base_image, site=settings.site(),
                                preflight=not no_preflight)
        if spec.name in names:
            raise InputError(f"--recipe {arg}: {spec.name} is selected twice; fix: name each recipe once")
        names.add(spec.name)
        specs.append((arg, spec))
    outcomes = run(specs, list(sets or []), settings, child=CHILD, console=console, as_json=as_json,
                   no_preflight=no_preflight)
    if as_json:
        print_json(outcomes_json(outcomes))
    else:
        print_outcomes(outcomes, out)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise BuildctlError(f"{len(failed)} of {len(outcomes)} builds failed: "
                            + ", ".join(f"{o.recipe} on {o.engine}" for o in failed))
