"""Load a recipe: safe YAML with line numbers (safe_yaml.py), `extends:` merging, `--set` overrides,
validation.

The result is a `Spec`. Every failure is a `RecipeError` naming the file (and line when YAML gives
one), the field and the fix. Aliases are refused outright (no alias bombs, nothing to expand) and
only the YAML core tags are accepted (no Python objects).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from buildctl import settings
from buildctl.errors import RecipeError
from buildctl.recipe.fields import PATTERN_HINTS
from buildctl.recipe.locks import default_lock
from buildctl.recipe.safe_yaml import MAX_RECIPE_BYTES, Located, parse_yaml
from buildctl.recipe.schema import Spec
from buildctl.urls import mask_text


def recipes_dir(chosen: Path | None = None) -> Path:
    """Where recipe names are looked up: `chosen` (the CLI's Settings.recipes_dir), else the checkout's recipes/."""
    return chosen if chosen is not None and chosen != settings.REPO_ROOT / "recipes" else settings.checkout() / "recipes"


def display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def deep_merge(base: dict, child: dict) -> dict:
    """Child wins; mappings merge recursively; lists and scalars are replaced."""
    out = copy.deepcopy(base)
    for k, v in child.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _resolve_relative_paths(data: dict, file: Path) -> None:
    """A local source path, patch file or CA certificate is relative to the file that names it."""
    for section in (data.get("framework"), (data.get("toolchain") or {}).get("ascend")):
        if not isinstance(section, dict):
            continue
        key = "source" if "source" in section else "torch_npu"
        src = section.get(key)
        if isinstance(src, dict) and isinstance(src.get("path"), str) and not os.path.isabs(src["path"]):
            src["path"] = os.path.normpath(str(file.parent / src["path"]))
    patches = (data.get("framework") or {}).get("patches") if isinstance(data.get("framework"), dict) else None
    patches = [*(patches if isinstance(patches, list) else ()), *(p for e in data.get("extensions") or () if  # and
               isinstance(e, dict) and isinstance(e.get("patches"), list) for p in e["patches"])]  # extensions'
    for patch in patches:
        if isinstance(patch, dict) and isinstance(patch.get("file"), str) and not os.path.isabs(patch["file"]):
            patch["file"] = os.path.normpath(str(file.parent / patch["file"]))
    certs = data["site"].get("ca_certs") if isinstance(data.get("site"), dict) else None
    if isinstance(certs, list):
        data["site"]["ca_certs"] = [os.path.normpath(str(file.parent / c)) if isinstance(c, str) and not
                                    os.path.isabs(os.path.expanduser(c)) else c for c in certs]


def _load_file(path: Path, stack: tuple[Path, ...], reads: list[tuple[str, str]] | None = None) -> Located:
    where = display(path)
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_RECIPE_BYTES + 1)
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise RecipeError(where, "", "file not found", "check the path or run `invoke recipes`") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RecipeError(where, "", f"cannot read: {e.__class__.__name__}", "check the file") from None
    if reads is not None:  # the path as opened (a link in it is followed again next time) and what it held then
        reads.append((str(path), hashlib.sha256(raw).hexdigest()))
    own = parse_yaml(text, where)
    _resolve_relative_paths(own.data, path)
    default_lock(own.data, path)  # each file's own, so a recipe extending a locked one inherits its lock
    parents = own.data.pop("extends", [])
    if isinstance(parents, str):
        parents = [parents]
    if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
        raise RecipeError(where, "extends", "must be a path or a list of paths",
                          "e.g. extends: [fragments/cuda-12.1.yaml]", own.lines.get(("extends",), (0, None))[1])
    merged = Located({}, {})
    for parent in parents:
        ppath = path.parent / parent  # opened through the links it names, as the user wrote it
        line = own.lines.get(("extends",), (where, None))[1]
        if ppath.resolve() in stack or ppath.resolve() == path.resolve():
            chain = " -> ".join(display(p) for p in (*stack, path.resolve(), ppath.resolve()))
            raise RecipeError(where, "extends", f"cycle: {chain}", "remove one of the extends", line)
        if not ppath.is_file():
            raise RecipeError(where, "extends", f"fragment {parent} not found",
                              f"create {display(ppath.resolve())} or fix the path (relative to this file)", line)
        frag = _load_file(ppath, (*stack, path.resolve()), reads)
        merged = Located(deep_merge(merged.data, frag.data), {**merged.lines, **frag.lines})
    return Located(deep_merge(merged.data, own.data), {**merged.lines, **own.lines})


def recipe_path(name_or_path: str, recipes: Path | None = None) -> Path:
    """A name from `recipes` (recipes_dir: default the checkout's recipes/) or a path to any YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        return p
    return recipes_dir(recipes) / f"{name_or_path}.yaml"


def list_recipes(recipes: Path | None = None) -> list[Path]:
    """The recipes of `recipes` (recipes_dir: default the checkout's recipes/)."""
    return sorted(recipes_dir(recipes).glob("*.yaml"))


# What a --set key can be: dotted field names, dict keys (environment names, features) and list positions.
_SET_KEY = re.compile(r"\s*[A-Za-z0-9_.-]*\s*")


def _parse_override(item: str) -> tuple[list[str], Any]:
    if not _SET_KEY.fullmatch(item.partition("=")[0]) or "=" not in item:
        # A ':' or a space typed for '=' leaves the value in the item (up to a later '=', a query's), and a value
        # may be a credential: only the fields the item starts with are named.
        key = _declared_prefix(item)
        raise RecipeError("--set", key, "expected KEY=VALUE (the item is not shown: it may hold a credential)",
                          "e.g. --set build.type=Debug")
    key, raw = item.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise RecipeError("--set", key, "empty path component", "e.g. --set build.max_jobs=4")
    try:
        value = parse_yaml(f"v: {raw}", f"--set {key}").data["v"] if raw.strip() else ""
    except RecipeError as e:
        raise RecipeError(f"--set {key}", "", e.problem, e.fix) from None
    # A version typed on the command line (12.4) must stay a string: floats have no use here. An integer
    # becomes the text typed where only the text is valid: `build.env.RUN=39144451`, as env values are.
    if isinstance(value, float) or (type(value) is int and _only_text_fits(tuple(parts), value, raw.strip())):
        value = raw.strip()
    return parts, value


def _declared_prefix(item: str) -> str:
    """The dotted fields of the Spec that `item` starts with ("framework.source.git" of
    "framework.source.git:https://..."): names the schema declares, never a free key or a value."""
    words = re.match(r"[A-Za-z0-9_.]*", item.strip()).group(0).split(".")
    known: list[str] = []
    for word in words:
        ann = _annotation_at(tuple(known))
        members = [ann, *get_args(ann)]
        model = next((m for m in members if isinstance(m, type) and issubclass(m, BaseModel)), None)
        if model is None or word not in model.model_fields:
            break
        known.append(word)
    return ".".join(known)


def _annotation_at(path: tuple[str, ...]) -> Any:
    """The type the Spec declares at path, through models and dict values; None past what it declares."""
    ann: Any = Spec
    for part in path:
        members = [ann, *get_args(ann)]
        model = next((m for m in members if isinstance(m, type) and issubclass(m, BaseModel)), None)
        mapping = next((m for m in members if get_origin(m) is dict), None)
        sequence = next((m for m in members if get_origin(m) in (tuple, list)), None)
        if model is not None and part in model.model_fields:
            ann = model.model_fields[part].annotation
        elif mapping is not None:
            ann = get_args(mapping)[1]
        elif sequence is not None and part.isdigit():  # extensions.0: an item of a list
            ann = get_args(sequence)[0]
        else:
            return None
    return ann


def _only_text_fits(path: tuple[str, ...], number: int, text: str) -> bool:
    ann = _annotation_at(path)
    if ann is None:
        return False  # an unknown key: validation names it
    adapter = TypeAdapter(ann)

    def fits(value: Any) -> bool:
        try:
            adapter.validate_python(value)
        except ValidationError:
            return False
        return True
    return not fits(number) and fits(text)


def apply_overrides(loc: Located, overrides: list[str]) -> None:
    for item in overrides:
        parts, value = _parse_override(item)
        if isinstance(value, (str, int, bool)) and value != "" and _is_list_field(tuple(parts)):
            value = [value]  # `--set build.cuda_arch=9.0`: one value for a list field is a list of one
        node = loc.data
        for i, p in enumerate(parts[:-1]):
            if isinstance(node, list):
                node = node[_list_index(node, parts, i)]
                continue
            if not isinstance(node.get(p), (dict, list)):
                node[p] = {}
                loc.lines[tuple(parts[:i + 1])] = (f"--set {'.'.join(parts)}", 0)  # the override replaced it
            node = node[p]
        if isinstance(node, list):
            node[_list_index(node, parts, len(parts) - 1)] = value
        else:
            node[parts[-1]] = value
        loc.lines[tuple(parts)] = (f"--set {'.'.join(parts)}", 0)


def _list_index(items: list, parts: list[str], i: int) -> int:
    """`extensions.0.source.ref`: the item a --set path names in a list (the recipe's, after merging)."""
    where = ".".join(parts[:i])
    if not parts[i].isdigit() or int(parts[i]) >= len(items):
        raise RecipeError(f"--set {'.'.join(parts)}", where, f"a list of {len(items)}: no item {parts[i]!r}",
                          f"name an item by its position, from 0: e.g. --set {where}.0.{'.'.join(parts[i + 1:]) or '...'}")
    return int(parts[i])


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The pydantic model that owns the field at loc (for listing allowed keys)."""
    model: Any = Spec
    for part in loc[:-1]:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        f = model.model_fields.get(str(part))
        if f is None:
            return None
        ann = f.annotation
        candidates = [ann, *getattr(ann, "__args__", ())]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _is_list_field(path: tuple[str, ...]) -> bool:
    """Whether the Spec field at path holds a list (a tuple, optional or not)."""
    ann = _annotation_at(path)
    return ann is not None and any(get_origin(t) in (tuple, list) for t in (ann, *get_args(ann)))


def _hint_for(err: dict) -> str:
    kind, loc, inp = err["type"], err["loc"], err.get("input")
    last = str(loc[-1]) if loc else ""
    if kind == "extra_forbidden":
        model = _model_at(loc)
        allowed = ", ".join(model.model_fields) if model else ""
        return f"remove it or fix the spelling (allowed: {allowed})" if allowed else "remove it"
    if kind == "missing":
        if last == "sha256":
            return "add sha256: of the file (every download is verified)"
        return f"add {last}:"
    if kind == "string_type" and isinstance(inp, (int, float)):
        return f'quote it: {last}: "{inp}" (unquoted YAML numbers lose digits, 3.10 becomes 3.1)'
    if kind == "string_pattern_mismatch":
        pattern = err.get("ctx", {}).get("pattern", "")
        return PATTERN_HINTS.get(pattern) or f"use only letters, digits and ._+- (pattern {pattern})"
    if kind == "literal_error":
        return f"use {err.get('ctx', {}).get('expected', 'an allowed value')}"
    if kind in ("greater_than_equal", "less_than_equal"):
        ctx = err.get("ctx", {})
        return f"use a number {'>=' if 'ge' in ctx else '<='} {ctx.get('ge', ctx.get('le'))}"
    if kind in ("int_type", "int_parsing", "bool_type", "bool_parsing"):
        return "use " + {"int_type": "an integer", "int_parsing": "an integer"}.get(kind, "true or false")
    if kind in ("dict_type", "model_type"):
        return "write a mapping (key: value lines)"
    if kind in ("tuple_type", "list_type"):
        return "write a list, e.g. [a, b]"
    if kind == "value_error":
        return str(err.get("msg", "")).removeprefix("Value error, ")
    return "see docs/recipes.md"


_UNION_MEMBERS = ("str", "int", "constrained-int", "constrained-str", "tuple")
# A model-level check names its field at the start of the message ("build.cuda_arch is empty; ...").
_LEADING_FIELD = re.compile(r"^([a-z_]+(?:\.[a-z_]+)*)(?=[:\s])")


def _clean_loc(raw: tuple) -> tuple[str, ...]:
    path = tuple(str(p) for p in raw if not str(p).startswith(("function-", "literal[")))
    # Union members appear in loc (e.g. 'int', 'literal['auto']'); drop the noise.
    return tuple(p for p in path if p not in _UNION_MEMBERS)


def _error_from_validation(exc: ValidationError, loc: Located, fallback: str) -> RecipeError:
    errors = exc.errors(include_url=False)
    err = errors[0]
    path = _clean_loc(err["loc"])
    hint = _hint_for(err)
    problem = err["msg"]
    key_error = bool(path) and path[-1] == "[key]"  # a dict key failed (build.env, build.features)
    if key_error:
        path = path[:-1]
    if err["type"] == "value_error" and not path:
        m = _LEADING_FIELD.match(hint)
        if m:
            path = tuple(m.group(1).split("."))
    where, line = fallback, None
    for n in range(len(path), -1, -1):
        if path[:n] in loc.lines:
            where, line = loc.lines[path[:n]]
            break
    if key_error:
        path = path[:-1]
    # A union (max_jobs: auto | 1..1024) reports one error per member: say all of them.
    union = [e for e in errors if _clean_loc(e["loc"]) == _clean_loc(err["loc"])]
    if len(union) > 1 and len(err["loc"]) != len(_clean_loc(err["loc"])):
        problem = " or ".join(dict.fromkeys(e["msg"] for e in union))
        hint = "use " + " or ".join(dict.fromkeys(_hint_for(e).removeprefix("use ") for e in union))
    elif err["type"] == "extra_forbidden":
        problem = "unknown key"
    elif err["type"] == "value_error":
        # A field's own check says "<problem>; fix: <fix>"; a model-level one is a combination.
        problem, sep, fix = hint.partition("; fix: ")
        if sep:
            hint = fix
        else:
            problem = "invalid combination"
    elif err["type"] == "string_type" and isinstance(err.get("input"), (int, float)):
        problem = f"{err['input']!r} is a number, not a string"
    elif err["type"] == "string_pattern_mismatch":
        what = "key" if key_error else "value"
        shown = str(err.get("input"))
        # a login in a malformed value may be of a shape no mask finds (a password holding '#', a space)
        problem = (f"malformed {what} (not shown: it may hold a login)" if "@" in shown
                   else f"malformed {what} {mask_text(shown)[:60]!r}")
    if where.startswith("--set"):
        line = None
    return RecipeError(where, ".".join(path), problem, hint, line or None)


def load(recipe: str, overrides: list[str] | None = None, *, site: dict | None = None,
         reads: list[tuple[str, str]] | None = None, recipes: Path | None = None) -> Spec:
    """Load, merge, override and validate a recipe into a Spec (a name is looked up in `recipes`: recipe_path).
    Raises RecipeError. `reads` collects the files it was read from (the recipe and its fragments), each as
    (path as opened, sha256 of what it held then): the no-op memo checks them."""
    path = recipe_path(recipe, recipes)
    loc = _load_file(path, (), reads)
    where = display(path)
    name = loc.data.pop("name", None) or path.stem
    loc.data["name"] = name
    if site:
        recipe_site = loc.data.get("site") if isinstance(loc.data.get("site"), dict) else {}
        loc.data["site"] = deep_merge(recipe_site, site)
        certs = (recipe_site.get("ca_certs"), site.get("ca_certs"))
        if all(isinstance(c, list) for c in certs):  # one list: the recipe's, then the command line's
            loc.data["site"]["ca_certs"] = list(dict.fromkeys(c for cs in certs for c in cs if isinstance(c, str)))
    apply_overrides(loc, overrides or [])
    try:
        return Spec.model_validate(loc.data)
    except ValidationError as exc:
        raise _error_from_validation(exc, loc, where) from None


# Fields added after recipes were first built, left out of the dump while unset: the resolved recipe is a
# rendered file (keyed), so a recipe that does not use them keeps its key and its build volume.
LATER_FIELDS = (("extensions",), ("framework", "source", "prebuilt"), ("toolchain", "ascend", "torch_npu", "prebuilt"),
                ("build", "wheel", "max_vendored"), ("build", "wheel"), ("site", "dist_scheduler"), ("python", "lock"))


# The commit a git ref was resolved to (store/git_refs.py): set by the build before the key, absent from the
# dump until then (a recipe's own resolved recipe, `invoke show`, reads as before).
LATER_FIELDS += (("framework", "source", "commit"), ("toolchain", "nccl", "commit"),
                 ("toolchain", "ascend", "torch_npu", "commit"))


def masked_dump(spec: Spec) -> dict:
    """The spec as plain data, with credentials in every URL masked (it is written and shown)."""
    from buildctl.secrets import mask_data

    data = spec.model_dump(mode="json")
    for *parents, name in LATER_FIELDS:
        holder = data
        for part in parents:
            holder = holder.get(part) or {}
        if holder.get(name, 0) in (None, [], ()):
            holder.pop(name, None)
    for ext in data.get("extensions") or []:  # an extension's patches (issue 44), likewise
        ext.pop("patches", None) if not ext.get("patches") else None
        (ext.get("source") or {}).pop("commit", None) if not (ext.get("source") or {}).get("commit") else None
    return mask_data(data)


def resolved_yaml(spec: Spec) -> str:
    """The resolved recipe as YAML: what was built, with nothing left to look up (secrets masked)."""
    return yaml.safe_dump(masked_dump(spec), sort_keys=False, default_flow_style=False)


def spec_hash(spec: Spec) -> str:
    data = masked_dump(spec)
    data.pop("site", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
