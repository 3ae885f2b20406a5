"""A change to a source tree, applied after it is unpacked: the framework's `patches` and each extension's."""

from __future__ import annotations

from pydantic import Field, StrictInt, StrictStr, model_validator

from buildctl.recipe.fields import Download, Model, Name, TreePath, exactly_one, plain_path


class Patch(Model):
    """One change to the framework source, applied in order after unpacking. Exactly one of:
    file (a patch next to the recipe), download (a patch fetched, sha256-checked), or archive (a
    tar or zip unpacked into the source tree at `into`: e.g. Debian's debian.tar.xz, whose quilt
    `series` file then lists the patches to apply in order, `skip` leaving named ones out; without
    a series the archive is an overlay, e.g. a submodule the source tarball lacks)."""

    file: StrictStr | None = None
    download: Download | None = None
    archive: Download | None = None
    into: TreePath | None = None  # None: the root of the source tree
    series: TreePath | None = None
    skip: tuple[Name, ...] = ()
    strip: StrictInt = Field(default=1, ge=0, le=9)

    @model_validator(mode="after")
    def _one_kind(self) -> Patch:
        exactly_one(self, ("file", "download", "archive"), " (+ series)")
        if self.series is not None and self.archive is None:
            raise ValueError("series names a file of an archive; add archive: {url, sha256}")
        if self.into is not None and self.archive is None:
            raise ValueError("into is where an archive is unpacked; it needs archive")
        if self.skip and self.series is None:
            raise ValueError("skip names patches of a series; it needs archive + series")
        plain_path(self.file, "file")
        return self

    @property
    def label(self) -> str:
        if self.file is not None:
            return self.file.rsplit("/", 1)[-1]
        if self.download is not None:
            return self.download.name
        return f"{self.archive.name}:{self.series}" if self.series else self.archive.name
