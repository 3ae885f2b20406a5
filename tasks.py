"""buildctl's command line: `invoke --list`. Each task parses its arguments and calls into buildctl.

The options that are settings (site, build, namespace: buildctl/settings.py) are not written here:
`settings_task` adds them to a task's signature and --help from the Settings fields, and hands the
task one Settings built from them and the BUILDCTL_* variables.

Each task imports buildctl.cli when it runs: loading this file (`invoke --list`, --help, and every
command before it starts) takes only the settings (tests/unit/test_import_budget.py).
"""

import inspect
import os
import sys

from invoke import task

# Invoke turns off writing bytecode for what its tasks import (its --write-pyc), so every command compiled
# buildctl's modules again: about a quarter of a no-op build (issue 23). The interpreter's own setting is
# restored: -B and PYTHONDONTWRITEBYTECODE still turn it off.
sys.dont_write_bytecode = bool(sys.flags.dont_write_bytecode)

from buildctl import settings  # noqa: E402 - after the bytecode setting, which applies to it
from buildctl.settings import BUILD, CLEAN, RECIPE, SITE  # noqa: E402

RECIPE_HELP = {
    "recipe": "Recipe name from recipes/ (see `invoke recipes`) or a path to a YAML file",
    "set": "Override a field, e.g. --set build.type=Debug; repeatable, validated like the file",
    "json": "Print machine-readable JSON on stdout",
}


def settings_task(*groups_or_names, help=None, iterable=(), **task_kwargs):
    """@task(auto_shortflags=False) that also takes the Settings fields of these groups (or names) as
    options, named, typed and explained by settings.py, and calls the body with `settings=` built from
    them over the environment (a flag wins over its BUILDCTL_* variable)."""
    fields = settings.fields(*groups_or_names)

    def decorate(body):
        params = [p for p in inspect.signature(body).parameters.values() if p.name != "settings"]
        flags, lists = {}, []
        for name, f in fields.items():
            flag = settings.flag_name(name)
            if isinstance(f.default, tuple):
                lists.append(flag)
                default = None
            else:  # "" or False: not given, so the variable or the field's default applies; a value
                # given, even the field's default (--jobs auto), wins over the variable
                default = f.default if isinstance(f.default, bool) else ""
            flags[flag] = settings.help_text(name)
            params.append(inspect.Parameter(flag, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default))

        def run(c, *args, **kwargs):
            from buildctl.cli.base import command

            given = {flag: kwargs.pop(flag) for flag in flags if flag in kwargs}
            chosen = command(settings.Settings.from_cli)(body.__name__, environ=os.environ, **given)
            return body(c, *args, settings=chosen, **kwargs)

        run.__name__, run.__doc__, run.__module__ = body.__name__, body.__doc__, body.__module__
        run.__signature__ = inspect.Signature(params)
        return task(run, auto_shortflags=False, help={**(help or {}), **flags},
                    iterable=[*iterable, *lists], **task_kwargs)

    return decorate


def _help_if_asked(task_name, value):
    """`invoke repro --help`: Invoke hands a required positional the flag; show the task's help instead."""
    if value in ("-h", "--help"):
        os.execvp(sys.argv[0], [sys.argv[0], "--help", task_name])


@task(auto_shortflags=False, help={"json": RECIPE_HELP["json"]})
def recipes(c, json=False):
    """List the shipped recipes with their accelerator and labels."""
    from buildctl import cli

    cli.recipes(as_json=json)


@settings_task(RECIPE, iterable=["set"], help=RECIPE_HELP)
def show(c, recipe="", set=None, json=False, settings=None):
    """Show a recipe resolved: fragments merged, overrides applied, defaults filled in."""
    from buildctl import cli

    cli.show(recipe, set, as_json=json, settings=settings)


@settings_task(SITE, RECIPE, iterable=["set"], help={
    **RECIPE_HELP, "out": "Output folder (default build/<recipe>/)",
    "no_preflight": "Skip the compatibility preflight (to reproduce what it would refuse)"})
def render(c, recipe="", set=None, out="", json=False, no_preflight=False, settings=None):
    """Render a recipe into a self-contained folder: Dockerfile, build script, verify probe, resolved recipe."""
    from buildctl import cli

    cli.render(recipe, set, out_dir=out or None, as_json=json, no_preflight=no_preflight, settings=settings)


@task(auto_shortflags=False, iterable=["label"], help={"label": "Keep recipes with this label; repeatable (default: all)"})
def matrix(c, label=None):
    """Print a GitHub Actions strategy.matrix (JSON) of recipes, filtered by label."""
    from buildctl import cli

    cli.matrix(label)


