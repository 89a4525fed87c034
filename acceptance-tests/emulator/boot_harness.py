"""What the boot-mode tests share: a booting emulator, the image baked from the repo's template
and published to it, a VPC the host can reach, SSH into instances.

The image is baked by the real ``hpc-image build`` (layer cache under
``/var/tmp/hpc-image-cache``, so only changed steps are rebuilt) and uploaded with ``hpc-image
publish`` through the EBS direct APIs: the instances boot exactly what a user would publish.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import harness
from harness import HERE, client, control

REPO = HERE.parent.parent
TEMPLATE = REPO / "image-builder" / "templates" / "debian-slurm.pkr.hcl"
IMAGE_CACHE = Path(os.environ.get("HPC_IMAGE_CACHE", "/var/tmp/hpc-image-cache"))
IMAGE_OUT = Path(os.environ.get("HPCFORGE_TEST_IMAGE_DIR", "/var/tmp/hpcforge-test-image"))
SSH_USER = "debian"  # cloud-init's default user of the Debian image; the key pair's key goes there
BOOT_TOOLS = {
    "systemd-nspawn": "systemd-container",
    "dnsmasq": "dnsmasq-base",
    "iptables-restore": "iptables",
    "ssh": "openssh-client",
    "debootstrap": "debootstrap",
}


def bin_dir() -> Path:
    explicit = os.environ.get("HPCFORGE_BIN_DIR")
    if explicit:
        return Path(explicit)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "debug"


def require_boot_prerequisites() -> None:
    """Fails (never skips) naming what is missing; .ci/run installs all of it."""
    missing = [] if os.geteuid() == 0 else ["root"]
    missing += [f"{tool} (apt-get install {pkg})" for tool, pkg in BOOT_TOOLS.items() if not shutil.which(tool)]
    for binary in ("hpc-image", "hpc-node"):
        if not (bin_dir() / binary).is_file():
            missing.append(f"{bin_dir() / binary} (cargo build --workspace, or set HPCFORGE_BIN_DIR)")
    assert not missing, "boot-mode tests need: " + ", ".join(missing) + " (.ci/run installs them)"


def image_inputs() -> list[Path]:
    """What the test image is made of: a disk newer than all of them is reused as it is."""
    components = REPO / "image-builder" / "components"
    return [TEMPLATE, bin_dir() / "hpc-image", bin_dir() / "hpc-node", *sorted(components.rglob("*"))]


def bake_image() -> Path:
    """The repo's template baked (cached layers reused), or the disk of an earlier bake of the
    same inputs (the Rust boot tests use the same rule and directory); returns the disk. Under
    ``debian.lock``, as the Rust boot tests and ``scripts/demo.sh`` bake it: they may run beside
    these tests, and a disk is looked at only when no bake is writing it."""
    IMAGE_OUT.mkdir(parents=True, exist_ok=True)
    with open(IMAGE_OUT / "debian.lock", "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _bake_unless_fresh(IMAGE_OUT / "debian" / "disk.raw")


def _bake_unless_fresh(disk: Path) -> Path:
    if disk.is_file() and all(disk.stat().st_mtime > p.stat().st_mtime for p in image_inputs() if p.is_file()):
        return disk
    log = IMAGE_OUT / "bake.log"
    with open(log, "w", encoding="utf-8") as out:
        done = subprocess.run(
            [
                str(bin_dir() / "hpc-image"), "build", str(TEMPLATE), "-var", "verify=false",
                "--cache-dir", str(IMAGE_CACHE), "--output", str(IMAGE_OUT / "debian"),
            ],
            cwd=TEMPLATE.parent.parent, stdout=out, stderr=subprocess.STDOUT, timeout=1800,
            env={**os.environ, "HPC_NODE_BINARY": str(bin_dir() / "hpc-node")},
        )
    assert done.returncode == 0, f"hpc-image build failed; its log: {log}\n{log.read_text()[-4000:]}"
    return disk


def publish_image(endpoint: str, disk: Path, work: Path) -> str:
    """Uploads the disk to the emulator with hpc-image publish; returns the us-east-1 AMI."""
    manifest = work / "manifest.json"
    env = {
        **os.environ, "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "secret", "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(work / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(work / "none"),
    }
    done = subprocess.run(
        [
            str(bin_dir() / "hpc-image"), "publish", str(TEMPLATE), "--disk", str(disk), "--manifest", str(manifest),
            "-var", 'regions=["us-east-1"]',
        ],
        cwd=TEMPLATE.parent.parent, capture_output=True, text=True, timeout=900, env=env,
    )
    assert done.returncode == 0, f"hpc-image publish failed:\n{done.stdout}\n{done.stderr}"
    regions = json.loads(manifest.read_text())
    found = re.search(r"ami-[0-9a-f]+", json.dumps(regions))
    assert found, f"no AMI in the manifest: {regions}"
    return found.group(0)


def start_booting_emulator(
    port_file: Path, budget: int, boot_dir: Path, *options: str
) -> tuple[subprocess.Popen[str], str]:
    """A booting emulator: ``budget`` machines, its state under ``boot_dir``."""
    return harness.start_emulator(
        port_file, "--boot-instances", "--machine-budget", str(budget), "--boot-dir", str(boot_dir),
        "--snapshot-delay", "0", "--image-delay", "0", *options,
    )


class Vpc:
    """A VPC, one subnet and a key pair, made through the EC2 API."""

    def __init__(self, endpoint: str, cidr: str, work: Path, region: str = "us-east-1") -> None:
        self.ec2 = client(endpoint, "ec2", region=region)
        self.endpoint = endpoint
        self.cidr = cidr
        self.vpc_id = self.ec2.create_vpc(CidrBlock=cidr)["Vpc"]["VpcId"]
        subnet_cidr = re.sub(r"\.0\.0/16$", ".1.0/24", cidr)
        self.subnet_id = self.ec2.create_subnet(VpcId=self.vpc_id, CidrBlock=subnet_cidr, AvailabilityZone=f"{region}a")[
            "Subnet"
        ]["SubnetId"]
        name = f"boot-test-{self.vpc_id}"
        key = self.ec2.create_key_pair(KeyName=name, KeyType="ed25519")
        self.key_name = name
        self.key_file = work / f"{name}.pem"
        self.key_file.write_text(key["KeyMaterial"])
        self.key_file.chmod(0o600)

    def group(self, name: str, ingress: list[dict[str, Any]]) -> str:
        group_id = self.ec2.create_security_group(GroupName=name, Description=name, VpcId=self.vpc_id)["GroupId"]
        if ingress:
            self.ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=ingress)
        return group_id

    def ssh_from_vpc(self) -> dict[str, Any]:
        return {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": self.cidr}]}

    def launch(
        self, groups: list[str], user_data: str = "", count: int = 1, metadata_tags: bool = False, **extra: Any
    ) -> list[str]:
        metadata = {"HttpTokens": "required", "HttpEndpoint": "enabled"}
        if metadata_tags:
            metadata["InstanceMetadataTags"] = "enabled"
        out = self.ec2.run_instances(
            ImageId=extra.pop("image_id"), InstanceType="c7i.large", MinCount=count, MaxCount=count,
            SubnetId=self.subnet_id, SecurityGroupIds=groups, KeyName=self.key_name, UserData=user_data,
            MetadataOptions=metadata, **extra,
        )
        return [i["InstanceId"] for i in out["Instances"]]

    def describe(self, instance_id: str) -> dict[str, Any]:
        return self.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]

    def wait_state(self, instance_id: str, state: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            found = self.describe(instance_id)
            if found["State"]["Name"] == state:
                return found
            ended = found["State"]["Name"] in ("terminated", "stopped") and state not in ("terminated", "stopped")
            assert not ended and time.monotonic() < deadline, (
                f"{instance_id} is {found['State']} ({found.get('StateReason')}), not {state}; console:\n"
                + self.console(instance_id)[-3000:]
            )
            time.sleep(0.5)

    def client_side(self, address: str) -> list[str]:
        """How the host reaches ``address``: directly, or inside the VPC's client namespace when
        the emulator routes the VPC's CIDR not from the host."""
        for machine in machines(self.endpoint).values():
            if machine["PrivateIpAddress"] == address and machine["ClientNamespace"]:
                return ["ip", "netns", "exec", machine["ClientNamespace"]]
        return []

    def ssh(self, address: str, command: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [
                *self.client_side(address),
                "ssh", "-i", str(self.key_file), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR", f"{SSH_USER}@{address}", command,
            ],
            capture_output=True, text=True, timeout=timeout, check=False,
        )
        if check:
            assert done.returncode == 0, f"ssh {address} {command!r}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done

    def wait_ssh(self, address: str, timeout: float = 180) -> None:
        # A first boot on a host that also runs the other stream's tests took over 90 s once in
        # CI (the stop/start test's instance: "No route to host" until the deadline).
        deadline = time.monotonic() + timeout
        while True:
            done = self.ssh(address, "true", check=False, timeout=15)
            if done.returncode == 0:
                return
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"no SSH to {address} within {timeout} s: {done.returncode} {done.stderr}\n"
                    f"its console's last lines:\n{self.console_at(address)}"
                )
            time.sleep(1)

    def console_at(self, address: str, lines: int = 40) -> str:
        """The last lines of the console of the instance at `address` (for a failure's message)."""
        for reservation in self.ec2.describe_instances()["Reservations"]:
            for instance in reservation["Instances"]:
                if instance.get("PrivateIpAddress") == address:
                    return "\n".join(self.console(instance["InstanceId"]).splitlines()[-lines:])
        return f"(no instance at {address})"

    def console(self, instance_id: str) -> str:
        import base64

        output = self.ec2.get_console_output(InstanceId=instance_id).get("Output", "")
        return output if "\n" in output else base64.b64decode(output or b"").decode(errors="replace")


def machines(endpoint: str) -> dict[str, dict[str, Any]]:
    return {m["InstanceId"]: m for m in control(endpoint, "GET", "/instances")["instances"]}
