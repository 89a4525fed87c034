#!/usr/bin/env python3
"""Stands in for terraform-provider-hpc during benchmarks: runs the real provider as a child,
passing stdio through, and appends the child's peak RSS (KiB) to $HPC_BENCH_RSS_LOG when it
exits. Terraform talks to the child directly over the handshake address."""
import os
import resource
import subprocess
import sys

real = os.environ["HPC_BENCH_REAL_PROVIDER"]
proc = subprocess.run([real, *sys.argv[1:]])
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
with open(os.environ["HPC_BENCH_RSS_LOG"], "a", encoding="utf-8") as log:
    log.write(f"{peak_kib}\n")
sys.exit(proc.returncode)
