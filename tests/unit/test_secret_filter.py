"""One rule for secrets (issue 43): every file buildctl writes and every command line it starts goes through
the one filter of buildctl/secrets.py, so a value that held a credential reaches neither.

An ast walk of buildctl/ (the container side, buildctl/in_container/, runs inside the build and writes
nothing of the host's), as tests/unit/test_printing.py walks it for printing:

* a command line: `subprocess.run/Popen/call/check_call/check_output` and `os.exec*/spawn*` take their argv
  from `secrets.checked_argv(...)`, which refuses an argument carrying a credential (a URL login, a
  credential parameter, a known secret value);
* a text file: what `Path.write_text`, a text file opened for writing (`open`, `Path.open`, `os.fdopen`)
  `.write` and `json.dump` are given comes from `secrets.filtered(...)` (or a masker: `mask`, `mask_data`,
  a `masker` call), directly, through `json.dumps` or `+ "\\n"`;
* a file of bytes (`write_bytes`, a file opened "b") is listed below with what it holds.

Each rule is proved to catch a plant (a synthetic module that skips the filter) in this file itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "buildctl"
FILTERS = {"filtered", "mask", "mask_data", "masker"}
SUBPROCESS = {"run", "Popen", "call", "check_call", "check_output"}
OS_STARTS = ("exec", "spawn", "posix_spawn")

# (module, function): why its argv needs no filter
ARGV_EXEMPT = {
    ("pipeline/child_build.py", "start"): "the fixed child command (python -m buildctl.cli.child); its job goes on stdin",
}
# (module, function): what its bytes are, or why a text writer there needs no filter
WRITER_EXEMPT = {
    ("archive.py", "_write"): "the members of an archive being unpacked (build outputs, bundles), byte for byte",
    ("store/publish/folder.py", "_write_bytes_atomic"): "a wheel's METADATA and the index pages (names, digests)",
    ("store/publish/folder.py", "_copy_checked"): "a wheel, copied as it was built and checked",
    ("store/key.py", "host_salt"): "a random salt, in the user's config folder (0600), not under the artifacts root",
    ("store/git_refs.py", "_write"): "resolved refs (sha per URL without credentials): issue 41's, to move onto filtered",
}


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _is_filtered(node: ast.expr | None) -> bool:
    if isinstance(node, ast.BinOp):
        return _is_filtered(node.left)
    if isinstance(node, ast.Call):
        if _name(node.func) in FILTERS:
            return True
        if _name(node.func) == "dumps" and node.args:
            return _is_filtered(node.args[0])
    return False


def _mode(call: ast.Call) -> str | None:
    """The mode of an open call, when it is a constant."""
    name = _name(call.func)
    position = 0 if name == "open" and isinstance(call.func, ast.Attribute) else 1  # Path.open(mode) / open(p, mode)
    if name not in ("open", "fdopen"):
        return None
    if isinstance(call.func, ast.Attribute) and name == "open" and isinstance(call.func.value, ast.Name) and \
            call.func.value.id in ("tarfile", "gzip", "zipfile"):
        return None
    for kw in call.keywords:
        if kw.arg == "mode" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    if len(call.args) > position and isinstance(call.args[position], ast.Constant):
        return str(call.args[position].value)
    return "r"


def _functions(tree: ast.AST):
    """Each function with the nodes of its own body (a nested function's are its own)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            own, stack = [], list(ast.iter_child_nodes(node))
            while stack:
                child = stack.pop()
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    continue
                own.append(child)
                stack.extend(ast.iter_child_nodes(child))
            yield getattr(node, "name", "<module>"), own


def violations(source: str, module: str) -> list[str]:
    """What in `source` (the module `module`, relative to buildctl/) skips the filter."""
    found = []
    for function, nodes in _functions(ast.parse(source)):
        where = f"{module}:{function}"
        files: dict[str, str] = {}  # names bound to files opened for writing: their mode
        for node in nodes:
            opened = None
            if isinstance(node, ast.withitem) and isinstance(node.context_expr, ast.Call) and \
                    isinstance(node.optional_vars, ast.Name):
                opened, target = node.context_expr, node.optional_vars.id
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name):
                opened, target = node.value, node.targets[0].id
            mode = _mode(opened) if opened is not None else None
            if mode and any(c in mode for c in "wax+"):
                files[target] = mode
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            name, func = _name(node.func), node.func
            module_name = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "args"), None)
            starts = (module_name == "subprocess" and name in SUBPROCESS) or \
                (module_name == "os" and name.startswith(OS_STARTS))
            if starts and (module, function) not in ARGV_EXEMPT:
                argv = node.args[1] if module_name == "os" and len(node.args) > 1 else first
                if not (isinstance(argv, ast.Call) and _name(argv.func) == "checked_argv"):
                    found.append(f"{where}:{node.lineno}: a command line not from secrets.checked_argv")
            if (module, function) in WRITER_EXEMPT:
                continue
            if name == "write_bytes":
                found.append(f"{where}:{node.lineno}: bytes written (list it in WRITER_EXEMPT with what they are)")
            elif name == "write_text" and not _is_filtered(first):
                found.append(f"{where}:{node.lineno}: write_text of text not from secrets.filtered")
            elif name == "write" and module_name in files:
                if "b" in files[module_name]:
                    found.append(f"{where}:{node.lineno}: bytes written (list it in WRITER_EXEMPT with what they are)")
                elif not _is_filtered(first):
                    found.append(f"{where}:{node.lineno}: a file written with text not from secrets.filtered")
            elif name == "dump" and module_name == "json" and not _is_filtered(first):
                found.append(f"{where}:{node.lineno}: json.dump of data not from secrets.filtered")
    return found


def test_every_writer_and_command_line_of_buildctl_goes_through_the_filter():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module.startswith("in_container/") or module == "secrets.py":
            continue
        found += violations(path.read_text(), module)
    assert found == [], "\n".join(found)


PLANTED = '''
import json, os, subprocess
from pathlib import Path
from buildctl import secrets

def argv_in_clear(url):
    subprocess.run(["git", "fetch", url], check=True)

def argv_checked(url):
    subprocess.run(secrets.checked_argv(["git", "fetch", url]), check=True)

def exec_in_clear(url):
    os.execvp("git", ["git", "fetch", url])

def text_in_clear(root, text):
    (root / "build.log").write_text(text + "\\n")

def text_filtered(root, text, masker):
    (root / "build.log").write_text(secrets.filtered(text, masker) + "\\n")

def handle_in_clear(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(data))

def handle_filtered(path, data):
    with open(path, "a") as f:
        f.write(json.dumps(secrets.filtered(data)) + "\\n")

def dump_in_clear(path, data):
    with Path(path).open("w") as fh:
        json.dump(data, fh)

def bytes_unlisted(path, data):
    Path(path).write_bytes(data)

def reading_only(path):
    with open(path) as f:
        return f.read()
'''


def test_a_planted_writer_or_command_line_that_skips_the_filter_is_caught():
    found = violations(PLANTED, "planted.py")
    caught = sorted({line.split(":")[1] for line in found})
    assert caught == ["argv_in_clear", "bytes_unlisted", "dump_in_clear", "exec_in_clear", "handle_in_clear",
                      "text_in_clear"], "\n".join(found)
