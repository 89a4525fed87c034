#!/usr/bin/env python3
"""make bench: measures the provider against its anchors and writes bench/results/*.json and
BENCHMARKS.md. Medians of several runs; the machine and commit are recorded. Nothing here is
a pass/fail test.

Usage: bench/bench.py PROVIDER_DIR [--runs N] [--resources N]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
COOKIE = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2"


def summary(samples: list[float]) -> dict:
    return {
        "median": round(statistics.median(samples), 4),
        "min": round(min(samples), 4),
        "max": round(max(samples), 4),
        "runs": len(samples),
    }


class Emulator:
    def __init__(self, workdir: Path):
        port_file = workdir / "emulator.port"
        self.proc = subprocess.Popen(
            [str(ROOT / "acceptance-tests/emulator/serve"), "--port", "0", "--port-file", str(port_file),
             "--fsx-create-delay", "0.2", "--fsx-update-delay", "0.2", "--fsx-delete-delay", "0.2"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit("the emulator did not start (run `make emulator-venv`)")
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{port_file.read_text().strip()}"

    def control(self, method: str, path: str) -> dict:
        req = urllib.request.Request(self.url + path, method=method, data=b"{}" if method == "POST" else None)
        with urllib.request.urlopen(req) as resp:
            return json.loads(resp.read() or b"{}")

    def subnet(self) -> str:
        req = urllib.request.Request(
            self.url + "/", data=b"Action=DescribeSubnets&Version=2016-11-15", method="POST",
            headers={"Authorization": "AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/ec2/aws4_request, "
                                      "SignedHeaders=host, Signature=0"})
        body = urllib.request.urlopen(req).read().decode()
        start = body.index("subnet-")
        return body[start:start + 24].split("<")[0]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def provider_startup(binary: Path, runs: int) -> dict:
    """Process start until the handshake line is on stdout (the provider is serving)."""
    samples = []
    env = {**os.environ, "TF_PLUGIN_MAGIC_COOKIE": COOKIE, "PLUGIN_PROTOCOL_VERSIONS": "6"}
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.Popen([str(binary)], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = proc.stdout.readline() if proc.stdout else b""
        samples.append(time.perf_counter() - t0)
        proc.kill()
        proc.wait()
        if not line.startswith(b"1|6|tcp|"):
            sys.exit(f"unexpected handshake: {line!r}")
    return summary(samples)


def h2_frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def hpack_literal(name: str, value: str) -> bytes:
    """A header as an HPACK literal without indexing (no Huffman); names and values < 127 bytes."""
    n, v = name.encode(), value.encode()
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def schema_served(binary: Path, runs: int) -> dict:
    """Process start until the answer to GetProviderSchema arrives: the handshake, then one gRPC
    call over plaintext HTTP/2 (what Terraform does first), spoken here by hand."""
    import socket

    samples = []
    env = {**os.environ, "TF_PLUGIN_MAGIC_COOKIE": COOKIE, "PLUGIN_PROTOCOL_VERSIONS": "6"}
    env.pop("PLUGIN_CLIENT_CERT", None)
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.Popen([str(binary)], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            line = (proc.stdout.readline() if proc.stdout else b"").decode()
            parts = line.strip().split("|")
            if len(parts) < 5 or parts[2] != "tcp" or (len(parts) > 5 and parts[5]):
                sys.exit(f"unexpected handshake (plaintext tcp expected): {line!r}")
            host, port = parts[3].rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                headers = b"".join(hpack_literal(k, v) for k, v in [
                    (":method", "POST"), (":scheme", "http"), (":path", "/tfplugin6.Provider/GetProviderSchema"),
                    (":authority", parts[3]), ("content-type", "application/grpc"), ("te", "trailers")])
                sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, b"")
                             + h2_frame(1, 0x4, 1, headers) + h2_frame(0, 0x1, 1, b"\x00" * 5))
                buf, data, done = b"", b"", False
                while not done:
                    chunk = sock.recv(65536)
                    if not chunk:
                        sys.exit("the provider closed the connection before answering GetProviderSchema")
                    buf += chunk
                    while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                        length, kind, flags = int.from_bytes(buf[:3], "big"), buf[3], buf[4]
                        stream = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                        if kind == 4 and not flags & 1:  # the server's settings: acknowledge
                            sock.sendall(h2_frame(4, 1, 0, b""))
                        if kind == 0 and stream == 1:
                            data += buf[9:9 + length]
                        if stream == 1 and flags & 1:  # END_STREAM: the trailers, the call is over
                            done = True
                        buf = buf[9 + length:]
            samples.append(time.perf_counter() - t0)
            if b"hpc_partition" not in data:
                sys.exit(f"GetProviderSchema answered without the schema ({len(data)} bytes)")
        finally:
            proc.kill()
            proc.wait()
    return summary(samples)


def terraform(workdir: Path, env: dict, *args: str) -> float:
    t0 = time.perf_counter()
    out = subprocess.run(["terraform", *args], cwd=workdir, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if out.returncode not in (0, 2):
        sys.exit(f"terraform {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return elapsed


def plan_many(provider_dir: Path, count: int, runs: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="hpcforge-bench-"))
    emu = Emulator(work)
    try:
        wrapper_dir = work / "wrapped"
        wrapper_dir.mkdir()
        shutil.copy(ROOT / "bench/rss_wrapper.py", wrapper_dir / "terraform-provider-hpc")
        rss_log = work / "rss.log"
        env = {
            **os.environ,
            "TF_CLI_CONFIG_FILE": str(work / "cli.tfrc"),
            "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1",
            "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_ENDPOINT_URL": emu.url, "AWS_EC2_METADATA_DISABLED": "true",
            "HPC_BENCH_REAL_PROVIDER": str(provider_dir / "terraform-provider-hpc"),
            "HPC_BENCH_RSS_LOG": str(rss_log),
        }

        def use(directory: Path) -> None:
            (work / "cli.tfrc").write_text(
                f'provider_installation {{\n  dev_overrides {{ "hpcforge/hpc" = "{directory}" }}\n  direct {{}}\n}}\n')

        subnet = emu.subnet()
        (work / "main.tf").write_text(
            'terraform {\n  required_providers {\n    hpc = { source = "hpcforge/hpc" }\n  }\n}\n'
            'provider "hpc" {\n  region = "us-east-1"\n}\n'
            f'resource "hpc_lustre_fs" "fs" {{\n  count            = {count}\n  storage_capacity = 1200\n'
            f'  deployment_type  = "SCRATCH_2"\n  subnet_ids       = ["{subnet}"]\n}}\n')
        use(provider_dir)
        apply_s = terraform(work, env, "apply", "-auto-approve", "-input=false", "-parallelism=10")
        result = {"resources": count, "apply_parallelism_10_s": round(apply_s, 2)}
        for parallelism in (1, 10):
            samples = []
            calls = None
            for _ in range(runs):
                emu.control("POST", "/_emulator/calls/reset")
                samples.append(terraform(work, env, "plan", "-input=false", "-detailed-exitcode",
                                         f"-parallelism={parallelism}"))
                calls = emu.control("GET", "/_emulator/calls")["calls"]
            total = sum(calls.values()) if calls else 0
            result[f"plan_parallelism_{parallelism}"] = {
                **summary(samples),
                "aws_calls": total,
                "aws_calls_per_resource": round(total / count, 3),
            }
        # Peak RSS per provider process during a plan (through the wrapper).
        use(wrapper_dir)
        rss_log.write_text("")
        terraform(work, env, "plan", "-input=false", "-detailed-exitcode", "-parallelism=10")
        peaks = [int(x) for x in rss_log.read_text().split()]
        result["provider_processes_per_plan"] = len(peaks)
        result["provider_peak_rss_mib"] = round(max(peaks) / 1024, 1) if peaks else None
        use(provider_dir)
        destroy_s = terraform(work, env, "destroy", "-auto-approve", "-input=false", "-parallelism=10")
        result["destroy_parallelism_10_s"] = round(destroy_s, 2)
        return result
    finally:
        emu.stop()
        shutil.rmtree(work, ignore_errors=True)


def plan_clusters(provider_dir: Path, clusters: int, partitions: int, runs: int) -> dict:
    """Plan+refresh of `clusters` hpc_cluster with `partitions` hpc_partition each."""
    work = Path(tempfile.mkdtemp(prefix="hpcforge-bench-cl-"))
    emu = Emulator(work)
    try:
        (work / "cli.tfrc").write_text(
            f'provider_installation {{\n  dev_overrides {{ "hpcforge/hpc" = "{provider_dir}" }}\n  direct {{}}\n}}\n')
        env = {**os.environ, "TF_CLI_CONFIG_FILE": str(work / "cli.tfrc"), "CHECKPOINT_DISABLE": "1",
               "TF_IN_AUTOMATION": "1", "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
               "AWS_ENDPOINT_URL": emu.url, "AWS_EC2_METADATA_DISABLED": "true"}
        subnet = emu.subnet()
        (work / "main.tf").write_text(f"""
