"""Errors that end a command with a one-line message and a CI-usable exit code.

Exit codes: 0 ok, 1 a run failed (engine, build, verification), 2 bad input (recipe, CLI).
"""


class BuildctlError(Exception):
    """A failure reported to the user as one line, never as a traceback."""

    exit_code = 1


class InputError(BuildctlError):
    """Bad input: a recipe, an override or a command-line value. Nothing has been written."""

    exit_code = 2


class RecipeError(InputError):
    """A recipe problem, located: file (and line when known), field, and the fix."""

    def __init__(self, file: str, field: str, problem: str, fix: str, line: int | None = None):
        self.file, self.field, self.problem, self.fix, self.line = file, field, problem, fix, line
        where = f"{file}:{line}" if line else file
        loc = f" {field}:" if field else ""
        super().__init__(f"{where}:{loc} {problem}; fix: {fix}")


class EngineError(BuildctlError):
    """The container engine is missing, unreachable or failed."""


class BuildFailed(BuildctlError):
    """The build ran and failed; a diagnosis and a repro bundle were written."""


class VerificationFailed(BuildctlError):
    """An expectation of the recipe does not hold for the built wheel."""
