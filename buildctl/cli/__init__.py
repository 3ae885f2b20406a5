"""The task bodies behind tasks.py, one function per `invoke` command: commands.py (most of them),
build.py (`invoke build`, of one recipe or several), verify.py (`invoke verify`), debug.py (`invoke debug`); common.py is what they
share (errors to exit codes, consoles, recipe loading, JSON output)."""

from buildctl.cli.build import build, build_several
from buildctl.cli.commands import (
    base_image,
    clean,
    diff,
    doctor,
    matrix,
    print_recipes,
    publish,
    recipe_rows,
    recipes,
    render,
    repro,
    show,
)
from buildctl.cli.common import command
from buildctl.cli.debug import debug
from buildctl.cli.verify import verify

__all__ = ["base_image", "build", "build_several", "clean", "command", "debug", "diff", "doctor", "matrix", "print_recipes",
           "publish", "recipe_rows", "recipes", "render", "repro", "show", "verify"]
