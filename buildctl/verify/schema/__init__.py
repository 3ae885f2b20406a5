"""The shapes of probe.json and report.json, checked before the host reads a single field.

probe.json is written inside the verified environment, where the wheel under test has run its own
code (its import, atexit hooks, a patched json module): whatever the file says is untrusted. A
report.json handed to `invoke diff` may come from anywhere. Both are read here with a size cap,
parsed, and validated against strict models (types, string lengths, list and dict sizes, finite
numbers); anything else is refused with one line naming the file, the field and the problem.
What passes is dumped back to plain dicts holding only the fields the models know.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from buildctl.errors import InputError
from buildctl.verify.schema.fields import MAX_JSON_BYTES, MAX_STR, MAX_TEXT, StrictModel
from buildctl.verify.schema.probe_json import Probe
from buildctl.verify.schema.report_json import ReportModel

__all__ = ["MAX_JSON_BYTES", "MAX_STR", "MAX_TEXT", "Probe", "ReportModel", "load_probe", "read_json",
           "validate_probe", "validate_report"]


def _where(loc: tuple) -> str:
    """A field path for the message: framework.arch_list[3]; odd keys quoted, long ones cut."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = str(part)
        if not text.replace("_", "").isalnum() or not text.isascii():
            text = ascii(text[:40])
        out += ("." if out else "") + text[:60]
    return out or "top level"


def _problem(e: ValidationError) -> str:
    errors = e.errors(include_url=False, include_input=False)
    first = errors[0]
    msg = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{_where(first['loc'])}: {msg}{more}"


def read_json(path: Path, what: str, fix: str, limit: int = MAX_JSON_BYTES) -> Any:
    """The JSON in `path`, read no further than `limit` bytes; InputError naming `what` otherwise."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise InputError(f"{what}: no such file; {fix}") from None
    except OSError as e:
        raise InputError(f"{what}: unreadable ({e.strerror}); {fix}") from None
    if len(data) > limit:
        raise InputError(f"{what}: larger than {limit >> 20} MiB, refused unread; {fix}")
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise InputError(f"{what}: not JSON ({e.msg} at line {e.lineno} column {e.colno}); {fix}") from None
    except UnicodeDecodeError:
        raise InputError(f"{what}: not UTF-8 text; {fix}") from None
    except RecursionError:
        raise InputError(f"{what}: nested too deeply to read; {fix}") from None
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        raise InputError(f"{what}: not readable JSON ({str(e)[:120]}); {fix}") from None


def _validate(model: type[StrictModel], data: Any, what: str, fix: str) -> dict:
    if not isinstance(data, dict):
        raise InputError(f"{what}: top level is {type(data).__name__ if data is not None else 'null'}, "
                         f"not an object; {fix}")
    try:
        parsed = model.model_validate(data)
    except ValidationError as e:
        raise InputError(f"{what}: {_problem(e)}; {fix}") from None
    except RecursionError:
        raise InputError(f"{what}: nested too deeply to read; {fix}") from None
    return parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)


PROBE_FIX = ("fix: probe.py never writes this; the verified environment (the wheel's own code runs "
             "there) replaced or damaged it: inspect the wheel")


def validate_probe(data: Any, what: str = "probe.json") -> dict:
    return _validate(Probe, data, what, PROBE_FIX)


def load_probe(path: Path, what: str) -> dict:
    """probe.json as a plain dict of checked values, or InputError naming `what` and the problem."""
    return validate_probe(read_json(path, what, PROBE_FIX), what)


REPORT_FIX = "fix: give a report.json written by `invoke verify`"


def validate_report(data: Any, what: str) -> dict:
    return _validate(ReportModel, data, what, REPORT_FIX)
