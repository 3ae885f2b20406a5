"""What a verification is asked to do beyond the wheel (invoke verify's options; a build verifies with
the defaults). A module of its own: every build carries one in its options, and only a build that
verifies loads the runner."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VerifyOptions:
    sizes: str = "8:256M"
    iters: int = 20
    json_out: bool = False
    module: str | None = None
    beside: tuple[str, ...] = ()  # NAME==VERSION installed beside the set and checked against its torch
    compile_matrix: str = "smoke"  # torch.compile cells: the smoke set, or the whole cross (full)

    def kwargs(self) -> dict:
        return {"sizes": self.sizes, "iters": self.iters, "json_out": self.json_out, "module": self.module,
                "beside": self.beside, "compile_matrix": self.compile_matrix}
