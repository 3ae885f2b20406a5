"""`invoke bisect`: the options checked (one line and exit 2 before any build), the axis made, the search
run over ordinary builds (bisect/bisector.py), the report printed (plain, --json, --markdown FILE)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from buildctl.cli.common import command, console, load_spec, out, print_json, recipes_dir, site_options
from buildctl.errors import BuildctlError, InputError
from buildctl.pipeline import stages
from buildctl.settings import Settings
from buildctl.terminal_text import strip_controls

# The build's --until steps but the image: it is the toolchain alone, built without the framework's source,
# so a step stopped there would not build the change the bisect steps over.
BISECT_UNTIL_STEPS = tuple(step for step in stages.UNTIL_STEPS if step != "image")


@dataclass(frozen=True)
class BisectRequest:
    """What `invoke bisect` is asked (its options, as given): the recipe and its overrides, the axis and
    its ends, what a step must do (--until, --test) and how the search reads a result."""

    recipe: str
    sets: tuple[str, ...] = ()
    axis: str = "commits"
    good: str | None = None
    bad: str | None = None
    values: tuple[str, ...] = ()
    extension: str | None = None
    until: str | None = None
    test: str | None = None
    test_timeout: float = 1800
    first_good: bool = False
    no_preflight: bool = False


def _axis(spec, kind: str, field: str | None, request: BisectRequest, values, chosen: Settings):
    good, bad, extension, first_good = request.good, request.bad, request.extension, request.first_good
    from buildctl.bisect import axes
    from buildctl.bisect.gitrepo import History

    def history_of(source) -> History:
        console.print(f"reading the history of {strip_controls(_masked(source.git))}", markup=False, highlight=False)
        return History(source.git, Path(chosen.artifacts) / ".bisect" / "git", spec.site,
                       environ=chosen.environ()).fetch(
            on_note=lambda note: console.print(f"[yellow]warning:[/] {escape(strip_controls(note))}", soft_wrap=True))

    if kind == "commits":
        _, source = axes.source_target(spec, extension)
        history = history_of(source) if getattr(source, "git", None) else None
        return axes.commits(spec, history, good, bad, first_good=first_good, extension=extension)
    if kind == "versions":
        _, source = axes.source_target(spec, extension)
        history = history_of(source) if getattr(source, "git", None) else None
        return axes.versions(spec, values, good, bad, first_good=first_good, extension=extension, history=history,
                             sdist_sha256=lambda name, version: axes.sdist_sha256_from_index(
                                 spec.site.pip_index_url, name, version))
    if kind == "patches":
        return axes.patches(spec, good, bad, first_good=first_good)
    return axes.field_values(field, values, good, bad, first_good=first_good)


def _masked(url: str) -> str:
    from buildctl.urls import mask

    return mask(url)


def _secrets_masker(spec, sets: list[str], axis, environ: dict[str, str]):
    """What the bisect writes (its log) and shows (each step, its errors, the report) is masked with every
    credential it knows of: the recipe's, the environment's and those of every --set and --values item (a
    step's build gets them whole, on its stdin)."""
    from buildctl import secrets

    items = [*sets, *(item for change in axis.changes for item in change.sets)]
    return secrets.Masker(secrets.secret_values_from_env_and_site(spec.site, environ)
                          | secrets.split_credentials(spec)[1].values() | secrets.secret_values_from_sets(items))


def _checked_axis(request: BisectRequest) -> tuple[str, str | None]:
    """The axis' kind and field, once the options are checked: a contradiction is refused in one line (exit
    2), before any build."""
    from buildctl.bisect import axes

    if request.until and request.until not in BISECT_UNTIL_STEPS:
        raise InputError(f"--until {request.until}: not a step a bisect stops after; fix: --until "
                         f"{'|'.join(BISECT_UNTIL_STEPS)}")
    if request.test is not None and not request.test.strip():
        raise InputError("--test is empty; fix: a shell command run against the wheel, e.g. --test 'python -c "
                         "\"import torch\"'")
    if request.test and request.until:
        raise InputError("--test runs against the built wheel, --until stops before it exists; fix: one of them")
    if not request.test_timeout > 0:
        raise InputError(f"--test-timeout {request.test_timeout:g}: not a positive number of seconds; fix: e.g. "
                         "1800")
    kind, field = axes.parse_axis(request.axis)
    if request.values and kind in ("commits", "patches"):
        raise InputError(f"--values lists versions or a field's values; --axis {kind} takes its changes from the "
                         f"{'history' if kind == 'commits' else 'recipe'}; fix: drop --values")
    if request.extension and kind not in ("commits", "versions"):
        raise InputError(f"--extension chooses the source of --axis commits or versions, not of {kind}; fix: "
                         "drop it")
    return kind, field


def _log_request(request: BisectRequest, kind: str, base_sets: list[str], chosen_axis, criterion,
                 masker) -> dict:
    """The bisect as its log records it (and digests it, to know a log to resume): each --set masked, so a
    rotated token resumes the same log."""
    from buildctl.recipe import loader
    from buildctl.secrets import mask_set

    return {"recipe": str(loader.recipe_path(request.recipe, recipes_dir()).resolve()),
            "sets": [mask_set(s, masker) for s in base_sets], "axis": kind, "target": chosen_axis.target,
            "changes": [[mask_set(s, masker) for s in c.sets] for c in chosen_axis.changes],
            "first_good": request.first_good, "criterion": criterion.as_dict(), "test": request.test,
            "no_preflight": request.no_preflight}


def _run_search(bisector, log, masker, say):
    """The search's outcome; an interrupt says where its steps are kept, a bisect's own error (an end that
    does not hold, a step without a result: its label, its error) is raised again masked."""
    try:
        return bisector.run()
    except KeyboardInterrupt:
        done = len(log.steps)
        say(f"interrupted: {done} step{'' if done == 1 else 's'} kept in the log {log.path}; the same command "
            "resumes")
        raise
    except BuildctlError as e:
        if type(e) in (BuildctlError, InputError):
            raise type(e)(masker(str(e))) from None
        raise


def _print_report(data: dict, masker, *, as_json: bool, markdown: str | None) -> None:
    """The report (its data masked already): to --markdown FILE if asked, then as JSON or as text."""
    from buildctl.bisect import report
    from buildctl.secrets import filtered

    if markdown:
        Path(markdown).write_text(filtered(report.markdown(data), masker))
    if as_json:
        print_json(data)
    else:
        out.print(report.renderable(data))


@command
def bisect(request: BisectRequest, *, settings: Settings, as_json: bool, markdown: str | None) -> None:
    from buildctl import engine
    from buildctl.bisect import axes, report
    from buildctl.bisect.bisector import Bisector, StepBuilds
    from buildctl.bisect.child import Criterion
    from buildctl.bisect.log import BisectLog
    from buildctl.cli.child_command import CHILD
    from buildctl.secrets import mask_data

    kind, field = _checked_axis(request)
    site = site_options(settings)
    base_sets = list(request.sets or [])
    spec, _ = load_spec(request.recipe, base_sets, base_image=settings.base_image, site=site,
                        preflight=not request.no_preflight)
    root = Path(settings.artifacts)
    chosen_axis = _axis(spec, kind, field, request, axes.split_values(list(request.values)), settings)
    masker = _secrets_masker(spec, base_sets, chosen_axis, settings.environ())
    specs: dict[int, object] = {}

    def spec_for(position: int):
        if position not in specs:
            sets = [*base_sets, *chosen_axis.changes[position].sets]
            specs[position], _ = load_spec(request.recipe, sets, base_image=settings.base_image, site=site,
                                           preflight=False)
        return specs[position]

    if kind != "commits":  # a value the recipe refuses is bad input, before any build (commits are refs: valid)
        for position in range(len(chosen_axis.changes)):
            spec_for(position)
    criterion = Criterion(until=request.until, verify=not settings.no_verify, test=request.test,
                          test_timeout=request.test_timeout)
    log = BisectLog(root, _log_request(request, kind, base_sets, chosen_axis, criterion, masker),
                    masker=masker)

    def say(line: str) -> None:
        console.print(strip_controls(masker(line)), markup=False, highlight=False, soft_wrap=True)

    side = "first good" if request.first_good else "first bad"
    say(f"bisect {spec.name}: {chosen_axis.describe()}, {side} by {criterion.describe()}; the two ends first")
    with log.held(), engine.terminate_as_interrupt():
        for note in log.notes:
            say(note)
        builds = StepBuilds(request.recipe, base_sets, spec_for, CHILD,
                            no_preflight=request.no_preflight)
        bisector = Bisector(builds=builds, axis=chosen_axis, criterion=criterion,
                            first_good=request.first_good, chosen=settings, log=log, say=say)
        outcome = _run_search(bisector, log, masker, say)
    data = report.to_dict(outcome, recipe=request.recipe, sets=base_sets, axis=chosen_axis,
                          criterion=criterion, first_good=request.first_good, log_path=str(log.path))
    _print_report(mask_data(data, masker), masker, as_json=as_json, markdown=markdown)
