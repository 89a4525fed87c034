#!/usr/bin/env python3
"""make bench (build part): what the project costs a developer to build and test. A cold
`cargo build --workspace` (debug) in an empty target directory, a warm rebuild after touching
one source file of the provider, and one `make test` from start to summary line. Writes
bench/results/build.json; bench.py folds it into BENCHMARKS.md.

Not a test: nothing fails for being slow. The cold build takes minutes on 2 cores.

Usage: bench/build.py [--runs N] [--skip-make-test]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import ROOT, machine, summary, save_part  # noqa: E402

TOUCHED = ROOT / "provider/src/lib.rs"


def cargo_build(target: Path) -> float:
    start = time.monotonic()
    proc = subprocess.run(["cargo", "build", "--workspace", "--quiet"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "CARGO_TARGET_DIR": str(target), "CARGO_TERM_COLOR": "never"})
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"cargo build failed:\n{proc.stderr[-4000:]}")
    return elapsed


def touch(path: Path) -> None:
    now = time.time()
    os.utime(path, (now, now))


def make_test() -> dict:
    """One `make test` with the usual (warm) target directory: wall time and its summary line."""
    start = time.monotonic()
    proc = subprocess.run(["make", "test"], cwd=ROOT, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    found = re.findall(r"summary: (\d+) passed, (\d+) failed", proc.stdout + proc.stderr)
    if proc.returncode != 0 or not found:
        sys.exit(f"make test failed; its tail:\n{(proc.stdout + proc.stderr)[-4000:]}")
    passed, failed = (int(n) for n in found[-1])
    return {"wall_s": round(elapsed, 1), "passed": passed, "failed": failed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3, help="warm rebuilds")
    ap.add_argument("--skip-make-test", action="store_true")
    args = ap.parse_args()
    target = Path(tempfile.mkdtemp(prefix="hpcforge-bench-build-"))
    try:
        cold = cargo_build(target)
        warm = []
        for _ in range(args.runs):
            touch(TOUCHED)
            warm.append(cargo_build(target))
        noop = cargo_build(target)
    finally:
        shutil.rmtree(target, ignore_errors=True)
    results = {
        "machine": machine(),
        "cold_build_s": round(cold, 1),
        "warm_build_after_touch_s": summary(warm),
        "touched": str(TOUCHED.relative_to(ROOT)),
        "noop_build_s": round(noop, 2),
    }
    if not args.skip_make_test:
        results["make_test"] = make_test()
    save_part("build", results)


if __name__ == "__main__":
    main()