@settings_task(SITE, RECIPE, BUILD, iterable=["recipe", "label", "set", "target"], help={
      **RECIPE_HELP,
      "recipe": RECIPE_HELP["recipe"] + "; repeatable: several recipes are built side by side over the engines",
      "label": "Build every recipe with this label (see `invoke recipes`); repeatable",
      "no_preflight": "Skip the compatibility preflight (to reproduce what it would refuse)",
      "until": "Stop after this step and show what it produced: image (the builder image, no source needed), "
               "configure (the CMake summary), compile or wheel; "
               "publishes nothing, a later full build resumes",
      "target": "With --until compile: build only this ninja output (a sample, e.g. one .cu.o); repeatable",
      "check_reproducible": "Then build again from a clean build dir at another path without compile cache and "
                            "compare the wheels byte for byte; exit 1 naming the members that differ",
      "dry_run": "Build nothing: say the key this request would use, whether its artifact is there and can be "
                 "vouched for, and what changed since the recipe's latest artifact"})
def build(c, recipe=None, label=None, set=None, no_preflight=False, json=False, until="", target=None,
          check_reproducible=False, dry_run=False, settings=None):
    """Build a recipe's wheel from source in a container, publish it to artifacts/, verify it."""
    from buildctl import cli

    recipes = list(recipe or [])
    if dry_run:
        from buildctl.cli.build import dry_run as look

        look(recipes, set, settings=settings, no_preflight=no_preflight, as_json=json,
             other_options=bool(label or until or target or check_reproducible))
        return
    if len(recipes) > 1 or label or len(settings.engines) > 1:
        cli.command(cli.build_several)(
            recipes,
            label or [],
            set,
            settings=settings,
            no_preflight=no_preflight,
            as_json=json,
            one_build_options=bool(until or target or check_reproducible),
        )
        return
    if not (until or target or check_reproducible):
        from buildctl.cli import (
            noop,  # an unchanged recipe's artifact, from the no-op memo: nothing else loaded
        )

        if cli.command(noop.build)(recipes[0] if recipes else "", set, settings=settings,
                                   no_preflight=no_preflight, as_json=json):
            return
    from buildctl.cli.build import build as build_one

    build_one(recipes[0] if recipes else "", set, settings=settings, no_preflight=no_preflight, as_json=json,
              until=until or None, targets=target, check_reproducible=check_reproducible)


@settings_task(SITE, RECIPE, BUILD, iterable=["set", "values"], help={
    **RECIPE_HELP,
    "good": "The end that passes: a commit, tag or branch (commits), a value of --values, a patch (none, 1, 2, ... "
            "or its file name); lists default to their first value",
    "bad": "The end that fails, as --good; lists default to their last value",
    "axis": "What changes from step to step: commits (of the git source), versions (git refs, sdist releases, "
            "URL#sha256=HEX tarballs), patches (the recipe's framework.patches, one more each step) or set:FIELD "
            "(a recipe field's --values)",
    "values": "The versions or values in order, comma-separated; repeatable",
    "extension": "Bisect this extension's source (commits, versions) instead of the framework's",
    "until": "Bad means the build fails up to this step: configure, compile, wheel or extensions (no verification)",
    "test": "Bad means this shell command, run against the built wheels in the runtime image, exits 1-127 "
            "(0 good, 125 skip), as git bisect run reads it",
    "test_timeout": "Seconds the --test may run before it is stopped (then the step is skipped)",
    "first_good": "Find the first change that passes instead: --bad is the older end",
    "json": "Print the report as JSON on stdout",
    "markdown": "Also write the report as Markdown to this file, e.g. \"$GITHUB_STEP_SUMMARY\"",
    "no_preflight": "Skip the compatibility preflight in each step's build"})
def bisect(c, recipe="", set=None, good="", bad="", axis="commits", values=None, extension="", until="", test="",
           test_timeout=1800.0, first_good=False, json=False, markdown="", no_preflight=False, settings=None):
    """Find the first change (commit, version, patch, value) that breaks a build, by building.

    Every step is an ordinary build (keyed, cached, resumable); steps that fail for another reason are skipped;
    the report names the change, the diagnosis and the repro bundle (docs/bisect.md)."""
    from buildctl.cli.bisect import BisectRequest
    from buildctl.cli.bisect import bisect as bisect_command

    request = BisectRequest(recipe=recipe, sets=tuple(set or ()), axis=axis, good=good or None, bad=bad or None,
                            values=tuple(values or ()), extension=extension or None, until=until or None,
                            test=test or None, test_timeout=test_timeout, first_good=first_good,
                            no_preflight=no_preflight)
    bisect_command(request, settings=settings, as_json=json, markdown=markdown or None)


@settings_task("engines", help={"recipe": "Check only this recipe (default: all shipped recipes)",
                                "json": RECIPE_HELP["json"]})
