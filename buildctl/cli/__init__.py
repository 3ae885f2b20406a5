"""The task bodies behind tasks.py, one function per `invoke` command: commands.py (most of them),
build.py (`invoke build`, of one recipe or several), verify.py (`invoke verify`), debug.py (`invoke debug`); common.py is what they
share (recipe loading, JSON output), base.py what every command needs first (consoles, errors to exit codes),
noop.py the no-op build's short path.

Each name is imported from its module when first used: a no-op build loads none of the others. build, verify
and debug are modules here (a function of the same name would be shadowed once its module is imported):
`from buildctl.cli.build import build`."""

import importlib

_HOME = {
    "build_several": "build",
    **{name: "commands" for name in ("base_image", "clean", "diff", "doctor", "matrix", "print_recipes", "publish",
                                     "recipe_rows", "recipes", "render", "repro", "show")},
    "command": "base",
}

__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value
