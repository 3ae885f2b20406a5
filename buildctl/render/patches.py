"""The recipe's patches as the build applies them: the files copied into the build folder (and so keyed) and
the shell lines applying each in order, to the framework's source ("$SRC") or an extension's ("$dir")."""

from __future__ import annotations

import shlex
from pathlib import Path

from buildctl.errors import InputError
from buildctl.recipe.schema import Spec

PATCH_DIR = "/usr/local/share/buildctl/patches"


def patch_file_name(index: int, patch) -> str:
    return f"{index:02d}-{patch.label}"


def patch_files(spec: Spec) -> dict[str, tuple[str, str]]:
    """Patch files that live next to the recipe, copied into the build folder (and so into the key):
    {rendered name: (the file read, its text)}, the text byte for byte (no newline translation); an
    extension's are named ext-<name>-NN-<file>."""
    files = {}
    owners = [("framework.patches", "", spec.framework.patches),
              *((f"extensions[{n}].patches", f"ext-{e.name}-", e.patches) for n, e in enumerate(spec.extensions))]
    for owner, prefix, patches in owners:
        for i, patch in enumerate(patches):
            if patch.file is not None:
                try:
                    files[f"patches/{prefix}{patch_file_name(i, patch)}"] = (patch.file,
                                                                             Path(patch.file).read_bytes().decode())
                except (OSError, UnicodeDecodeError) as e:
                    raise InputError(f"{owner}[{i}].file {patch.file}: cannot read ({e.__class__.__name__}); "
                                     "fix: the path is relative to the recipe file") from None
    return files


def patch_lines(spec: Spec) -> list[str]:
    """Shell lines that apply the recipe's patches in order (buildctl-patch names a failing hunk)."""
    return patch_lines_for(spec.framework.patches, '"$SRC"', "")


def patch_lines_for(patches, src: str, prefix: str) -> list[str]:
    q = shlex.quote
    lines = []
    for i, patch in enumerate(patches):
        if patch.file is not None:
            name = prefix + patch_file_name(i, patch)
            lines.append(f'buildctl-patch file {src} {patch.strip} {q(f"{PATCH_DIR}/{name}")} {q(patch.label)}')
        elif patch.download is not None:
            tmp = f"/tmp/patch-{i:02d}"
            lines.append(f"buildctl-fetch {q(patch.download.url)} {q(patch.download.sha256)} {tmp}"
                         f' && buildctl-patch file {src} {patch.strip} {tmp} {q(patch.label)} && rm -f {tmp}')
        else:
            tmp = f"/tmp/patches-{i:02d}"
            dest = src if patch.into is None else f'{src}/{q(patch.into)}'
            # Wheels and zips through Python's zipfile (no unzip in the image); tarballs through tar.
            unpack = (f"python3 -m zipfile -e {tmp} {dest}" if patch.archive.name.endswith((".zip", ".whl"))
                      else f"tar -xf {tmp} -C {dest} --no-same-owner")
            line = (f"buildctl-fetch {q(patch.archive.url)} {q(patch.archive.sha256)} {tmp}"
                    f" && mkdir -p {dest} && {unpack} && rm -f {tmp}")
            if patch.series:
                skip = "".join(f" {q(n)}" for n in patch.skip)
                line += f' && buildctl-patch series {src} {patch.strip} {src}/{q(patch.series)}{skip}'
            else:
                line += f' && echo "buildctl: unpacked {patch.archive.name} into {patch.into or "the source tree"}"'
            lines.append(line)
    return lines