terraform {{
  required_providers {{
    hpc = {{ source = "hpcforge/hpc" }}
  }}
}}
provider "hpc" {{
  region = "us-east-1"
}}
resource "hpc_cluster" "c" {{
  count     = {clusters}
  name      = "bench-${{count.index}}"
  subnet_id = "{subnet}"
  wait_for_ready = false
  head_node {{
    ami_id = "ami-03cf127a"
  }}
}}
resource "hpc_partition" "p" {{
  count          = {clusters * partitions}
  cluster_id     = hpc_cluster.c[floor(count.index / {partitions})].id
  name           = "p${{count.index % {partitions}}}"
  instance_types = ["c7i.2xlarge"]
  max_nodes      = 4
  ami_id         = "ami-03cf127a"
  wait_for_apply = false
  capacity_pool {{
    subnet_ids = ["{subnet}"]
  }}
}}
""")
        resources = clusters * (partitions + 1)
        apply_s = terraform(work, env, "apply", "-auto-approve", "-input=false", "-parallelism=10")
        result = {"clusters": clusters, "partitions_per_cluster": partitions, "resources": resources,
                  "apply_parallelism_10_s": round(apply_s, 2)}
        for parallelism in (1, 10):
            samples, calls = [], {}
            for _ in range(runs):
                emu.control("POST", "/_emulator/calls/reset")
                samples.append(terraform(work, env, "plan", "-input=false", "-detailed-exitcode",
                                         f"-parallelism={parallelism}"))
                calls = emu.control("GET", "/_emulator/calls")["calls"]
            total = sum(calls.values())
            result[f"plan_parallelism_{parallelism}"] = {**summary(samples), "aws_calls": total,
                                                          "aws_calls_per_resource": round(total / resources, 3),
                                                          "calls_by_action": dict(sorted(calls.items()))}
        terraform(work, env, "destroy", "-auto-approve", "-input=false", "-parallelism=10")
        return result
    finally:
        emu.stop()
        shutil.rmtree(work, ignore_errors=True)


def quickstart_apply(provider_dir: Path, runs: int) -> dict:
    """Apply (and destroy) examples/quickstart against a fresh emulator: wall time and AWS calls."""
    samples, destroys, calls = [], [], {}
    for _ in range(runs):
        work = Path(tempfile.mkdtemp(prefix="hpcforge-bench-qs-"))
        emu = Emulator(work)
        try:
            shutil.copytree(ROOT / "examples/quickstart", work / "qs")
            (work / "cli.tfrc").write_text(
                f'provider_installation {{\n  dev_overrides {{ "hpcforge/hpc" = "{provider_dir}" }}\n  direct {{}}\n}}\n')
            env = {**os.environ, "TF_CLI_CONFIG_FILE": str(work / "cli.tfrc"), "CHECKPOINT_DISABLE": "1",
                   "TF_IN_AUTOMATION": "1", "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                   "AWS_ENDPOINT_URL": emu.url, "AWS_EC2_METADATA_DISABLED": "true"}
            # No instance boots in the emulator's API-only mode: nothing to wait for.
            samples.append(terraform(work / "qs", env, "apply", "-auto-approve", "-input=false",
                                     "-var", "ami_id=ami-03cf127a", "-var", "wait_for_ready=false"))
            calls = emu.control("GET", "/_emulator/calls")["calls"]
            destroys.append(terraform(work / "qs", env, "destroy", "-auto-approve", "-input=false",
                                      "-var", "ami_id=ami-03cf127a", "-var", "wait_for_ready=false"))
        finally:
            emu.stop()
            shutil.rmtree(work, ignore_errors=True)
    mutating = {k: v for k, v in calls.items()
                if not k.split(":")[-1].startswith(("Describe", "List", "Get"))}
    return {**summary(samples), "destroy": summary(destroys), "aws_calls": sum(calls.values()),
            "mutating_calls": sum(mutating.values()), "resources": 5}


def aws_call(emu: Emulator, service: str, target: str | None, body: str) -> str:
    """A raw call to the emulator (query protocol when target is None, else JSON 1.1)."""
    headers = {"Authorization": f"AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/{service}/aws4_request, "
                                 "SignedHeaders=host, Signature=0"}
    if target:
        headers["X-Amz-Target"] = target
        headers["Content-Type"] = "application/x-amz-json-1.1"
    req = urllib.request.Request(emu.url + "/", data=body.encode(), method="POST", headers=headers)
    return urllib.request.urlopen(req).read().decode()


def resume_many(bin_dir: Path, count: int, ice: bool = True) -> dict:
    """hpc-node resume of `count` nodes across 4 pools (zones); with `ice`, the first has no capacity."""
    work = Path(tempfile.mkdtemp(prefix="hpcforge-bench-resume-"))
    emu = Emulator(work)
    try:
        subnets = {}
        for item in aws_call(emu, "ec2", None, "Action=DescribeSubnets&Version=2016-11-15").split("<item>"):
            if "<availabilityZone>" in item and "<subnetId>" in item:
                zone = item.split("<availabilityZone>")[1].split("<")[0]
                subnets.setdefault(zone, item.split("<subnetId>")[1].split("<")[0])
        zones = sorted(subnets)[:4]
        lt = aws_call(emu, "ec2", None, "Action=CreateLaunchTemplate&Version=2016-11-15&LaunchTemplateName=bench"
                      "&LaunchTemplateData.ImageId=ami-03cf127a&LaunchTemplateData.InstanceType=c7i.2xlarge")
        lt_id = lt.split("<launchTemplateId>")[1].split("<")[0]
        doc = {
            "schema": 1, "cluster": "bench", "name": "cpu",
            "shapes": [{"instance_type": "c7i.2xlarge", "vcpus": 8, "cores": 4, "threads_per_core": 2,
                        "memory_mib": 16384, "gpus": 0, "gpu_model": None, "gpu_memory_mib": None, "efa": False}],
            "min_nodes": 0, "max_nodes": count,
            "pools": [{"region": "us-east-1", "subnet_ids": [subnets[z]], "capacity_type": "on_demand",
                       "capacity_reservation_id": None, "launch_templates": {"c7i.2xlarge": lt_id},
                       "placement_group": None} for z in zones],
            "allocation_strategy": "prioritized", "provision_timeout_s": 600, "ice_cooldown_s": 600,
            "max_time": None, "default_time": None, "max_nodes_per_job": None, "min_nodes_per_job": None,
            "allow_accounts": [], "allow_groups": [], "allow_qos": [], "priority_tier": None,
            "oversubscribe": None, "exclusive": False, "default": False, "extra": {}, "ami_id": "ami-03cf127a",
            "root_volume_size": 100, "instance_profile_arn": None, "user_data_extra": None, "tags": {},
        }
        aws_call(emu, "ssm", "AmazonSSM.PutParameter", json.dumps({
            "Name": "/hpcforge/clusters/bench/partitions/cpu", "Value": json.dumps(doc), "Type": "String",
            "Tier": "Advanced", "Overwrite": True}))
        if ice:
            req = urllib.request.Request(emu.url + "/_emulator/faults", method="POST", data=json.dumps({
                "service": "ec2", "action": "CreateFleet", "code": "InsufficientInstanceCapacity",
                "match": {"AvailabilityZone": zones[0]}}).encode())
            urllib.request.urlopen(req)
        emu.control("POST", "/_emulator/calls/reset")
        # Slurm is told the nodes' addresses with `scontrol update`; a stand-in on PATH notes
        # when that happens (the dispatch: from then on Slurm can reach the nodes as they boot).
        fake_bin = work / "bin"
        fake_bin.mkdir()
        told = work / "scontrol.times"
        (fake_bin / "scontrol").write_text(
            f'#!/bin/sh\ncase "$*" in *nodeaddr=*) date +%s.%N >> "{told}" ;; esac\n')
        (fake_bin / "scontrol").chmod(0o755)
        env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
               "AWS_ENDPOINT_URL": emu.url, "PATH": f"{fake_bin}:" + os.environ.get("PATH", "")}
        start_wall = time.time()
        t0 = time.perf_counter()
        out = subprocess.run([str(bin_dir / "hpc-node"), "resume", f"cpu-c7i-2xl-[1-{count}]", "--cluster", "bench",
                              "--region", "us-east-1", "--state-dir", str(work / "agent")],
                             env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - t0
        if out.returncode != 0:
            sys.exit(f"hpc-node resume failed:\n{out.stderr}")
        report = emu.control("GET", "/_emulator/calls")
        calls = report["calls"]
        fleet_lines = [l for l in out.stderr.splitlines() if " pool " in l]
        told_at = [float(t) for t in told.read_text().split()] if told.exists() else []
        if not told_at:
            sys.exit(f"hpc-node resume never told Slurm the addresses:\n{out.stderr}")
        return {
            "nodes": count,
            "pools": len(zones),
            "dispatch_s": round(max(told_at) - start_wall, 2),
            # The wall time the emulator had calls in flight (overlapping calls count once):
            # moto building 1,000 instances is not hpc-node's time.
            "emulator_dispatch_s": round(report.get("busy_s", 0.0), 2),
            "wall_s": round(elapsed, 2),
            "aws_calls": sum(calls.values()),
            "create_fleet_calls": calls.get("ec2:CreateFleet", 0),
            "create_tags_calls": calls.get("ec2:CreateTags", 0),
            "describe_instances_calls": calls.get("ec2:DescribeInstances", 0),
            "pools_report": fleet_lines,
        }
    finally:
        emu.stop()
        shutil.rmtree(work, ignore_errors=True)


def resume_median(bin_dir: Path, count: int, ice: bool, runs: int) -> dict:
    """resume_many `runs` times (a fresh emulator each); the median run, with all wall times."""
    results = sorted((resume_many(bin_dir, count, ice) for _ in range(runs)), key=lambda r: r["dispatch_s"])
    median = results[len(results) // 2]
    median["dispatch_s_runs"] = [r["dispatch_s"] for r in results]
    median["wall_s_runs"] = sorted(r["wall_s"] for r in results)
    return median


def machine() -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    tf = subprocess.run(["terraform", "version"], capture_output=True, text=True).stdout.splitlines()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit.stdout.strip(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "terraform": tf[0] if tf else "",
    }


PLOTS = RESULTS / "plots"


def save_part(name: str, results: dict) -> None:
    """Writes bench/results/<name>.json for one part of make bench and regenerates BENCHMARKS.md
    (when the provider part, which heads it, has been measured)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    provider = RESULTS / "provider.json"
    if provider.exists():
        write_markdown(json.loads(provider.read_text()))
    print(json.dumps(results, indent=2))


