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


@pytest.mark.parametrize("archs, expect", [
    (["7.0", "7.5", "8.0", "9.0"], "is compiled for 7.0, 7.5 too, which cannot run it (sm80+): 188 more nvcc passes "
                                   "over its 94 kernel units, up to 25 core-hours"),
    (["7.5"], "needs sm80+ and no listed arch (7.5) has it: its 94 kernel units would be compiled for nothing, "
              "about 13 core-hours"),
])
def test_archs_flash_attention_cannot_use_are_a_warning_naming_them_and_the_cost(archs, expect):
    """issue 34: a warning, not a refusal (PyTorch's own wheels list 5.0-7.5 beside 8.0+), with the archs
    and the compile time they cost (pytorch#194502)."""
    spec = recipe.load("cuda12.4-nccl2.21", [f"build.cuda_arch={archs}".replace("'", '"')])
    warnings = [w for w in preflight.preflight(spec, source="x.yaml") if "flash attention" in w]
    assert len(warnings) == 1 and warnings[0].startswith("build.cuda_arch: flash attention (USE_FLASH_ATTENTION) ")
    assert expect in warnings[0] and "build.features.USE_FLASH_ATTENTION: false" in warnings[0]


@pytest.mark.parametrize("name, sets", [
    ("cuda12.4-nccl2.21", ['build.cuda_arch=["8.0", "9.0"]']),
    ("cuda12.4-nccl2.21", ["build.features.USE_FLASH_ATTENTION=false"]),
    ("pytorch2.6-cuda12.4-trixie", ['build.cuda_arch=["7.5", "9.0"]']),  # flash attention off in the recipe
    ("demo-cuda13", ['build.cuda_arch=["7.5"]']),  # demofw has no flash attention
])
def test_no_flash_attention_warning_where_it_is_off_or_every_arch_runs_it(name, sets):
    spec = recipe.load(name, sets)
    assert not [w for w in preflight.preflight(spec, source="x.yaml") if "flash attention" in w]
