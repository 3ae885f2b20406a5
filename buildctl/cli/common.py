"""What every command shares: the consoles, the error-to-exit-code wrapper, recipe loading, JSON output."""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from invoke.exceptions import Exit
from rich.console import Console
from rich.markup import escape

from buildctl import recipe as recipe_mod
from buildctl import settings, urls
from buildctl.errors import BuildctlError, InputError
from buildctl.recipe import loader
from buildctl.settings import Settings
from buildctl.ui import strip_controls

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


def env_value(value: Any, var: str, default: Any = None) -> Any:
    if value not in (None, ""):
        return value
    return os.environ.get(var, default)


# The site settings that are URLs, checked here so that a refusal names the flag and variable it came
# from (the recipe's own site: URLs are checked by the schema, spec.Url).
URL_SETTINGS = ("pip_index_url", "apt_mirror", "http_proxy", "https_proxy")


def site_options(chosen: Settings) -> dict:
    """The corporate / air-gapped settings that were set (flags over BUILDCTL_* variables), for `site:`."""
    site = chosen.site()
    for name in URL_SETTINGS:
        if site.get(name):
            flag = settings.flag_name(name).replace("_", "-")
            why = urls.problem(site[name])
            if why:
                raise InputError(f"--{flag} [{settings.env_name(name)}] (value not shown): {why}")
    if site.get("cache_url"):
        urls.check_redis_url(site["cache_url"])
    return site


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


def load_spec(recipe: str, sets=None, *, base_image=None, site: dict | None = None, preflight=True):
    """Load + validate + (optionally) preflight. Returns (spec, warnings)."""
    if not recipe:
        raise InputError("--recipe is required; fix: give a name from `invoke recipes` or a YAML path")
    overrides = list(sets or [])
    if base_image:
        overrides.append(f"base.image={base_image}")
    spec = recipe_mod.load(recipe, overrides, site=site)
    warnings: list[str] = []
    if preflight:
        from buildctl.recipe import preflight

        warnings = preflight.preflight(spec, source=recipe_source(recipe)) or []
        for w in warnings:
            console.print(f"[yellow]warning:[/] {w}", soft_wrap=True)
    return spec, warnings


def recipe_source(recipe: str) -> str:
    """The recipe file as error messages name it."""
    return loader.display(recipe_mod.recipe_path(recipe))


def print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
