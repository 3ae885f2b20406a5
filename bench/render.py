#!/usr/bin/env python3
"""Bench: render every shipped recipe, in process, as `invoke render` does (load + preflight + render +
write into a temporary folder), N full passes; prints seconds per full pass and PASS/FAIL against the
budget (0.5 s per full pass).

To tell a slow machine from a slow renderer, the same run measures a baseline: a plain
`yaml.safe_load` of the same recipe and fragment files per pass; the ratio render/baseline is printed.

    python bench/render.py [--passes 20] [--budget 0.5]

Exit status 0 on PASS, 1 on FAIL.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=20, help="full passes over all shipped recipes (default 20)")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds allowed per full pass (default 0.5)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    import yaml

    from buildctl import recipe, render
    from buildctl.recipe import preflight
    import_s = time.perf_counter() - t0

    names = [p.stem for p in recipe.list_recipes()]
    yaml_files = sorted(recipe.RECIPES_DIR.rglob("*.yaml"))
    texts = [p.read_text() for p in yaml_files]

    def render_pass(out: Path) -> None:
        for name in names:
            spec = recipe.load(name)
            preflight.preflight(spec, source=str(recipe.recipe_path(name)))
            render.write(render.render(spec), out / name)

    def baseline_pass() -> None:
        for text in texts:
            yaml.safe_load(text)

    with tempfile.TemporaryDirectory(prefix="buildctl-bench-") as tmp:
        out = Path(tmp)
        start = time.perf_counter()
        render_pass(out)  # cold: Jinja compiles the templates, pydantic warms up
        cold = time.perf_counter() - start
        warm, base = [], []
        for _ in range(args.passes):
            start = time.perf_counter()
            render_pass(out)
            warm.append(time.perf_counter() - start)
            start = time.perf_counter()
            baseline_pass()
            base.append(time.perf_counter() - start)

    med, best, worst = statistics.median(warm), min(warm), max(warm)
    base_med = statistics.median(base)
    print(f"bench/render.py: {len(names)} shipped recipes ({', '.join(names)})")
    print(f"  import buildctl          {import_s:8.3f} s (once per process, not in the pass)")
    print(f"  first pass (cold)        {cold:8.3f} s")
    print(f"  full pass, median of {args.passes:<3} {med:8.3f} s  (min {best:.3f}, max {worst:.3f}; "
          f"{med / len(names) * 1000:.1f} ms per recipe)")
    print(f"  baseline yaml.safe_load  {base_med:8.4f} s per pass over the same {len(yaml_files)} files")
    print(f"  ratio render/baseline    {med / base_med:8.1f}x")
    ok = cold < args.budget and med < args.budget
    print(f"{'PASS' if ok else 'FAIL'}: full pass {med:.3f} s (cold {cold:.3f} s) "
          f"{'<' if ok else '>='} budget {args.budget:.3f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