def doctor(c, recipe="", json=False, settings=None):
    """Check this host: engine, base images, GPUs and driver, and which recipes it can build and verify.

    With --engine: on each engine."""
    from buildctl import cli

    cli.doctor(recipe or None, as_json=json, engines=settings.engines)


@task(name="base-image", auto_shortflags=False, help={
    "distro": "bookworm, trixie, jammy or noble",
    "mirror": "Archive URL (default: the host's Debian mirror, or archive.ubuntu.com)",
    "tag": "Image reference (default buildctl/base:<distro>)",
    "force": "Make it again even when the tag exists",
    "no_check_gpg": "Skip the archive signature check (Ubuntu suites on a Debian host without ubuntu-keyring)"})
def base_image(c, distro="bookworm", mirror="", tag="", force=False, no_check_gpg=False):
    """Make a minimal base image with debootstrap + docker import: no registry needed (air-gapped hosts)."""
    from buildctl import cli

    cli.base_image(distro, mirror=mirror, tag=tag, force=force, no_check_gpg=no_check_gpg)


@settings_task(CLEAN, help={
    "older_than_days": "Also remove artifacts, bundles, images and volumes not used for this many days",
    "keep_gb": "Then remove the least recently used until at most this many GB remain",
    "images": "Include buildctl's images (default: yes)",
    "caches": "Include build-dir and compile-cache volumes (default: yes)",
    "containers": "Include buildctl's containers left behind (default: yes)",
    "dry_run": "Only say what would be freed",
    "json": RECIPE_HELP["json"]})
def clean(c, older_than_days=-1.0, keep_gb=-1.0, images=True, caches=True, containers=True, dry_run=False,
          json=False, settings=None):
    """Remove orphans, then what was not used for N days or beyond a size, and say what was freed.

    Orphans: containers of killed builds, stale staging folders, untagged images. Never follows a symlink out
    of artifacts/."""
    from buildctl import cli

    cli.clean(older_than_days=older_than_days if older_than_days != -1.0 else None,
              keep_gb=keep_gb if keep_gb != -1.0 else None, images=images, caches=caches, containers=containers,
              namespace=settings.namespace, dry_run=dry_run, as_json=json)


@task(auto_shortflags=False, help={"bundle": "A failure bundle folder (artifacts/failures/...) or its .tar.gz",
                                   "shell": "Open a shell at the failing step instead (same image, mounts, env)",
                                   "json": RECIPE_HELP["json"]})
def repro(c, bundle, shell=False, json=False):
    """Replay a failed build from its repro bundle: same image, same step, same environment."""
    _help_if_asked("repro", bundle)
    from buildctl import cli

    cli.repro(bundle, shell=shell, as_json=json)


@settings_task("network", "base_image", iterable=["set", "expect", "beside"], help={
    "recipe": "Verify this recipe's artifact: the one of the key this request has (as `invoke build --dry-run` "
              "says it, with the same --set), never the newest; and check its pins. With --image: expect its pins",
    "key": "With --recipe: the artifact of this key instead (a folder name of artifacts/<recipe>/)",
    "beside": "Install this NAME==VERSION (a wheel from the index, no dependencies) beside the artifact's torch "
              "and its extensions, and check it fits that torch, e.g. torchvision==0.21.0; repeatable",
    "wheel": "Verify this wheel file (with --recipe: against that recipe's pins)",
    "image": "Verify the framework already installed in this local image (never pulled), with its own Python",
    "python": "With --image: the image's Python, a command on its PATH or an absolute path (default python3)",
    "expect": "With --image: an expectation key=value, e.g. torch=2.6.0, cuda=none, USE_MPI=on; repeatable",
    "set": RECIPE_HELP["set"],
    "host": "Install into a fresh venv on this machine instead of a fresh container",
    "json": "Print the JSON report on stdout",
    "sizes": "All-reduce message sizes MIN:MAX (x2 steps), e.g. 8:256M",
    "iters": "Timed iterations per message size",
    "module": "Python module of the framework (torch, demofw); default from the recipe or wheel name",
    "compile_matrix": "torch.compile cells: smoke (a set over backend, mode, fullgraph and dynamic) or full "
                      "(their whole cross, about 30 cells: minutes each on a CPU) or none"})