def plot(name: str, title: str, unit: str, bars: list, goal=None, log: bool = False) -> str:
    """Draws bench/results/plots/<name>.svg and returns the markdown that shows it."""
    from plots import bar_chart

    bar_chart(PLOTS / f"{name}.svg", title, unit, bars, goal, log)
    return f"![{title}](bench/results/plots/{name}.svg)"


def row(measure: str, r: dict | float, anchor: str = "", runs: str | None = None) -> str:
    """A table row: a summary dict (median/min/max/runs) or a single figure."""
    if isinstance(r, dict):
        return f"| {measure} | {r['median']} | {r['min']} | {r['max']} | {runs or r['runs']} | {anchor} |"
    return f"| {measure} | {r} | | | {runs or 1} | {anchor} |"


HEADER = ["| measure | median | min | max | runs | anchor or goal (source) |", "| --- | --- | --- | --- | --- | --- |"]


def write_markdown(results: dict) -> None:
    m = results["machine"]
    s = results["provider_startup_s"]
    p = results["plan"]
    c = results["plan_clusters"]
    lines = [
        "# Benchmarks",
        "",
        f"Generated by `make bench` on {m['date']} at commit `{m['commit']}` ({m['cpus']} CPUs, {m['platform']}, "
        f"{m['terraform']}). Medians of several runs on a shared 2-core machine; the AWS side is the local "
        "emulator, so times measure hpcforge and Terraform, not AWS. Call counts are the emulator's counters. "
        "Nothing here is a test: nothing fails for being slow.",
        "",
        "## Provider: plans, refreshes, memory",
        "",
        *HEADER,
        row("provider start → serving (handshake printed) (s)", s),
        *([row("provider start → GetProviderSchema answered (s)", results["schema_served_s"])]
          if "schema_served_s" in results else []),
    ]
    for par in (1, 10):
        r = p[f"plan_parallelism_{par}"]
        lines += [
            row(f"plan+refresh of {p['resources']} hpc_lustre_fs, -parallelism={par} (s)", r,
                "tf-provider crate without TCP_NODELAY: 7-11 s for 100 at -parallelism=1 (DESIGN.md §2)"),
            row("AWS calls per resource on that plan", r["aws_calls_per_resource"], "goal ≤ 0.2 (issue 7)", "-"),
        ]
    for par in (1, 10):
        r = c[f"plan_parallelism_{par}"]
        lines += [
            row(f"plan+refresh of {c['clusters']} clusters × {c['partitions_per_cluster']} partitions "
                f"({c['resources']} resources), -parallelism={par} (s)", r),
            row("AWS calls per resource on that plan", r["aws_calls_per_resource"], "goal ≤ 0.2 (issue 7)", "-"),
        ]
    by_action = c["plan_parallelism_1"].get("calls_by_action", {})
    lines += [
        row("provider peak RSS per process during a plan (MiB)", p["provider_peak_rss_mib"],
            "hashicorp/aws ~210 MB per process (hashicorp/terraform-provider-aws#29631); goal ≤ 15 MB (issue 7)",
            f"{p['provider_processes_per_plan']} processes"),
        row(f"apply of {p['resources']} file systems, -parallelism=10 (s)", p["apply_parallelism_10_s"]),
        row(f"destroy of {p['resources']} file systems, -parallelism=10 (s)", p["destroy_parallelism_10_s"]),
        "",
        "The calls of the clusters × partitions plan at -parallelism=1: "
        + ", ".join(f"{k} {v}" for k, v in by_action.items()) + ".",
        "",
        plot("calls-per-resource", "AWS calls per resource on a plan", "calls",
             [(f"{p['resources']} Lustre, -parallelism=1", p["plan_parallelism_1"]["aws_calls_per_resource"]),
              (f"{p['resources']} Lustre, -parallelism=10", p["plan_parallelism_10"]["aws_calls_per_resource"]),
              (f"{c['resources']} clusters+partitions, -p=1", c["plan_parallelism_1"]["aws_calls_per_resource"]),
              (f"{c['resources']} clusters+partitions, -p=10", c["plan_parallelism_10"]["aws_calls_per_resource"])],
             ("goal 0.2", 0.2)),
        "",
        plot("provider-rss", "Peak RSS per provider process during a plan", "MiB",
             [("terraform-provider-hpc", p["provider_peak_rss_mib"]), ("hashicorp/aws (#29631)", 210)],
             ("goal 15 MiB", 15), log=True),
        "",
    ]
    r, w = results["resume"], results["resume_without_ice"]
    lines += [
        "## hpc-node: resume (Slurm's ResumeProgram)",
        "",
        (f"Measured again on {r['measured']['date']} at commit `{r['measured']['commit']}` by "
         "`make bench-resume`. " if "measured" in r else "") +
        f"{r['nodes']} nodes of one partition across {r['pools']} pools (zones). *Dispatch* is the time from the "
        "start of `hpc-node resume` until Slurm is told every node's address (a stand-in `scontrol` on PATH notes "
        "when): the fleet requests are answered and the instances are booting. *Exit* is the program's end: which "
        "instance carries which node is kept in the agent's node map (one file write), not in a tag per instance.",
        "",
        *HEADER,
        row("dispatch, first pool without capacity (s)",
            {"median": r["dispatch_s"], "min": min(r["dispatch_s_runs"]), "max": max(r["dispatch_s_runs"]),
             "runs": len(r["dispatch_s_runs"])}, "goal ≤ 2 s (issue 7)"),
        row("of which the emulator answering (wall time with a call in flight: moto building and describing the instances) (s)", r["emulator_dispatch_s"], "", "-"),
        row("hpc-node's own time in that dispatch (s)", round(r["dispatch_s"] - r["emulator_dispatch_s"], 2),
            "goal ≤ 1 s (issue 17)", "-"),
        row("dispatch, capacity in the first pool (s)",
            {"median": w["dispatch_s"], "min": min(w["dispatch_s_runs"]), "max": max(w["dispatch_s_runs"]),
             "runs": len(w["dispatch_s_runs"])}),
        row("time the no-capacity answer added (difference of medians; noise when ≤ 0) (s)",
            r["failover_added_s"], "goal ≤ 1 s added (issue 7)", "-"),
        row("exit, first pool without capacity (s)",
            {"median": statistics.median(r["wall_s_runs"]), "min": min(r["wall_s_runs"]),
             "max": max(r["wall_s_runs"]), "runs": len(r["wall_s_runs"])}),
        row("CreateFleet / DescribeInstances / CreateTags calls",
            f"{r['create_fleet_calls']} / {r['describe_instances_calls']} / {r['create_tags_calls']}", "", "-"),
        row("AWS calls per node", round(r.get("aws_calls", 0) / r["nodes"], 4), "goal ≤ 0.01 (issue 17)", "-"),
        "",
        plot("resume", f"hpc-node resume of {r['nodes']} nodes", "s",
             [("dispatch, first pool no capacity", r["dispatch_s"]),
             ("  of which hpc-node's own", round(r["dispatch_s"] - r["emulator_dispatch_s"], 2)),
             ("dispatch, capacity", w["dispatch_s"]),
              ("exit", statistics.median(r["wall_s_runs"]))], ("goal 2 s", 2)),
        "",
    ]
    q = results["quickstart_apply"]
    lines += [
        "## examples/quickstart",
        "",
        *HEADER,
        row("apply (network, Lustre, cluster, 2 partitions) (s)", q,
            f"{q['aws_calls']} AWS calls, {q['mutating_calls']} of them changes"),
        row("destroy (s)", q["destroy"]),
        "",
        "Raw numbers: [bench/results/provider.json](bench/results/provider.json).",
        "",
    ]
    lines += image_markdown()
    lines += boot_markdown()
    lines += cluster_markdown()
    lines += build_markdown()
    (ROOT / "BENCHMARKS.md").write_text("\n".join(lines))


