"""Every toolchain provider combination renders a complete Dockerfile or is refused up front.

The combinations: CUDA (absent, runfile, apt, pip, base-image) x cuDNN (absent, archive, pip) x NCCL
(absent, redist, pip, source, none) x ROCm (absent, present) x Ascend (absent, present), each as a
recipe file extending the demofw fragment, through the real loader. Each one either

* is refused with a one-line RecipeError, by the loader (schema) or by `preflight.preflight`, or
* renders a Dockerfile in which every `FROM x` names the base image or an earlier stage, and every
  `COPY --from=x` an earlier stage.

How the old code misbehaved: `toolchain.nccl.install: source` with a CUDA other than the runfile one
(apt, pip, base-image, or ROCm) passed preflight and rendered `FROM cuda AS nccl` with no `cuda`
stage, so the recipe failed only at the image build ("pull access denied for cuda", or buildctl's
"never pulls" error for the image `cuda`).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
import yaml

from buildctl import recipe, render
from buildctl.errors import RecipeError
from buildctl.recipe import preflight

ROOT = Path(__file__).resolve().parents[2]
FRAGMENT = ROOT / "recipes" / "fragments" / "demofw.yaml"
SHA = "ab" * 32

CUDA = {
    None: None,
    "runfile": {"version": "12.4", "install": "runfile",
                "runfile": {"url": "https://example.invalid/cuda_12.4.1_550.54.15_linux.run", "sha256": SHA}},
    "apt": {"version": "12.4", "install": "apt"},
    "pip": {"version": "13.2", "install": "pip", "pip_release": "13.2.86"},
    "base-image": {"version": "12.4", "install": "base-image"},
}


def _cuda_major(cuda: str | None) -> str:
    return "13" if cuda == "pip" else "12"


def _cudnn(kind: str | None, cuda: str | None):
    if kind is None:
        return None
    major = _cuda_major(cuda)
    version = "9.13.0.50" if major == "13" else "9.1.0.70"
    if kind == "pip":
        return {"version": version, "install": "pip"}
    return {"version": version, "install": "archive",
            "archive": {"url": f"https://example.invalid/cudnn-linux-x86_64-{version}_cuda{major}-archive.tar.xz",
                        "sha256": SHA}}


def _nccl(kind: str | None, cuda: str | None):
    if kind is None:
        return None
    version = "2.28.9" if _cuda_major(cuda) == "13" else "2.21.5"
    out = {"version": version, "install": kind}
    if kind == "redist":
        out["archive"] = {"url": f"https://example.invalid/nccl_{version}-1+cuda{_cuda_major(cuda)}.0_x86_64.txz",
                          "sha256": SHA}
    return out


ROCM = {"version": "6.2", "arch": ["gfx90a"]}
ASCEND = {"cann_version": "8.0.0", "installer": {"url": "https://example.invalid/Ascend-cann-toolkit_8.0.0_linux-x86_64.run",
                                                 "sha256": SHA},
          "torch_npu": {"git": "https://example.invalid/torch_npu", "ref": "v2.1.0"}}

COMBINATIONS = list(itertools.product(CUDA, (None, "archive", "pip"), (None, "redist", "pip", "source", "none"),
                                      (False, True), (False, True)))


def _recipe(tmp_path: Path, cuda, cudnn, nccl, rocm: bool, ascend: bool) -> Path:
    toolchain = {"cuda": CUDA[cuda], "cudnn": _cudnn(cudnn, cuda), "nccl": _nccl(nccl, cuda),
                 "rocm": ROCM if rocm else None, "ascend": ASCEND if ascend else None}
    data = {"extends": str(FRAGMENT), "toolchain": {k: v for k, v in toolchain.items() if v is not None}}
    if cuda is not None:
        data["build"] = {"cuda_arch": ["8.0"]}
    name = "-".join(str(x).lower() for x in (cuda, cudnn, nccl, "rocm" if rocm else "", "ascend" if ascend else "")
                    if x not in (None, "")) or "plain"
    path = tmp_path / f"combo-{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def stage_references(dockerfile: str, base_image: str) -> list[str]:
    """The `FROM x` / `COPY --from=x` names that are neither the base image nor an earlier stage."""
    stages: set[str] = set()
    missing = []
    for line in dockerfile.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0].upper() == "FROM":
            ref = words[1]
            if ref not in (base_image, "${BUILDCTL_BASE_IMAGE}") and ref.lower() not in stages:
                missing.append(f"FROM {ref}")
            if len(words) >= 4 and words[2].upper() == "AS":
                stages.add(words[3].lower())
        elif words[0].upper() == "COPY":
            for w in words[1:]:
                m = re.fullmatch(r"--from=(\S+)", w)
                if m and m.group(1).lower() not in stages:
                    missing.append(f"COPY --from={m.group(1)}")
    return missing


def test_stage_references_finds_a_missing_stage():
    df = "FROM img AS base\nFROM cuda AS nccl\nFROM base AS builder\nCOPY --from=nccl /a /a\nCOPY --from=cudnn /b /b\n"
    assert stage_references(df, "img") == ["FROM cuda", "COPY --from=cudnn"]


def test_every_provider_combination_renders_a_complete_dockerfile_or_is_refused(tmp_path):
    outcomes: dict[str, list[str]] = {"rendered": [], "refused at load": [], "refused at preflight": []}
    incomplete = []
    for combo in COMBINATIONS:
        path = _recipe(tmp_path, *combo)
        try:
            spec = recipe.load(str(path))
        except RecipeError as e:
            assert "\n" not in str(e) and "fix:" in str(e), (combo, str(e))
            outcomes["refused at load"].append(path.stem)
            continue
        try:
            preflight.preflight(spec, source=str(path))
        except RecipeError as e:
            assert "\n" not in str(e) and "fix:" in str(e), (combo, str(e))
            outcomes["refused at preflight"].append(path.stem)
            continue
        dockerfile = render.render(spec).files["Dockerfile"]
        missing = stage_references(dockerfile, spec.base.image)
        if missing:
            incomplete.append((path.stem, missing))
        outcomes["rendered"].append(path.stem)
    assert incomplete == [], incomplete
    assert len(COMBINATIONS) == 300
    # every provider is exercised in some rendered Dockerfile
    rendered = " ".join(outcomes["rendered"])
    for word in ("runfile", "apt", "pip", "base-image", "archive", "redist", "source", "none", "rocm", "ascend"):
        assert f"-{word}" in rendered or rendered.startswith(f"combo-{word}"), word


@pytest.mark.parametrize("cuda", ["apt", "pip", "base-image", None])
def test_nccl_from_source_needs_the_runfile_cuda_stage(tmp_path, cuda):
    path = _recipe(tmp_path, cuda, None, "source", cuda is None, False)
    spec = recipe.load(str(path))
    with pytest.raises(RecipeError, match=r"toolchain\.(nccl\.install|nccl):") as info:
        preflight.preflight(spec, source=str(path))
    assert "\n" not in str(info.value) and "fix:" in str(info.value)


def test_nccl_from_source_with_the_runfile_renders_its_stage_after_cuda(tmp_path):
    spec = recipe.load(str(_recipe(tmp_path, "runfile", None, "source", False, False)))
    preflight.preflight(spec, source="x")
    df = render.render(spec).files["Dockerfile"]
    assert df.index("AS cuda") < df.index("FROM cuda AS nccl") and stage_references(df, spec.base.image) == []


@pytest.mark.parametrize("other", ["cuda", "rocm"])
def test_ascend_with_a_gpu_toolchain_is_refused(tmp_path, other):
    path = _recipe(tmp_path, "runfile" if other == "cuda" else None, None, None, other == "rocm", True)
    with pytest.raises(RecipeError, match=r"toolchain\.ascend: .*keep one"):
        preflight.preflight(recipe.load(str(path)), source=str(path))
