"""The bodies of the invoke tasks. tasks.py parses arguments; everything else happens here.

Every command ends with exit 0 (ok), 1 (a run failed) or 2 (bad input), and reports errors as one
line on stderr, never as a traceback (set BUILDCTL_DEBUG=1 to see one for a bug).
"""

from __future__ import annotations

import os
from pathlib import Path

from invoke.exceptions import Exit
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from buildctl import recipe as recipe_mod
from buildctl import render as render_mod
from buildctl import settings
from buildctl.cli.common import (
    command,
    console,
    env_value,
    load_spec,
    out,
    print_json,
    recipes_dir,
    site_options,
)
from buildctl.errors import BuildctlError, InputError
from buildctl.settings import Settings
from buildctl.terminal_text import print_detail, strip_controls

# tasks.py calls cli.<command>; the tests and tasks.py use the shared helpers through here too.
# --- tasks ------------------------------------------------------------------------------------


def recipe_rows() -> list[dict]:
    rows = []
    for path in recipe_mod.list_recipes(recipes_dir()):
        spec = recipe_mod.load(str(path))
        rows.append({"name": spec.name, "accelerator": spec.accelerator, "labels": list(spec.labels),
                     "description": spec.description, "path": str(path.relative_to(settings.REPO_ROOT))})
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
            print_detail(console, r["name"], r["description"])


@command
def show(recipe: str, sets, *, as_json: bool, settings: Settings) -> None:
    spec, _ = load_spec(recipe, sets, base_image=settings.base_image, preflight=False)
    if as_json:
        return print_json(recipe_mod.masked_dump(spec))
    out.print(recipe_mod.resolved_yaml(spec), end="")
    if spec.framework.source.kind == "path":  # what a local source sends and keys: one declared rule
        from buildctl.store import source_tree

        out.print(f"# framework.source.path sends and keys {source_tree.rule(Path(spec.framework.source.path))}",
                  markup=False, highlight=False)


@command
def render(recipe: str, sets, *, out_dir: str | None, as_json: bool, settings: Settings,
           no_preflight: bool = False) -> None:
    site = site_options(settings)
    spec, _ = load_spec(recipe, sets, base_image=settings.base_image, site=site, preflight=not no_preflight)
    from buildctl.recipe import preflight

    # Rendering is pure and a placeholder is worth reading; the Dockerfile marks it, and `build` refuses it.
    for field, problem, fix in preflight.placeholders(spec):
        console.print(f"[yellow]warning:[/] {escape(field)}: {escape(problem)}; `invoke build` refuses it until "
                      f"pinned; fix: {escape(fix)}", soft_wrap=True)
    rendered = render_mod.render(spec, template_cache=settings.template_cache)
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
    for path in recipe_mod.list_recipes(recipes_dir()):
        spec = recipe_mod.load(str(path))
        if labels and not set(labels) & set(spec.labels):
            continue
        include.append({"recipe": spec.name, "runs-on": RUNNERS[spec.accelerator], "labels": list(spec.labels)})
    if not include:
        raise InputError(f"--label {','.join(labels)}: no recipe has it; fix: see `invoke recipes` for labels")
    print_json({"include": include})


@command
def doctor(recipe: str | None, *, as_json: bool, engines: tuple[str, ...] = ()) -> None:
    """One report for the engine of DOCKER_HOST; with --engine, one per engine (which recipes each can
    build and verify), under {"engines": [...]} in --json."""
    from buildctl import engine
    from buildctl.host import doctor as doctor_mod

    paths = [recipe_mod.recipe_path(recipe, recipes_dir())] if recipe else recipe_mod.list_recipes(recipes_dir())
    specs = [(str(p), recipe_mod.load(str(p))) for p in paths]
    reports = []
    for url in engines or (None,):
        facts, error = None, None
        try:
            facts = engine.facts_at(url, environ=os.environ, base_images=doctor_mod.base_images_needed(specs))
        except BuildctlError as e:
            error = str(e)
        report = doctor_mod.doctor(specs, engine_facts=facts, engine_error=error)
        reports.append({"engine_url": engine.display_name(url), **report} if url else report)
    if as_json:
        print_json({"engines": reports} if engines else reports[0])
    else:
        for report in reports:
            if engines:
                out.print(f"[bold]engine {escape(report['engine_url'])}[/]")
            doctor_mod.print_doctor(report, console=out)
    if not all(r["engine"]["ok"] for r in reports):
        raise Exit(code=1)