def build_markdown() -> list[str]:
    """The build economy table, from bench/results/build.json (bench/build.py) when it exists."""
    path = RESULTS / "build.json"
    if not path.exists():
        return []
    b = json.loads(path.read_text())
    m = b["machine"]
    lines = [
        "## Build economy",
        "",
        f"Measured on {m['date']} at commit `{m['commit']}` ({m['cpus']} CPUs) by `bench/build.py`: debug builds "
        "of the whole workspace (the provider, hpc-node, hpc-image and their libraries; test binaries are "
        "built by `make test`) in an empty target directory.",
        "",
        *HEADER,
        row("cold `cargo build --workspace` (s)", b["cold_build_s"],
            "a crate with aws-config + ec2 + fsx alone: 210-300 s cold (DESIGN.md §4)"),
        row(f"warm rebuild after touching {b['touched']} (s)", b["warm_build_after_touch_s"]),
        row("no-op rebuild (s)", b["noop_build_s"]),
    ]
    bars = [("cold build", b["cold_build_s"]), ("warm rebuild", b["warm_build_after_touch_s"]["median"])]
    if "make_test" in b:
        t = b["make_test"]
        lines.append(row(f"`make test`, warm target ({t['passed']} passed, {t['failed']} failed) (s)", t["wall_s"],
                         "CI budget ~40 min (the brief)"))
        bars.append(("make test", t["wall_s"]))
    lines += ["", plot("build", "Build and test (2 cores)", "s", bars), "",
              "Raw numbers: [bench/results/build.json](bench/results/build.json).", ""]
    return lines


