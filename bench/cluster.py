#!/usr/bin/env python3
"""make bench (cluster part): a booted cluster's own start-up times on the local EC2, through
`make demo` (scripts/demo.sh: the quickstart applied by terraform, a user's job on a cold
partition). Per run:

- the head node: launch → its user data starts `hpc-node head-init` (the machine's boot) →
  head-init reports ready (our init: munge, users, mounts, MariaDB, slurmdbd, slurmctld);
- a compute node: launch → `hpc-node node-init` starts (the machine's boot) → slurmd started
  (our init) → the job starts on it (slurmd registered, the job dispatched);
- `sbatch` → the job running, on a partition with no node up (sacct's Submit and Start);
- the demo's terraform applies and the whole `make demo`;
- head node replacement: the head terminated outside Terraform, then `terraform apply` (which
  starts its successor on the kept interface and state volume) → the apply's end, and → the
  login node's `squeue` answering with the completed job's `sacct` row back (the cluster
  scheduling again); the jobs accounting lost across it (goal 0).

Times on the machines come from their journals (`journalctl -o short-unix`; the machines share
the host's clock), launches from DescribeInstances. Writes bench/results/cluster.json.
Needs root and boot mode's packages (`.ci/run` installs them). Not a test: nothing fails for
being slow.

Usage: acceptance-tests/emulator/.venv/bin/python bench/cluster.py BIN_DIR [--runs N]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from bench import machine, save_part, summary  # noqa: E402

SSH = ["ssh", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
       "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR"]


def run(cmd: list[str], **kw) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def ssh(key: Path, target: str, command: str, jump: str | None = None) -> str:
    proxy = ["-o", f"ProxyCommand=ssh -i {key} {' '.join(SSH[1:])} -W %h:%p debian@{jump}"] if jump else []
    return run(SSH + ["-i", str(key)] + proxy + [target, command])


def journal(key: Path, addr: str, jump: str | None = None) -> list[tuple[float, str]]:
    """The machine's hpc-node lines with their times."""
    out = ssh(key, f"debian@{addr}", "sudo journalctl -b -o short-unix --no-pager | grep 'hpc-node\\['", jump)
    lines = []
    for line in out.splitlines():
        stamp, _, rest = line.partition(" ")
        try:
            lines.append((float(stamp), rest))
        except ValueError:
            continue
    return lines


def first(lines: list[tuple[float, str]], pattern: str) -> float:
    for t, text in lines:
        if re.search(pattern, text):
            return t
    raise SystemExit(f"no journal line matches {pattern!r}:\n" + "\n".join(t for _, t in lines[-20:]))


def launch_time(ec2, key: str, value: str) -> float:
    found = ec2.describe_instances(Filters=[{"Name": f"tag:{key}", "Values": [value]}])
    times = [i["LaunchTime"].timestamp() for r in found["Reservations"] for i in r["Instances"]]
    if not times:
        raise SystemExit(f"no instance tagged {key}={value}")
    return min(times)


def slurm_time(text: str) -> float:
    return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.timezone.utc).timestamp()


