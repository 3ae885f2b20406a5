"""What goes wrong in the engine, said in one line with the fix: a failed step, a taken container name,
an API error, a lost connection, an image buildctl will not pull."""

from __future__ import annotations

import re
from collections.abc import Callable

from docker import errors as derr

from ..errors import BuildctlError, EngineError

NO_SPACE = re.compile(r"no space left on device", re.IGNORECASE)
CLEAN_FIX = "fix: free space with `invoke clean` (or `docker system prune` / `docker builder prune`)"


class ContainerNameInUse(EngineError):
    """run_container was given a fixed name that another container holds."""


class StepFailed(BuildctlError):
    """A build step (image build or a command in a container) ended with a non-zero exit code.

    `returncode` is the step's own exit code (the `exit_code` argument); the class attribute
    `exit_code` stays the command's exit code (1), as for every BuildctlError.
    """

    def __init__(self, step: str, exit_code: int, log: str, oom_killed: bool = False, detail: str = "",
                 timed_out: bool = False):
        self.step, self.returncode, self.log, self.oom_killed = step, exit_code, log, oom_killed
        self.timed_out = timed_out
        if not detail:
            detail = next((ln.strip() for ln in reversed(log.splitlines()) if ln.strip()), "")
        why = f"exit code {exit_code}" + (", killed: out of memory" if oom_killed else "") + (
            ", stopped: timed out" if timed_out else "")
        super().__init__(f"step {step} failed ({why}): {one_line(detail, 300)}")


def one_line(text: str, limit: int = 400) -> str:
    """`text` with its whitespace runs as single spaces, cut to `limit` characters (… marks a cut)."""
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def api_error(e: derr.APIError, doing: str, mask: Callable[[str], str] = lambda s: s) -> EngineError:
    """The EngineError for an engine API error met while `doing` something (a full disk, no GPU runtime)."""
    why = mask(one_line(e.explanation or str(e), 300))
    if NO_SPACE.search(why):
        return EngineError(f"the Docker engine ran out of disk space while {doing}: {why}; {CLEAN_FIX}")
    if "could not select device driver" in why and "gpu" in why:
        return EngineError(
            f"the Docker engine cannot give containers GPUs while {doing}; fix: install the NVIDIA "
            "Container Toolkit (nvidia-ctk runtime configure --runtime=docker) and restart dockerd"
        )
    return EngineError(f"docker failed while {doing}: {why}")


def connection_lost(e: BaseException, doing: str) -> EngineError:
    """The EngineError for a connection to the engine that broke while `doing` something."""
    return EngineError(
        f"lost the connection to the Docker engine while {doing}: {one_line(str(e), 200)}; fix: check "
        "that dockerd is still running (`docker info`) and retry"
    )


def pull_hint(ref: str) -> str:
    """The message for image `ref` missing from the engine: buildctl never pulls."""
    return (
        f"image {ref} is not in the engine and buildctl never pulls; fix: make it with "
        "`invoke base-image` (debootstrap), `docker load` it, or `docker pull` it yourself"
    )