def boot_markdown() -> list[str]:
    """The local EC2 table, from bench/results/boot.json (bench/boot.py) when it exists."""
    path = RESULTS / "boot.json"
    if not path.exists():
        return []
    r = json.loads(path.read_text())
    m = r["machine"]

    def stat(label: str, s: dict, anchor: str = "") -> str:
        return f"| {label} | {s['median']} | {s['min']} | {s['max']} | {s['runs']} | {anchor} |"

    one, eight_median, eight_last = r["launch_to_user_data_1_s"], r["launch_to_user_data_8_median_s"], r[
        "launch_to_user_data_8_last_s"]
    return [
        "## Local EC2 (the emulator's boot mode)",
        "",
        f"Measured on {m['date']} at commit `{m['commit']}` ({m['cpus']} CPUs). Instances of the image baked from "
        "`image-builder/templates/debian-slurm.pkr.hcl`, booted by systemd-nspawn; *user data started* is the "
        "time the user data printed on the console, from the RunInstances call.",
        "",
        "| measure | median | min | max | runs | anchor |",
        "| --- | --- | --- | --- | --- | --- |",
        stat("launch → user data started, 1 instance (s)", one, "qemu/TCG: user data at +48-54 s (DESIGN.md §8)"),
        stat("launch → user data started, 8 at once: median instance (s)", eight_median),
        stat("launch → user data started, 8 at once: last instance (s)", eight_last),
        stat("memory per booted instance (MiB, host memory used / instances)", r["memory_per_instance_mib"],
             "qemu/TCG: ~367 MB RSS per VM at -m 512 (DESIGN.md §8)"),
        f"| machines the default budget holds | {r['default_budget']} | | | - | memory / 384 MiB, at most 64 |",
        f"| the boot tests' image: re-bake with every layer cached (s) | {r['rebake_cached_s']} | | | 1 | "
        "skipped while no input is newer than the disk |",
        f"| the boot tests' image: hpc-image publish to the emulator (s) | {r['publish_s']} | | | 1 | debug build, as the tests run it (the release upload: see hpc-image above) |",
        "",
        plot("boot-launch", "Launch to user data started", "s",
             [("1 instance", one["median"]), ("8 at once, median", eight_median["median"]),
              ("8 at once, last", eight_last["median"]), ("qemu/TCG (DESIGN.md §8)", 51)]),
        "",
        "Raw numbers: [bench/results/boot.json](bench/results/boot.json).",
        "",
    ]