def one_run(bin_dir: str, image_dir: str) -> dict:
    import boto3  # the emulator's venv

    with tempfile.TemporaryDirectory(prefix="hpcforge-bench-cluster-") as state:
        env = dict(os.environ, HPCFORGE_DEMO_DIR=state, HPCFORGE_TEST_IMAGE_DIR=image_dir)
        demo = [str(ROOT / "scripts/demo.sh")]
        try:
            out = run(demo + ["up", bin_dir], env=env)
            numbers = {k: float(v) for k, v in re.findall(r"== (applied|up) in (\d+)s", out)}
            key = Path(state) / "demo-key"
            port = Path(state, "emulator.port").read_text().strip()
            ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{port}",
                               aws_access_key_id="bench", aws_secret_access_key="bench")
            outputs = json.loads(run(["terraform", f"-chdir={ROOT / 'examples/quickstart'}", "output",
                                      f"-state={state}/terraform.tfstate", "-json"], env=env))
            login = outputs["login_node_private_ips"]["value"][0]
            head = ec2.describe_instances(Filters=[{"Name": "tag:hpcforge:role", "Values": ["head"]}])
            head_ip = head["Reservations"][0]["Instances"][0]["PrivateIpAddress"]
            head_lines = journal(key, head_ip)
            head_launch = launch_time(ec2, "hpcforge:role", "head")
            head_init = first(head_lines, r"head-init\]: instance")
            head_ready = first(head_lines, r"head-init\]: .*Ready")
            job = ssh(key, f"demo@{login}", "sacct -n -X -P -j 1 -o Submit,Start,NodeList").strip().split("|")
            submit, start = slurm_time(job[0]), slurm_time(job[1])
            node = ssh(key, f"debian@{login}", f"scontrol show node {job[2]} -o")
            node_ip = re.search(r"NodeAddr=(\S+)", node).group(1)
            node_lines = journal(key, node_ip, jump=head_ip)
            node_launch = launch_time(ec2, "hpcforge:partition", "quickstart/cpu")
            node_init = first(node_lines, r"node-init\]: instance")
            node_slurmd = first(node_lines, r"node-init\]: slurmd of")
            replaced = head_replacement(ec2, key, login, state, env)
        finally:
            subprocess.run(demo + ["down", bin_dir], env=env, capture_output=True)
    return {
        "head_boot_s": head_init - head_launch,
        "head_init_s": head_ready - head_init,
        "node_boot_s": node_init - node_launch,
        "node_init_s": node_slurmd - node_init,
        "node_slurmd_to_job_start_s": start - node_slurmd,
        "sbatch_to_running_s": start - submit,
        "apply_s": numbers.get("applied", 0.0),
        "demo_s": numbers.get("up", 0.0),
        **replaced,
    }


def head_replacement(ec2, key: Path, login: str, state: str, env: dict) -> dict:
    """The head terminated out of band; the next apply's time and the time to scheduling again."""
    accounted = lambda: ssh(key, f"demo@{login}", "sacct -n -X -P -a -o JobID,State").split()  # noqa: E731
    before = accounted()
    head = ec2.describe_instances(Filters=[{"Name": "tag:hpcforge:role", "Values": ["head"]},
                                           {"Name": "instance-state-name", "Values": ["running"]}])
    head_id = head["Reservations"][0]["Instances"][0]["InstanceId"]
    ec2.terminate_instances(InstanceIds=[head_id])
    ec2.get_waiter("instance_terminated").wait(InstanceIds=[head_id], WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    port = Path(state, "emulator.port").read_text().strip()
    env = dict(env, TF_CLI_CONFIG_FILE=f"{state}/cli.tfrc", TF_DATA_DIR=f"{state}/tfdata", TF_IN_AUTOMATION="1",
               CHECKPOINT_DISABLE="1", AWS_ACCESS_KEY_ID="demo", AWS_SECRET_ACCESS_KEY="demo",
               AWS_EC2_METADATA_DISABLED="true", AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_REGION", None)
    started = time.time()
    run(["terraform", f"-chdir={ROOT / 'examples/quickstart'}", "apply", "-auto-approve", "-input=false",
         "-no-color", f"-state={state}/terraform.tfstate", f"-var-file={state}/demo.tfvars.json"], env=env)
    applied = time.time()
    while True:
        try:
            ssh(key, f"demo@{login}", "squeue -h")
            after = accounted()
            break
        except SystemExit:
            if time.time() - started > 600:
                raise
            time.sleep(0.5)
    scheduling = time.time()
    return {
        "head_replacement_apply_s": applied - started,
        "head_replacement_to_scheduling_s": scheduling - started,
        "head_replacement_jobs_lost": float(len(set(before) - set(after))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bin_dir", help="folder holding terraform-provider-hpc, hpc-image and hpc-node")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--image-dir", default=os.environ.get("HPCFORGE_TEST_IMAGE_DIR", "/var/tmp/hpcforge-test-image"),
                        help="where the image is baked (default: the booted tests' disk, shared)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/cluster.py boots machines: run it as root")
    runs = [one_run(str(Path(args.bin_dir).resolve()), args.image_dir) for _ in range(args.runs)]
    for i, r in enumerate(runs, 1):
        print(f"run {i}: " + ", ".join(f"{k} {v:.1f}" for k, v in r.items()))
    results = {"machine": machine(), **{k: summary([r[k] for r in runs]) for k in runs[0]}}
    save_part("cluster", results)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
