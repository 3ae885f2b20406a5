"""The model of report.json: what `invoke verify` writes, the probe.json it embeds included."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    model_validator,
)

from buildctl.verify.schema.fields import MAX_ITEMS, Int, Key, Scalar, Str, StrictModel, StrList
from buildctl.verify.schema.probe_json import Probe


class ReportedWheel(StrictModel):
    """The wheel a report verified, as report.json names it (store/wheel_facts.py's WheelFacts is what a
    wheel says of itself)."""

    path: Str | None = None
    name: Str
    size: Int | None = None
    sha256: Str | None = None


class CheckModel(StrictModel):
    name: Str
    expected: Scalar = None
    actual: Scalar = None
    ok: bool | None = None
    detail: Str = ""


class ExpectationsModel(StrictModel):
    accelerator: Str | None = None
    version: Str | None = None
    cuda: Str | None = None
    hip: Str | None = None
    nccl: Str | None = None
    cudnn: Str | None = None
    arch: StrList | None = None
    build_type: Str | None = None
    features: Annotated[dict[Key, bool], Field(max_length=MAX_ITEMS)] = {}
    sources: Annotated[dict[Key, Str], Field(max_length=MAX_ITEMS)] = {}


class SpecFacts(StrictModel):
    name: Str | None = None
    accelerator: Str | None = None
    framework: Str | None = None
    sha256: Str | None = None  # the resolved recipe checked against (recipe.spec_hash: site settings aside)
    checks_sha256: Str | None = None  # the verification's own files (in_container.verification_files_sha256)


class ImageFacts(StrictModel):
    """What `invoke verify --image` verified: the reference given, the image id it resolved to, the Python."""

    reference: Str
    id: Str
    python: Str


class ReportModel(StrictModel):
    schema_version: Int
    created: Str
    verdict: Str
    mode: Literal["host", "container", "image"]
    module: Str
    wheel: ReportedWheel | None = None
    image: ImageFacts | None = None
    environment: Annotated[dict[Key, Scalar], Field(max_length=MAX_ITEMS)] = {}
    spec: SpecFacts | None = None
    expectations: ExpectationsModel = ExpectationsModel()
    checks: Annotated[list[CheckModel], Field(max_length=MAX_ITEMS)] = []
    files: Annotated[dict[Key, Str | None], Field(max_length=16)] = {}
    probe: Probe

    @model_validator(mode="after")
    def _names_what_it_verified(self) -> ReportModel:
        if (self.wheel is None) == (self.image is None):
            raise ValueError("a report names exactly one thing it verified: the wheel or the image")
        return self
