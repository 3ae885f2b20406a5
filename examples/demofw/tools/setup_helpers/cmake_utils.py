"""CMakeCache.txt parsing (kept apart from cmake.py to avoid an import cycle with env.py,
as in PyTorch's tools/setup_helpers/cmake_utils.py)."""

from __future__ import annotations

import re
from typing import IO


def convert_cmake_value_to_python_value(cmake_value: str, cmake_type: str):
    cmake_type = cmake_type.upper()
    up_val = cmake_value.upper()
    if cmake_type == "BOOL":
        return not (up_val in ("FALSE", "OFF", "N", "NO", "0", "", "NOTFOUND") or up_val.endswith("-NOTFOUND"))
    if cmake_type == "FILEPATH" and up_val.endswith("-NOTFOUND"):
        return None
    return cmake_value


def get_cmake_cache_variables_from_file(cmake_cache_file: IO[str]) -> dict:
    results = {}
    for i, line in enumerate(cmake_cache_file, 1):
        line = line.strip()
        if not line or line.startswith(("#", "//")):
            continue
        matched = re.match(r'("?)(.+?)\1(?::\s*([a-zA-Z_-][a-zA-Z0-9_-]*)?)?\s*=\s*(.*)', line)
        if matched is None:
            raise ValueError(f"Unexpected line {i} in {repr(cmake_cache_file)}: {line}")
        _, variable, type_, value = matched.groups()
        type_ = type_.upper() if type_ else ""
        if type_ in ("INTERNAL", "STATIC"):
            continue
        results[variable] = convert_cmake_value_to_python_value(value, type_)
    return results