def cluster_markdown() -> list[str]:
    """The booted cluster's start-up, from bench/results/cluster.json (bench/cluster.py)."""
    path = RESULTS / "cluster.json"
    if not path.exists():
        return []
    r = json.loads(path.read_text())
    m = r["machine"]

    def stat(label: str, key: str, anchor: str = "") -> str:
        s = r[key]
        return f"| {label} | {s['median']:.1f} | {s['min']:.1f} | {s['max']:.1f} | {s['runs']} | {anchor} |"

    return [
        "## A booted cluster's start-up (make demo on the local EC2)",
        "",
        f"Measured on {m['date']} at commit `{m['commit']}` ({m['cpus']} CPUs), debug build (as the booted tests bake it), through "
        "`make demo`: examples/quickstart applied by terraform on the emulator's local EC2, then the demo "
        "user's job on the cold CPU partition. *Boot* is launch → hpc-node starting (the machine's systemd "
        "and cloud-init); *init* is hpc-node's own work, from the machines' journals.",
        "",
        "| measure (s) | median | min | max | runs | anchor |",
        "| --- | --- | --- | --- | --- | --- |",
        stat("head node: boot (launch → head-init)", "head_boot_s"),
        stat("head node: init (head-init → ready: munge, users, MariaDB, slurmdbd, slurmctld)", "head_init_s"),
        stat("compute node: boot (launch → node-init)", "node_boot_s"),
        stat("compute node: init (node-init → slurmd started)", "node_init_s", "goal: 10 s or less"),
        stat("compute node: slurmd started → the job starts on it", "node_slurmd_to_job_start_s"),
        stat("sbatch → running, cold partition", "sbatch_to_running_s",
             "ParallelCluster on AWS: 294 s median submit → start"),
        stat("terraform apply (both applies of the demo)", "apply_s"),
        stat("make demo, image baked (everything but the build)", "demo_s", "README: about 80 s"),
        *[
            stat(label, key, anchor)
            for label, key, anchor in (
                ("head node lost outside Terraform: the next terraform apply", "head_replacement_apply_s", ""),
                ("head node lost: apply start → the cluster schedules again (squeue, sacct)",
                 "head_replacement_to_scheduling_s",
                 "ParallelCluster: head node AMI immutable (aws-parallelcluster#3292)"),
                ("head node lost: accounted jobs lost (count)", "head_replacement_jobs_lost", "goal: 0"),
            )
            if key in r
        ],
        "",
        "Raw numbers: [bench/results/cluster.json](bench/results/cluster.json).",
        "",
    ]


