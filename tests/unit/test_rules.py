"""The CUDA stack's rules are rows of data (buildctl/recipe/rules.py), each written once: a field a recipe
has, refuse or warn, a check, and where the fact comes from."""

from __future__ import annotations

import pytest

from buildctl import recipe
from buildctl.errors import RecipeError
from buildctl.recipe import preflight, rules
from buildctl.recipe.schema import Spec


def _field_exists(path: str) -> bool:
    model = Spec
    for part in path.split("."):
        fields = getattr(model, "model_fields", {})
        if part not in fields:
            return False
        ann = fields[part].annotation
        model = next((a for a in (*getattr(ann, "__args__", ()), ann) if hasattr(a, "model_fields")), None)
        if model is None:
            return True
    return True


@pytest.mark.parametrize("rule", rules.CUDA_RULES, ids=lambda r: f"{r.field}:{r.check.__name__}")
def test_every_rule_names_a_recipe_field_a_severity_and_its_source(rule):
    assert _field_exists(rule.field), rule.field
    assert rule.severity in ("refuse", "warn") and rule.source


def test_cuda_from_pip_needs_13_is_one_rule_applied_by_preflight():
    """Written once (it was in the schema and in preflight): the schema takes the recipe, preflight refuses."""
    data = recipe.load("demo-cuda13").model_dump(mode="json")
    data["toolchain"]["cuda"].update(version="12.4", pip_release="12.4.131")
    spec = Spec.model_validate(data)  # no refusal at load
    with pytest.raises(RecipeError) as e:
        preflight.preflight(spec, source="x.yaml")
    assert "toolchain.cuda.install" in str(e.value) and "only ptxas" in str(e.value)
