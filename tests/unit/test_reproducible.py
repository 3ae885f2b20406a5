"""What every build fixes for reproducibility, as rendered into build.sh (docs/reproducible.md): the
SOURCE_DATE_EPOCH rule, run by bash on a real git checkout; the recipe's own date; nvcc's temporary
names; what people and the manifest see of a check. Pure: rendering and bash, no engine."""

from __future__ import annotations

import os
import subprocess

import pytest

from buildctl import recipe, render
from buildctl.errors import RecipeError


def build_sh(name: str, sets=()) -> str:
    return render.render(recipe.load(name, list(sets))).files["build.sh"]


def date_block(script: str) -> str:
    """The script's lines that choose SOURCE_DATE_EPOCH (run in the source tree, after the fetch)."""
    start = script.index("# One date for every file")
    return script[start:script.index("# Toolchain versions", start)]


def run_date_block(script: str, cwd) -> str:
    proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + date_block(script) + 'echo "$SOURCE_DATE_EPOCH"'],
                          cwd=cwd, capture_output=True, text=True, timeout=30,
                          env={"PATH": os.environ["PATH"], "HOME": str(cwd)})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_git_source_is_dated_by_its_commit(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    env = {**os.environ, "GIT_AUTHOR_DATE": "2024-03-01T12:00:00Z", "GIT_COMMITTER_DATE": "2024-03-02T08:30:00Z",
           "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.invalid", "GIT_COMMITTER_NAME": "c",
           "GIT_COMMITTER_EMAIL": "c@example.invalid", "HOME": str(tmp_path)}
    subprocess.run(["git", "init", "-q"], cwd=src, check=True, env=env)
    (src / "f.txt").write_text("x\n")
    subprocess.run(["git", "add", "f.txt"], cwd=src, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "x"], cwd=src, check=True, env=env)
    assert run_date_block(build_sh("cpu"), src) == "1709368200"  # the committer date, 2024-03-02T08:30:00Z


def test_a_source_without_history_gets_1980(tmp_path):
    assert run_date_block(build_sh("demo-cpu"), tmp_path) == "315532800"


def test_the_recipe_date_wins_and_is_part_of_the_key(tmp_path):
    script = build_sh("demo-cpu", ["build.source_date_epoch=1700000000"])
    assert "export SOURCE_DATE_EPOCH=1700000000" in date_block(script) and "git log" not in date_block(script)
    assert run_date_block(script, tmp_path) == "1700000000"
    assert script != build_sh("demo-cpu")  # rendered: another date is another artifact key


@pytest.mark.parametrize("value", ["0", "315532799", "'1700000000'"])
def test_a_date_a_wheel_cannot_hold_is_refused_in_one_line(value):
    with pytest.raises(RecipeError) as info:
        recipe.load("demo-cpu", [f"build.source_date_epoch={value}"])
    assert "\n" not in str(info.value) and "build.source_date_epoch" in str(info.value)


def test_nvcc_names_its_temporary_files_after_the_object_from_cuda_12_4():
    assert "--objdir-as-tempdir" in build_sh("demo-cuda13")  # CUDA 13.2
    assert "--objdir-as-tempdir" in build_sh("cuda12.4-nccl2.21")
    older = build_sh("cuda12.1-nccl2.18")
    assert "-Xcompiler=@$PREFIX_MAP_FLAGS" in older and "--objdir-as-tempdir\"" not in older


def _outcome(differences=()):
    from buildctl.pipeline import rebuild_check
    from buildctl.store import wheel_diff

    sha_b = "a" * 64 if not differences else "b" * 64
    comparison = wheel_diff.WheelComparison("w.whl", "w.whl", "a" * 64, sha_b, tuple(differences))
    return rebuild_check.Check("demo-cpu", "k", 315532800, {"seconds": 36.4, "cached": False, "wheel": "A/w.whl"},
                              {"seconds": 92.9, "wheel": "build/.until/demo-cpu/k/wheel/w.whl"}, comparison,
                              "2026-12-01T10:00:00+00:00")


def test_what_people_and_the_manifest_see():
    from rich.console import Console

    from buildctl.pipeline import rebuild_check
    from buildctl.store import wheel_diff

    same = _outcome()
    console = Console(record=True, width=200)
    console.print(rebuild_check.table(same))
    assert f"Reproducible: both builds made the same wheel, sha256 {'a' * 64}" in " ".join(console.export_text().split())
    record = same.to_dict()
    assert record["identical"] is True and record["source_date_epoch"] == 315532800
    assert record["second_build"] == {"seconds": 92.9, "wheel": "build/.until/demo-cpu/k/wheel/w.whl",
                                      "build_dir": "/rebuild/work/src", "compile_cache": "off"}

    hostile = "pkg/\x1b[31mred\x1b]0;title\x07.py"  # member names come from the build: no terminal controls
    differ = _outcome([wheel_diff.MemberDifference(hostile, ("content",), "only in the second wheel")])
    console = Console(record=True, width=200)
    console.print(rebuild_check.table(differ))
    text = " ".join(console.export_text().split())
    assert "Not reproducible: the wheels differ (aaaaaaaaaaaa vs bbbbbbbbbbbb)" in text
    assert "pkg/red.py" in text and "\x1b" not in text and "\x07" not in text
    assert differ.to_dict()["reason"] == f"the two builds' wheels differ: {hostile} (content)"
