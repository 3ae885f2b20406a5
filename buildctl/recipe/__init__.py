"""The recipe side: YAML recipes read (safe_yaml.py), loaded and merged into a validated Spec (loader.py,
schema.py), the compatibility tables (compat.py), the checks of a recipe against them (preflight.py),
the MAX_JOBS rule (parallel_jobs.py)."""

from buildctl.recipe.loader import (
    apply_overrides,
    deep_merge,
    list_recipes,
    load,
    masked_dump,
    recipe_path,
    recipes_dir,
    resolved_yaml,
    spec_hash,
)
from buildctl.recipe.safe_yaml import parse_yaml
from buildctl.recipe.schema import Spec

__all__ = ["Spec", "apply_overrides", "deep_merge", "list_recipes", "load", "masked_dump", "parse_yaml",
           "recipe_path", "recipes_dir", "resolved_yaml", "spec_hash"]