def image_markdown() -> list[str]:
    """The hpc-image table, from bench/results/image.json (bench/image.py) when it exists."""
    path = RESULTS / "image.json"
    if not path.exists():
        return []
    r = json.loads(path.read_text())
    m = r["machine"]
    rb = r["rebake_last_step_s"]
    lines = [
        "## hpc-image",
        "",
        f"Measured on {m['date']} at commit `{m['commit']}` ({m['cpus']} CPUs). A Debian 12 image with munge, slurm, "
        f"efa (distro), hpc-node and health-checks from `image-builder/templates/debian-slurm.pkr.hcl`, "
        f"{r['disk_bytes'] >> 30} GiB disk; verification boots it under qemu ({r['accelerator']}) and runs every check.",
        "",
        "| measure | median | min | max | runs | anchor |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| full bake + verify from an empty cache (s) | {r['full_bake_and_verify_s']} | | | 1 | "
        "`pcluster build-image` / EC2 Image Builder: about an hour for a GPU image (issue 4) |",
        f"| of which the qemu boot and checks (s) | {r['verify_boot_s']} | | | 1 | "
        + ("includes 40 s waiting for a machine KVM never ran before booting it under software emulation |"
           if r.get("kvm_device") and r["accelerator"] == "tcg" else "|"),
        f"| re-bake after only the last step changed (s) | {rb['median']} | {rb['min']} | {rb['max']} | {rb['runs']} | "
        f"{r['rebake_layers_reused']} layers reused, {r['rebake_layers_built']} built |",
    ]
    for c, u in sorted(r["upload"].items(), key=lambda kv: int(kv[0])):
        lines.append(
            f"| EBS direct upload, {c} block(s) in flight (s) | {u['median']} | {u['min']} | {u['max']} | {u['runs']} | "
            f"{u['blocks_uploaded']} of {u['blocks_total']} blocks sent ({u['mib_uploaded']} MiB); emulator on loopback |")
    steps = ", ".join(f"{k} {v} s" for k, v in r["step_seconds"].items())
    uploads = sorted(r["upload"].items(), key=lambda kv: int(kv[0]))
    lines += ["", f"Steps of the full bake: {steps}.", "",
              plot("image-bake", "hpc-image bake vs an Image Builder GPU bake", "s",
                   [("full bake + verify", r["full_bake_and_verify_s"]), ("re-bake, last step changed", rb["median"]),
                    ("pcluster build-image (about an hour)", 3600)], log=True), "",
              plot("image-upload", "EBS direct upload of the baked disk", "s",
                   [(f"{c} block(s) in flight", u["median"]) for c, u in uploads]), "",
              "Raw numbers: [bench/results/image.json](bench/results/image.json).", ""]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("provider_dir", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--resources", type=int, default=100)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--only", choices=["resume"],
                    help="measure only this part again, keeping the rest of bench/results/provider.json")
    args = ap.parse_args()
    binary = args.provider_dir / "terraform-provider-hpc"
    if not binary.exists():
        sys.exit(f"{binary} not found: build it first")
    if args.only == "resume":
        kept = RESULTS / "provider.json"
        if not kept.exists():
            sys.exit(f"{kept} not found: run the whole provider part first")
        results = json.loads(kept.read_text())
        results["resume"] = resume_median(args.provider_dir.resolve(), args.nodes, True, args.runs)
        results["resume_without_ice"] = resume_median(args.provider_dir.resolve(), args.nodes, False, args.runs)
        results["resume"]["failover_added_s"] = round(
            results["resume"]["dispatch_s"] - results["resume_without_ice"]["dispatch_s"], 2)
        results["resume"]["measured"] = machine()
        save_part("provider", results)
        return
    results = {
        "machine": machine(),
        "provider_startup_s": provider_startup(binary, 20),
        "schema_served_s": schema_served(binary, 20),
        "plan": plan_many(args.provider_dir.resolve(), args.resources, args.runs),
        "resume": resume_median(args.provider_dir.resolve(), args.nodes, True, args.runs),
        "resume_without_ice": resume_median(args.provider_dir.resolve(), args.nodes, False, args.runs),
        "quickstart_apply": quickstart_apply(args.provider_dir.resolve(), args.runs),
        "plan_clusters": plan_clusters(args.provider_dir.resolve(), 20, 10, args.runs),
    }
    results["resume"]["failover_added_s"] = round(
        results["resume"]["dispatch_s"] - results["resume_without_ice"]["dispatch_s"], 2)
    save_part("provider", results)


if __name__ == "__main__":
    main()
