"""The caps and strict field types every model of probe.json and report.json is made of."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StringConstraints,
)

MAX_JSON_BYTES = 8 << 20  # a CUDA torch probe.json is ~20 KB; report.json embeds it
MAX_TEXT = 256 << 10  # __config__.show(), tracebacks
MAX_STR = 16 << 10  # every other string (the probe clips its own strings below this)
MAX_KEY = 256  # dict keys (Build settings names, arch names)
MAX_ITEMS = 4096  # list and dict sizes
MAX_INT = 1 << 63  # beyond any size or count; keeps int -> float conversions finite


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError("expected an integer")
    if not -MAX_INT <= v <= MAX_INT:
        raise ValueError("integer out of range")
    return v


def _num(v: Any) -> float | int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("expected a number")
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError("expected a finite number")
    return _int(v) if isinstance(v, int) else v


def _scalar(v: Any) -> Any:
    """A JSON string (capped), number (finite, in range), true/false or null."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):
        if len(v) > MAX_STR:
            raise ValueError(f"string longer than {MAX_STR} characters")
        return v
    if isinstance(v, (int, float)):
        return _num(v)
    raise ValueError("expected a string, number, true/false or null")


def _scalar_or_list(v: Any) -> Any:
    if isinstance(v, list):
        if len(v) > 16:
            raise ValueError("list longer than 16 items")
        return [_scalar(x) for x in v]
    return _scalar(v)


Str = Annotated[str, StringConstraints(max_length=MAX_STR)]
LongText = Annotated[str, StringConstraints(max_length=MAX_TEXT)]
Key = Annotated[str, StringConstraints(max_length=MAX_KEY)]
Int = Annotated[int, PlainValidator(_int)]
Num = Annotated[float, PlainValidator(_num)]
Scalar = Annotated[Any, PlainValidator(_scalar)]
ScalarOrList = Annotated[Any, PlainValidator(_scalar_or_list)]
StrList = Annotated[list[Str], Field(max_length=MAX_ITEMS)]


class StrictModel(BaseModel):
    # strict: no "12" -> 12 or 1 -> True coercion; unknown fields are dropped, never passed on.
    model_config = ConfigDict(strict=True, extra="ignore")
