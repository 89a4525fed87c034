#!/usr/bin/env python3
"""make bench (boot part): the local EC2 of the emulator's boot mode. Launch → user data
started for 1 and for 8 concurrent instances (the user data prints the time it starts on the
console, read back with GetConsoleOutput), memory per booted instance, the machines the
default budget holds, and what the boot tests pay for their image (re-bake with every layer
cached, publish through the EBS direct APIs). Writes bench/results/boot.json; bench.py folds
it into BENCHMARKS.md.

Needs root and boot mode's packages (`.ci/run` installs them). Not a test: nothing fails for
being slow.

Usage: acceptance-tests/emulator/.venv/bin/python bench/boot.py BIN_DIR [--runs N]  (the emulator venv: boto3)
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "acceptance-tests" / "emulator"))
from bench import machine, save_part, summary  # noqa: E402

USER_DATA = "#!/bin/bash\necho \"HPCEMU-BENCH-START $(date +%s.%N)\" > /dev/console\n"
START = re.compile(r"HPCEMU-BENCH-START (\d+\.\d+)")


def mem_used_mib() -> float:
    info = dict(line.split(":", 1) for line in open("/proc/meminfo", encoding="utf-8"))
    kib = lambda key: int(info[key].split()[0])  # noqa: E731
    return (kib("MemTotal") - kib("MemAvailable")) / 1024


def launch_and_wait(vpc, image_id: str, group: str, count: int) -> tuple[list[float], float]:
    """Seconds from RunInstances to each instance's user data starting; memory used meanwhile."""
    before = mem_used_mib()
    sent = time.time()
    ids = vpc.launch([group], USER_DATA, count=count, image_id=image_id)
    started: dict[str, float] = {}
    deadline = time.monotonic() + 180
    while len(started) < count and time.monotonic() < deadline:
        for instance_id in ids:
            if instance_id not in started:
                found = START.search(vpc.console(instance_id))
                if found:
                    started[instance_id] = float(found.group(1)) - sent
        time.sleep(0.2)
    if len(started) < count:
        sys.exit(f"only {len(started)} of {count} instances started their user data within 180 s")
    time.sleep(5)  # settle: the boot's last units
    per_instance = (mem_used_mib() - before) / count
    vpc.ec2.terminate_instances(InstanceIds=ids)
    for instance_id in ids:
        vpc.wait_state(instance_id, "terminated", timeout=90)
    return sorted(started.values()), per_instance


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("bin_dir", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("the boot benchmark boots machines: run it as root")
    os.environ["HPCFORGE_BIN_DIR"] = str(args.bin_dir.resolve())
    import boot_harness as bh
    from machines import default_budget

    bh.require_boot_prerequisites()
    work = Path(tempfile.mkdtemp(prefix="hpcemu-bench-", dir="/var/tmp"))
    disk = bh.bake_image()
    rebake_start = time.monotonic()
    os.utime(bh.TEMPLATE)  # every layer stays cached (the template's text is unchanged); the disk is rewritten
    disk = bh.bake_image()
    rebake_s = time.monotonic() - rebake_start
    process, endpoint = bh.start_emulator(work / "port", 10, work / "state")
    try:
        publish_start = time.monotonic()
        image_id = bh.publish_image(endpoint, disk, work)
        publish_s = time.monotonic() - publish_start
        vpc = bh.Vpc(endpoint, "10.79.0.0/16", work)
        group = vpc.group("bench", [])
        single, eight, memory = [], [], []
        for _ in range(args.runs):
            starts, _mem = launch_and_wait(vpc, image_id, group, 1)
            single += starts
            starts, per_instance = launch_and_wait(vpc, image_id, group, 8)
            eight += starts
            memory.append(per_instance)
    finally:
        bh.stop_emulator(process)
    results = {
        "machine": machine(),
        "launch_to_user_data_1_s": summary(single),
        "launch_to_user_data_8_median_s": summary([statistics.median(eight[i:i + 8]) for i in range(0, len(eight), 8)]),
        "launch_to_user_data_8_last_s": summary([max(eight[i:i + 8]) for i in range(0, len(eight), 8)]),
        "memory_per_instance_mib": summary(memory),
        "default_budget": default_budget(),
        "rebake_cached_s": round(rebake_s, 1),
        "publish_s": round(publish_s, 1),
    }
    save_part("boot", results)


if __name__ == "__main__":
    main()
