"""What every command shares: the consoles, the error-to-exit-code wrapper, recipe loading, JSON output."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from buildctl import recipe as recipe_mod
from buildctl import settings, urls
from buildctl.cli.base import command, console, out, print_json  # noqa: F401 - re-exported: what every command uses
from buildctl.errors import InputError
from buildctl.recipe import loader
from buildctl.settings import Settings


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
    if site.get("dist_scheduler"):
        urls.check_dist_url(site["dist_scheduler"])
    return site


def recipes_dir() -> Path:
    """Where this command looks recipe names up: BUILDCTL_RECIPES_DIR of its environment (read here, in the
    CLI), else the checkout's recipes/."""
    return loader.recipes_dir(Settings.from_env(os.environ).recipes_dir)


def load_spec(recipe: str, sets=None, *, base_image=None, site: dict | None = None, preflight=True,
              reads: list[Path] | None = None):
    """Load + validate + (optionally) preflight. Returns (spec, warnings); `reads` collects the recipe's files."""
    if not recipe:
        raise InputError("--recipe is required; fix: give a name from `invoke recipes` or a YAML path")
    overrides = list(sets or [])
    if base_image:
        overrides.append(f"base.image={base_image}")
    spec = recipe_mod.load(recipe, overrides, site=site, reads=reads, recipes=recipes_dir())
    warnings: list[str] = []
    if preflight:
        from buildctl.recipe import preflight

        warnings = preflight.preflight(spec, source=recipe_source(recipe)) or []
        for w in warnings:
            console.print(f"[yellow]warning:[/] {w}", soft_wrap=True)
    return spec, warnings


def recipe_source(recipe: str) -> str:
    """The recipe file as error messages name it."""
    return loader.display(recipe_mod.recipe_path(recipe, recipes_dir()))

