"""A build whose verification fails is not published (issue 34): the artifact is verified in its staging
folder and renamed into the store only when it passed; what the summary and the report then say."""

from __future__ import annotations

import json
from pathlib import Path

from verify_fixtures import cpu_probe, make_report

from buildctl.cli.build import _summary_rows
from buildctl.pipeline.pipeline import BuildResult
from buildctl.store.manifest import Manifest
from buildctl.verify import report_files


def test_a_report_written_in_the_staging_folder_names_where_the_folder_went(tmp_path):
    staging, kept = tmp_path / "demo-cpu" / ".tmp-k-x", tmp_path / "failures" / "demo-cpu-20261206T000000-ab12-unverified"
    staging.mkdir(parents=True)
    report = make_report(cpu_probe())
    report.wheel = {**(report.wheel or {}), "path": str(staging / "w.whl")}
    report_files.write_all(report, staging)
    kept.parent.mkdir()
    staging.rename(kept)
    report_files.relocate(report, staging, kept)
    data = json.loads((kept / "report.json").read_text())
    assert data["wheel"]["path"] == str(kept / "w.whl")
    assert data["files"]["json"] == str(kept / "report.json") and data["files"]["markdown"] == str(kept / "report.md")
    assert str(staging) not in (kept / "report.json").read_text() + (kept / "report.md").read_text()


def _result(tmp_path: Path, published: bool) -> BuildResult:
    manifest = Manifest.model_validate({"recipe": "demo-cpu", "key": "k", "wheels": [{"file": "w.whl", "sha256": "0" * 64}]})
    return BuildResult("demo-cpu", "k", tmp_path / "failures" / "x", manifest, False, {}, None, None, published=published)


def test_the_summary_says_built_and_published_or_not_published_and_where_it_was_kept(tmp_path):
    kept = dict(_summary_rows(_result(tmp_path, published=False)))
    assert kept["status"] == "built, NOT published: its verification failed"
    assert kept["kept in"] == str(tmp_path / "failures" / "x") and "artifact" not in kept
    assert dict(_summary_rows(_result(tmp_path, published=True)))["status"] == "built and published"
