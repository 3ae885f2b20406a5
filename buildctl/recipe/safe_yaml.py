"""One recipe file's YAML, read safely: plain data, and the file and line each field came from.

Aliases and anchors are refused outright (no alias bombs, nothing to expand), as are tags other than
YAML's core ones (no Python objects), merge keys, duplicate keys and nesting past MAX_DEPTH; a failure
is a RecipeError naming the file and line.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Any

import yaml

from buildctl.errors import RecipeError

_CORE_TAGS = {
    "tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "map", "seq")
}
MAX_RECIPE_BYTES = 1 << 20
# Recipes nest a few levels; deeper input is hostile (PyYAML scans nested flow collections in
# quadratic time and composes recursively).
MAX_DEPTH = 32


@dataclass
class Located:
    """Plain data from YAML plus where each field came from (for error messages)."""

    data: dict[str, Any]
    lines: dict[tuple[str, ...], tuple[str, int]] = field(default_factory=dict)


def _from_node(node: yaml.Node, where: str, path: tuple[str, ...], lines: dict) -> Any:
    line = node.start_mark.line + 1
    if node.tag not in _CORE_TAGS:
        raise RecipeError(where, ".".join(path), f"YAML tag {node.tag!r} is not allowed",
                          "use plain YAML values (no tags)", line)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise RecipeError(where, ".".join(path), "a mapping key must be a plain string",
                                  "use simple keys", key_node.start_mark.line + 1)
            if key_node.tag == "tag:yaml.org,2002:merge" or key_node.value == "<<":
                raise RecipeError(where, ".".join(path), "YAML merge keys (<<) are not allowed",
                                  "use extends: to share fragments", key_node.start_mark.line + 1)
            if key_node.tag not in _CORE_TAGS:
                raise RecipeError(where, ".".join(path), f"YAML tag {key_node.tag!r} is not allowed",
                                  "use plain YAML values (no tags)", key_node.start_mark.line + 1)
            key = str(_scalar(key_node, where, path))
            if key in out:
                raise RecipeError(where, ".".join((*path, key)), "duplicate key",
                                  "keep one definition", key_node.start_mark.line + 1)
            sub = (*path, key)
            lines[sub] = (where, key_node.start_mark.line + 1)
            out[key] = _from_node(value_node, where, sub, lines)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_from_node(n, where, (*path, str(i)), lines) for i, n in enumerate(node.value)]
    del line
    return _scalar(node, where, path)


_constructor = yaml.constructor.SafeConstructor()


def _scalar(node: yaml.ScalarNode, where: str, path: tuple[str, ...]) -> Any:
    try:
        return _constructor.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, KeyError, TypeError):  # e.g. `!!int abc`, `!!bool maybe`
        raise RecipeError(where, ".".join(path), f"{node.value[:40]!r} is not a valid {node.tag.rsplit(':', 1)[-1]}",
                          "drop the !! tag and write a plain value", node.start_mark.line + 1) from None


def parse_yaml(text: str, where: str) -> Located:
    """Parse one YAML document into plain data; refuse aliases, anchors and non-core tags. Each caller gets
    its own copy, which it may change."""
    parsed = _parse(text, where)
    return Located(copy.deepcopy(parsed.data), dict(parsed.lines))


# The same text is parsed once: a fragment is read again for every recipe that extends it (`invoke
# recipes`, a multi-build), at some milliseconds a file in PyYAML's pure-Python parser. A refusal is
# not kept (it is raised again, worded the same).
@functools.lru_cache(maxsize=64)
def _parse(text: str, where: str) -> Located:
    if len(text.encode()) > MAX_RECIPE_BYTES:
        raise RecipeError(where, "", "file is larger than 1 MiB", "a recipe is a few KB; check the file")
    # Scan events first: an alias is refused before anything could be expanded.
    try:
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise RecipeError(where, "", "YAML anchors and aliases are not allowed",
                                  "write values out or share them with extends:",
                                  event.start_mark.line + 1)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise RecipeError(where, "", f"nested deeper than {MAX_DEPTH} levels",
                                      "a recipe nests a few levels; check the file", event.start_mark.line + 1)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = " ".join(str(e.problem or e.context or "invalid YAML").split())
        raise RecipeError(where, "", f"invalid YAML: {problem}", "fix the YAML syntax",
                          mark.line + 1 if mark else None) from None
    except yaml.YAMLError as e:
        raise RecipeError(where, "", f"invalid YAML: {' '.join(str(e).split())}", "fix the YAML syntax") from None
    if node is None:
        raise RecipeError(where, "", "file is empty", "write a recipe (see docs/recipes.md)")
    if not isinstance(node, yaml.MappingNode):
        raise RecipeError(where, "", "top level must be a mapping", "see docs/recipes.md", node.start_mark.line + 1)
    lines: dict = {}
    return Located(_from_node(node, where, (), lines), lines)
