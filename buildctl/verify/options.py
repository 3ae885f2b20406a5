"""What a verification is asked to do beyond the wheel (invoke verify's options; a build verifies with
the defaults). A module of its own: every build carries one in its options, and only a build that
verifies loads the runner. Passed whole (issue 37): the runner resolves the defaults it can only know
with the wheel in hand (module, cache folder, sweep) once, with `dataclasses.replace`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class VerifyOptions:
    sizes: str = "8:256M"  # all-reduce message sizes MIN:MAX
    iters: int = 20
    warmup: int = 5
    json_out: bool = False
    module: str | None = None  # None: from the recipe or the wheel's name
    beside: tuple[str, ...] = ()  # NAME==VERSION installed beside the set and checked against its torch
    compile_matrix: str = "smoke"  # torch.compile cells: the smoke set, the whole cross (full), or none
    host: bool = False  # a fresh venv on this host instead of a fresh container
    sweep: bool | None = None  # the all-reduce sweep; None: the recipe's verify.allreduce (else on)
    network_mode: str | None = None  # the verification containers' network
    timeout: float = 3600  # seconds for one verification container (or host run)
    extra_requirements: tuple[str, ...] = ()
    runtime_requirements: tuple[str, ...] = ()  # with host: the pip packages the recipe's runtime image holds
    cache_dir: Path | None = None  # the download cache (wheelhouse): the CLI gives the settings' (BUILDCTL_CACHE); None: .cache/buildctl
    step_summary: str | None = None  # $GITHUB_STEP_SUMMARY (GitHub Actions), given by the CLI: the report is appended
    # The artifacts root (the CLI gives the settings', BUILDCTL_ARTIFACTS): where `verify --image` writes its report and
    # stamps the image as used; None: artifacts/ of the current folder
    artifacts_root: Path | None = None
    # The command's environment, given by the CLI (Settings.environ()): what a verification on this host (`host`)
    # starts its venv from; required there. Never shown nor compared.
    environ: Mapping[str, str] | None = field(default=None, repr=False, compare=False)


def connected(client: Any, options: VerifyOptions) -> Any:
    """`client` (a docker client), else a new connection to the engine the command's environment names
    (options.environ: its DOCKER_HOST, else the local default)."""
    if client is not None:
        return client
    if options.environ is None:
        raise ValueError("a verification reaches the engine the command's environment names: give "
                         "VerifyOptions.environ, or a connected client")
    from buildctl import engine

    return engine.connect(environ=options.environ)
