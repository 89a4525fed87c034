#!/usr/bin/env python3
"""make bench (image part): hpc-image's full local bake + qemu verification from an empty
cache, the incremental re-bake after only the last step changes, and the EBS direct upload of
the baked disk (blocks sent / total, time) at several concurrency levels against the local
emulator. Writes bench/results/image.json; bench.py folds it into BENCHMARKS.md.

Needs root and the bake tools (`.ci/run` installs them). Not a test: nothing fails for being slow.

Usage: bench/image.py BIN_DIR [--rebakes N] [--concurrency 1,4,16]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import ROOT, Emulator, machine, summary, save_part  # noqa: E402

TEMPLATE = ROOT / "image-builder/templates/debian-slurm.pkr.hcl"


def run(bin_dir: Path, workdir: Path, args: list[str], env: dict | None = None) -> float:
    start = time.monotonic()
    proc = subprocess.run([str(bin_dir / "hpc-image"), *args], cwd=workdir, capture_output=True, text=True,
                          env={**os.environ, "HPC_NODE_BINARY": str(bin_dir / "hpc-node"), **(env or {})})
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"hpc-image {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")
    return elapsed


def upload_template(workdir: Path, concurrency: int, run_no: int) -> Path:
    path = workdir / f"upload-{concurrency}-{run_no}.pkr.hcl"
    path.write_text(f"""source "local" "debian" {{}}
build {{
  sources = ["source.local.debian"]
  component "munge" {{}}
}}
publish {{
  ami_name           = "bench-upload-c{concurrency}-r{run_no}"
  regions            = ["us-east-1"]
  upload_concurrency = {concurrency}
}}
""")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("bin_dir", type=Path)
    ap.add_argument("--rebakes", type=int, default=3)
    ap.add_argument("--uploads", type=int, default=3)
    ap.add_argument("--concurrency", default="1,4,16")
    args = ap.parse_args()
    bin_dir = args.bin_dir.resolve()
    if os.geteuid() != 0:
        sys.exit("the image benchmark bakes a real image: run it as root")
    workdir = Path("/var/tmp") / f"hpc-image-bench-{os.getpid()}"
    cache, out = workdir / "cache", workdir / "out"
    workdir.mkdir(parents=True)
    try:
        common = ["--output", str(out), "--cache-dir", str(cache)]
        full_s = run(bin_dir, workdir, ["build", str(TEMPLATE), *common, "-var", "motd=bench 0"])
        report = json.loads((out / "build-report.json").read_text())
        steps = {s["id"]: round(s["seconds"], 1) for s in report["steps"]}
        verify_s = round(report["verify"]["seconds"], 1)
        rebakes = []
        for i in range(args.rebakes):
            rebakes.append(run(bin_dir, workdir, ["build", str(TEMPLATE), *common, "-var", f"motd=bench {i + 1}",
                                                  "-var", "verify=false"]))
        rebake_report = json.loads((out / "build-report.json").read_text())
        disk = out / "disk.raw"
        emu = Emulator(workdir)
        env = {"AWS_ENDPOINT_URL": emu.url, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
               "AWS_EC2_METADATA_DISABLED": "true"}
        uploads = {}
        try:
            for c in [int(x) for x in args.concurrency.split(",")]:
                samples, manifest = [], {}
                for r in range(args.uploads):
                    t = upload_template(workdir, c, r)
                    mf = workdir / f"manifest-{c}-{r}.json"
                    run(bin_dir, workdir, ["publish", str(t), "--disk", str(disk), "--manifest", str(mf)], env)
                    manifest = json.loads(mf.read_text())["builds"][0]["upload"]
                    samples.append(manifest["seconds"])
                uploads[str(c)] = {**summary(samples), "blocks_uploaded": manifest["blocks_uploaded"],
                                   "blocks_total": manifest["blocks_total"],
                                   "mib_uploaded": manifest["bytes_uploaded"] >> 20}
        finally:
            emu.stop()
        results = {
            "machine": machine(),
            "full_bake_and_verify_s": round(full_s, 1),
            "verify_boot_s": verify_s,
            "accelerator": report["verify"]["accelerator"],
            "kvm_device": os.path.exists("/dev/kvm"),
            "step_seconds": steps,
            "rebake_last_step_s": summary(rebakes),
            "rebake_layers_reused": rebake_report["layers_reused"],
            "rebake_layers_built": rebake_report["layers_built"],
            "disk_bytes": report["disk_bytes"],
            "upload": uploads,
        }
        save_part("image", results)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
