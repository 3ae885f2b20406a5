"""`invoke bisect`: the options checked (one line and exit 2 before any build), the axis made, the search
run over ordinary builds (bisect/steps.py), the report printed (plain, --json, --markdown FILE)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from buildctl.cli.common import command, console, load_spec, out, print_json, site_options
from buildctl.errors import BuildctlError, InputError
from buildctl.settings import Settings
from buildctl.ui import strip_controls

UNTIL_STEPS = ("configure", "compile", "wheel", "extensions")


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


def _axis(spec, kind: str, field: str | None, request: BisectRequest, values, root: Path):
    good, bad, extension, first_good = request.good, request.bad, request.extension, request.first_good
    from buildctl.bisect import axes
    from buildctl.bisect.gitrepo import History

    def history_of(source) -> History:
        console.print(f"reading the history of {strip_controls(_masked(source.git))}", markup=False, highlight=False)
        return History(source.git, root / ".bisect" / "git", spec.site).fetch(
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


def _secrets_masker(spec, sets: list[str], axis):
    """What the bisect writes (its log) and shows (each step, its errors, the report) is masked with every
    credential it knows of: the recipe's, the environment's and those of every --set and --values item (a
    step's build gets them whole, on its stdin)."""
    from buildctl import secrets, settings

    items = [*sets, *(item for change in axis.changes for item in change.sets)]
    return secrets.Masker(secrets.secret_values_from_env_and_site(spec.site, settings.environ())
                          | secrets.split_credentials(spec)[1].values() | secrets.secret_values_from_sets(items))


@command
def bisect(request: BisectRequest, *, settings: Settings, as_json: bool, markdown: str | None) -> None:
    from buildctl import engine
    from buildctl.bisect import axes, report
    from buildctl.bisect.child import Criterion
    from buildctl.bisect.log import BisectLog
    from buildctl.bisect.steps import Bisector, StepBuilds
    from buildctl.cli.child_command import CHILD
    from buildctl.recipe import loader
    from buildctl.secrets import filtered, mask_data, mask_set

    recipe, sets, axis, values, extension = request.recipe, request.sets, request.axis, request.values, request.extension
    until, test, test_timeout, first_good = request.until, request.test, request.test_timeout, request.first_good
    no_preflight = request.no_preflight
    if until and until not in UNTIL_STEPS:
        raise InputError(f"--until {until}: not a step a bisect stops after; fix: --until {'|'.join(UNTIL_STEPS)}")
    if test is not None and not test.strip():
        raise InputError("--test is empty; fix: a shell command run against the wheel, e.g. --test 'python -c "
                         "\"import torch\"'")
    if test and until:
        raise InputError("--test runs against the built wheel, --until stops before it exists; fix: one of them")
    if not test_timeout > 0:
        raise InputError(f"--test-timeout {test_timeout:g}: not a positive number of seconds; fix: e.g. 1800")
    kind, field = axes.parse_axis(axis)
    if values and kind in ("commits", "patches"):
        raise InputError(f"--values lists versions or a field's values; --axis {kind} takes its changes from the "
                         f"{'history' if kind == 'commits' else 'recipe'}; fix: drop --values")
    if extension and kind not in ("commits", "versions"):
        raise InputError(f"--extension chooses the source of --axis commits or versions, not of {kind}; fix: drop it")
    site = site_options(settings)
    base_sets = list(sets or [])
    spec, _ = load_spec(recipe, base_sets, base_image=settings.base_image, site=site, preflight=not no_preflight)
    root = Path(settings.artifacts)
    chosen_axis = _axis(spec, kind, field, request, axes.split_values(list(values)), root)
    masker = _secrets_masker(spec, base_sets, chosen_axis)
    specs: dict[int, object] = {}

    def spec_for(position: int):
        if position not in specs:
            specs[position], _ = load_spec(recipe, [*base_sets, *chosen_axis.changes[position].sets],
                                           base_image=settings.base_image, site=site, preflight=False)
        return specs[position]

    if kind != "commits":  # a value the recipe refuses is bad input, before any build (commits are refs: valid)
        for position in range(len(chosen_axis.changes)):
            spec_for(position)
    criterion = Criterion(until=until, verify=not settings.no_verify, test=test, test_timeout=test_timeout)
    # The log's request, and its digest, hold each --set masked: a rotated token resumes the same log.
    request = {"recipe": str(loader.recipe_path(recipe).resolve()), "sets": [mask_set(s, masker) for s in base_sets],
               "axis": kind, "target": chosen_axis.target,
               "changes": [[mask_set(s, masker) for s in c.sets] for c in chosen_axis.changes],
               "first_good": first_good, "criterion": criterion.as_dict(), "test": test, "no_preflight": no_preflight}
    log = BisectLog(root, request, masker=masker)

    def say(line: str) -> None:
        console.print(strip_controls(masker(line)), markup=False, highlight=False, soft_wrap=True)

    say(f"bisect {spec.name}: {chosen_axis.describe()}, {'first good' if first_good else 'first bad'} by "
        f"{criterion.describe()}; the two ends first")
    with log.held(), engine.terminate_as_interrupt():
        for note in log.notes:
            say(note)
        builds = StepBuilds(recipe, base_sets, spec_for, CHILD, no_preflight=no_preflight)
        bisector = Bisector(builds=builds, axis=chosen_axis, criterion=criterion, first_good=first_good,
                            chosen=settings, log=log, say=say)
        try:
            outcome = bisector.run()
        except KeyboardInterrupt:
            done = len(log.steps)
            say(f"interrupted: {done} step{'' if done == 1 else 's'} kept in the log {log.path}; the same command "
                "resumes")
            raise
        except BuildctlError as e:  # an end that does not hold, a step without a result: its label, its error
            if type(e) in (BuildctlError, InputError):
                raise type(e)(masker(str(e))) from None
            raise
    data = report.to_dict(outcome, recipe=recipe, sets=base_sets, axis=chosen_axis, criterion=criterion,
                          first_good=first_good, log_path=str(log.path))
    data = mask_data(data, masker)
    if markdown:
        Path(markdown).write_text(filtered(report.markdown(data), masker))
    if as_json:
        print_json(data)
    else:
        out.print(report.renderable(data))