def verify(c, recipe="", wheel="", image="", python="", expect=None, set=None, host=False, json=False,
           sizes="8:256M", iters=20, module="", beside=None, compile_matrix="smoke", key="", settings=None):
    """Verify a built wheel or an image's framework, and a recipe's extensions beside it.

    The wheel: config, pins, arch coverage, GPUs, all-reduce sweep; the extensions: import, smoke check, ABI."""
    from buildctl.cli.verify import VerifyRequest
    from buildctl.cli.verify import verify as verify_command
    from buildctl.verify.options import VerifyOptions

    request = VerifyRequest(recipe=recipe or None, key=key or None, wheel=wheel or None, sets=tuple(set or ()),
                            image=image or None, python=python or None, expect=tuple(expect or ()))
    options = VerifyOptions(sizes=sizes, iters=iters, json_out=json, module=module or None, host=host,
                            beside=tuple(beside or ()), compile_matrix=compile_matrix, cache_dir=settings.cache_dir,
                            step_summary=settings.step_summary, artifacts_root=settings.artifacts,
                            environ=settings.environ())
    verify_command(request, options=options, settings=settings)


@settings_task("network", "base_image", iterable=["set"], help={
    "recipe": "The recipe whose artifact to run against: the one of this request's key (with the same --set), "
              "never the newest; or --key, or --artifact",
    "key": "The artifact of this key instead (a folder name of artifacts/<recipe>/)",
    "set": RECIPE_HELP["set"],
    "artifact": "This artifact folder (artifacts/<recipe>/<key>) instead of the request's",
    "code": "Python code to run, e.g. 'import torch; torch.ops.aten._local_scalar_dense(torch.randn(0))'",
    "script": "A Python file to run instead of --code",
    "timeout": "Seconds the code may run under gdb before it is stopped (then every thread's backtrace)",
    "json": "Print {signal, frames: [{function, file, line, object}], python_stack, exit_code, ...} on stdout",
    "shell": "Open that container interactively instead: gdb, the wheel installed, the build's sources "
             "mounted (needs the docker command line)"})
def debug(c, recipe="", set=None, artifact="", code=None, script="", timeout=600.0, json=False, shell=False,
          key="", settings=None):
    """Run Python against a built wheel under gdb and print the crash, if any.

    In a fresh container of the wheel's runtime image; the crash: the signal, the faulting thread's C++ frames
    with file:line (a Debug build has them) and the Python stack. Exit 0 when it crashed and the backtrace was
    taken, 1 when it did not crash."""
    from buildctl.cli.debug import DebugRequest
    from buildctl.cli.debug import debug as debug_command

    request = DebugRequest(recipe=recipe or None, sets=tuple(set or ()), artifact=artifact or None, key=key or None,
                           code=code, script=script or None, timeout=timeout, shell=shell)
    debug_command(request, settings=settings, as_json=json)


@settings_task("base_image", "pip_index_url", iterable=["set"], help={
    **RECIPE_HELP,
    "index_url": "Resolve against this index instead of the recipe's (--pip-index-url) or PyPI's"})
def lock(c, recipe="", set=None, index_url="", json=False, settings=None):
    """Write the recipe's pip lock, which builds install with --require-hashes.

    Every package pip installs into the builder venv, as name==version and the sha256 of each file, resolved by
    uv for the image's Python and platform against the site's index, in recipes/locks/<recipe>.txt."""
    from buildctl.cli.lock import lock as lock_command

    lock_command(recipe, list(set or ()), settings=settings, index_url=index_url or None, as_json=json)


@task(auto_shortflags=False, help={"a": "First build: an artifact folder or a report.json",
                                   "b": "Second build: an artifact folder or a report.json",
                                   "json": RECIPE_HELP["json"], "all": "Show equal rows too"})
def diff(c, a, b, json=False, all=False):
    """Compare two builds: manifest, __config__ build settings, arch lists, latency headlines."""
    from buildctl import cli

    cli.diff(a, b, as_json=json, show_all=all)


@settings_task("base_image", iterable=["artifact", "set"], help={
    "to": "Where: a folder (a static PEP 503 index any web server can serve) or an index server's upload URL, "
          "e.g. http://host:8080/ (pypiserver) or http://host:3141/USER/INDEX/ (devpi); credentials from "
          "BUILDCTL_PUBLISH_USERNAME/PASSWORD or ~/.netrc [BUILDCTL_PUBLISH_TO]",
    "recipe": "Publish this recipe's artifact: the one of the key this request has (as `invoke build --dry-run` "
              "says it, with the same --set), never the newest (default: the latest of every recipe in artifacts/)",
    "set": RECIPE_HELP["set"],
    "key": "With --recipe: the artifact of this key instead (a folder name of artifacts/<recipe>/)",
    "artifact": "Publish this artifact folder (artifacts/<recipe>/<key>); repeatable",
    "json": RECIPE_HELP["json"]})
def publish(c, to="", recipe="", artifact=None, json=False, set=None, key="", settings=None):
    """Put built wheels, with their manifests, on a PEP 503 index that pip installs from."""
    from buildctl import cli

    cli.publish(recipe or None, artifact, to=to or None, as_json=json, settings=settings, sets=tuple(set or ()),
                key=key or None)
