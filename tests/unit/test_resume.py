"""The records of a stopped and resumed build (buildctl/pipeline/resume.py): pure, no engine."""

from __future__ import annotations

import json
import os

import pytest

from buildctl.pipeline import resume
from buildctl.store import artifacts

TOP = {"Titles": ["PID", "ELAPSED", "COMMAND"],
       "Processes": [["894", "17", "cc1plus"], ["918", "15", "cc1plus"], ["880", "40", "ninja"],
                     ["870", "3000", "bash"], ["901", "2", "as"]]}


def test_the_record_counts_only_compilers_in_flight_and_names_ninjas_step():
    log = ["==> compile: running", "[499/1454] Building CXX object a.o", "[501/1454] Building CXX object b.o",
           "some compiler warning"]
    record = resume.interrupt_record(TOP, log, "docker top")
    assert record["at_step"] == "[501/1454]"
    assert [p["pid"] for p in record["in_flight"]] == [894, 918]
    assert record["lost_core_s"] == 32


def test_a_record_is_written_next_to_the_key_and_read_back(tmp_path):
    record = resume.interrupt_record(TOP, [], "docker top")
    path = resume.write("r", "0123456789abcdef", record, tmp_path)
    assert path == tmp_path / "r" / ".0123456789abcdef.interrupted.json"
    assert resume.read("r", "0123456789abcdef", tmp_path) == (record, None)
    section = resume.resumed_section({"built": "501", "total": "1454"}, record)
    assert section == {"steps_built_before": 501, "steps_total": 1454, "interrupted": record}
    assert resume.summary(section) == ("501 of 1454 steps were built already; interrupted at an unknown step, "
                                       "32 core-s of compiles in flight lost")
    resume.discard("r", "0123456789abcdef", tmp_path)
    assert resume.read("r", "0123456789abcdef", tmp_path) == (None, None)


@pytest.mark.parametrize("content", [
    "[1, 2]", '{"lost_core_s": "32", "in_flight": []}', '{"lost_core_s": -1, "in_flight": []}',
    '{"lost_core_s": 3, "in_flight": [], "at_step": "\\u001b[31m"}', "not json", "x" * (resume.MAX_RECORD_BYTES + 1),
])
def test_a_bad_record_is_ignored_with_a_warning(tmp_path, content):
    path = artifacts.interrupted_record("r", "k", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    record, warning = resume.read("r", "k", tmp_path)
    assert record is None and warning.startswith(f"ignored the interrupt record {path}") and "fix: remove it" in warning


def test_a_symlinked_record_is_not_followed(tmp_path):
    secret = tmp_path / "elsewhere.json"
    secret.write_text(json.dumps({"lost_core_s": 1, "in_flight": []}))
    path = artifacts.interrupted_record("r", "k", tmp_path)
    path.parent.mkdir(parents=True)
    os.symlink(secret, path)
    assert resume.read("r", "k", tmp_path)[0] is None


def test_no_counts_and_no_record_is_no_section():
    assert resume.resumed_section({}, None) is None and resume.summary(None) is None