@command
def base_image(distro: str, *, mirror: str | None, tag: str | None, force: bool, no_check_gpg: bool) -> None:
    from buildctl import engine
    from buildctl.host import base_images
    from buildctl.store import artifacts

    if distro not in base_images.DISTROS:
        raise InputError(f"--distro {distro}: unknown; fix: one of {', '.join(base_images.DISTROS)}")
    client = engine.connect(environ=os.environ)
    maker = base_images.make_base_image if force else base_images.ensure_base_image
    image_id = maker(client, distro, host=base_images.HostRun(os.environ), mirror=mirror or None, tag=tag or None,
                     no_check_gpg=no_check_gpg,
                     on_line=lambda line: console.print(strip_controls(line), markup=False, highlight=False))
    # invoke clean: made or asked for now, a use (in the artifacts root BUILDCTL_ARTIFACTS names)
    artifacts.record_images(client, [image_id], Settings.from_env(os.environ).artifacts)
    out.print(f"{tag or base_images.default_tag(distro)} {image_id}")


@command
def clean(*, older_than_days: float | None, keep_gb: float | None, images: bool, caches: bool, containers: bool,
          dry_run: bool, as_json: bool, namespace: str | None = None) -> None:
    from buildctl import engine
    from buildctl.host import clean

    if (older_than_days is not None and older_than_days < 0) or (keep_gb is not None and keep_gb < 0):
        raise InputError("--older-than-days and --keep-gb take a number >= 0")
    objects = [kind for kind, on in (("images", images), ("caches", caches), ("containers", containers)) if on]
    report = clean.clean(
        older_than_days=older_than_days,
        keep_bytes=int(keep_gb * 1e9) if keep_gb is not None else None,
        dry_run=dry_run,
        root=Settings.from_env(os.environ).artifacts,
        namespace=namespace,
        objects=objects,
        client=engine.connect(environ=os.environ) if objects else None,
    )
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
    from buildctl.failure import repro as repro_mod

    if not bundle:
        raise InputError("BUNDLE is required; fix: invoke repro artifacts/failures/<recipe>-<time>")
    sink = None if as_json else (lambda line: out.print(strip_controls(line), markup=False, highlight=False))
    # A bundle is untrusted: it is validated on opening, and what it will run is shown before it runs.
    with repro_mod.open_bundle(Path(bundle)) as b:
        client = repro_mod.preflight(b, environ=os.environ, shell=shell)
        for line in repro_mod.summary(b, shell=shell):
            console.print(strip_controls(line), markup=False, highlight=False, soft_wrap=True)
        if shell:
            code = repro_mod.shell(b, client, on_line=lambda line: print(line, flush=True), environ=os.environ)
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


@command
def diff(a: str, b: str, *, as_json: bool, show_all: bool) -> None:
    from buildctl.verify import compare as diff_mod

    if not a or not b:
        raise InputError("give two builds: invoke diff A B (artifact folders or report.json files)")
    result = diff_mod.diff_paths(Path(a), Path(b))
    if as_json:
        return print_json(result)
    diff_mod.print_diff(result, out, show_all=show_all)


@command
def publish(recipe: str | None, artifact_dirs, *, to: str | None, as_json: bool, settings: Settings | None = None,
            sets=(), key: str | None = None) -> None:
    """`--recipe R`: the artifact of the key this request names (R with its --set, or --key K), never R's
    newest (pipeline.published.request_artifact)."""
    from buildctl.store import publish as publish_mod

    to = env_value(to, "BUILDCTL_PUBLISH_TO", "")
    chosen = settings or Settings.from_env(os.environ)
    if (sets or key) and not recipe:
        raise InputError(f"{'--set' if sets else '--key'} names an artifact of a recipe; fix: add --recipe R")
    if recipe and artifact_dirs:
        raise InputError("give --recipe R or --artifact DIR, not both; fix: drop one of them")
    if recipe:
        if not to:  # refused before the engine is asked for the key
            publish_mod.publish(to, environ=chosen.environ())
        from buildctl.pipeline.published import request_artifact

        spec, _ = load_spec(recipe, list(sets or []), base_image=chosen.base_image, site=site_options(chosen),
                            preflight=False)
        artifact_dirs = [str(request_artifact(spec, key=key or None, root=chosen.artifacts,
                                              engine_url=chosen.engines[0] if chosen.engines else None,
                                              environ=chosen.environ()))]
    result = publish_mod.publish(to, artifact_dirs=artifact_dirs or (), root=chosen.artifacts, environ=chosen.environ())
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
