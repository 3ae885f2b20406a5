"""What every command needs before it knows what it will run: the consoles, the error-to-exit-code
wrapper and the CA certificates read. Light on purpose: a no-op build (cli/noop.py) starts here without
the recipe schema (tests/unit/test_import_budget.py)."""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from pathlib import Path

from invoke.exceptions import Exit
from rich.console import Console
from rich.markup import escape

from buildctl.errors import BuildctlError, InputError
from buildctl.terminal_text import strip_controls

console = Console(stderr=True, highlight=False)
out = Console(highlight=False, soft_wrap=True)


def command(fn):
    """Map errors to one line and an exit code; Ctrl-C to 130."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exit:
            raise
        except BuildctlError as e:
            # The message may quote a build log, a probe or a wheel: text, never markup or terminal controls.
            console.print(f"[bold red]error:[/] {escape(strip_controls(str(e)))}", markup=True, soft_wrap=True)
            raise Exit(code=e.exit_code) from None
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/]")
            raise Exit(code=130) from None
        except Exception as e:  # a bug: say so in one line unless asked for the traceback
            if os.environ.get("BUILDCTL_DEBUG"):
                traceback.print_exc()
            console.print(f"[bold red]internal error:[/] {e.__class__.__name__}: {escape(strip_controls(str(e)))} "
                          "(rerun with BUILDCTL_DEBUG=1 for the traceback)", soft_wrap=True)
            raise Exit(code=1) from None

    return wrapper


def read_ca_certs(paths) -> dict[str, str]:
    texts = {}
    for i, p in enumerate(paths):
        path = Path(p).expanduser()
        try:
            text = path.read_text()
        except OSError:
            raise InputError(f"--ca-cert {p}: file not found or unreadable; fix: give a PEM file "
                             "(e.g. /etc/ssl/certs/ca-certificates.crt)") from None
        if "-----BEGIN CERTIFICATE-----" not in text:
            raise InputError(f"--ca-cert {p}: no PEM certificate in it; fix: give a PEM file")
        texts[f"{i:02d}-{path.stem}.crt"] = text
    return texts


def print_json(data) -> None:
    """`data` as the JSON a --json command prints on stdout (indented, anything else as its str)."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()
