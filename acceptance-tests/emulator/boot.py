"""Boot mode (``serve --boot-instances``): ties the machines to moto's EC2.

- RunInstances, CreateFleet (through the same backend call) and StartInstances boot one
  machine per instance, within the machine budget (past it: InsufficientInstanceCapacity);
  an AMI without a disk written through the EBS direct APIs is refused, naming the AMI.
- StopInstances and TerminateInstances end the machine; the state follows it, and each
  change goes to EventBridge (``ec2_events``).
- GetConsoleOutput serves the machine's console.
- A reconciler links the namespaces of actively peered VPCs, puts EFS mount targets at their
  addresses, applies security groups and route tables to each VPC's namespace and keeps one
  shared directory per EFS and FSx file system, about once a second.
- Calls signed with instance credentials are authorized against the instance's role.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from typing import Any

from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models.instances import Instance, InstanceBackend

import ec2_events
import firewall
import netns
import peering
import volumes
import vpcnet
from disks import DiskError, root_snapshot
from faults import FAULTS
from machines import BootFault, MachineManager

log = logging.getLogger("emulator.boot")

MANAGER: MachineManager | None = None
RECONCILE_INTERVAL_S = 1.0
REQUIRED = {
    "systemd-nspawn": "systemd-container",
    "nsenter": "util-linux",
    "unshare": "util-linux",
    "ip": "iproute2",
    "iptables-restore": "iptables",
    "dnsmasq": "dnsmasq-base",
    "mount": "mount",
    "losetup": "mount",
}


def missing_prerequisites() -> list[str]:
    missing = [] if os.geteuid() == 0 else ["root (namespaces, mounts and systemd-nspawn need it)"]
    missing += [f"{tool} (apt-get install {package})" for tool, package in REQUIRED.items() if not shutil.which(tool)]
    if "overlay" not in open("/proc/filesystems", encoding="utf-8").read():
        missing.append("the overlay file system in this kernel")
    if not os.path.exists("/proc/self/ns/time"):
        missing.append("time namespaces in this kernel (CONFIG_TIME_NS)")
    return missing


def clean_stale(state_root: str) -> list[str]:
    """Removes what crashed runs of the emulator left: their machines, namespaces, links, mounts."""
    removed = []
    for entry in sorted(os.listdir(state_root)) if os.path.isdir(state_root) else []:
        found = re.fullmatch(r"run-(\d+)", entry)
        if not found or _alive(int(found.group(1))):
            continue
        pid = int(found.group(1))
        directory = os.path.join(state_root, entry)
        for pidfile in _glob_files(directory, "nspawn.pid"):
            try:
                os.kill(int(open(pidfile, encoding="utf-8").read().strip()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        for line in reversed(open("/proc/self/mountinfo", encoding="utf-8").read().splitlines()):
            target = line.split(" ")[4]
            if target.startswith(directory + "/"):
                subprocess.run(["umount", "-l", target], capture_output=True, timeout=30, check=False)
        volumes.detach_stale_loops(directory)
        for name in netns.names(f"hpcemu-{pid}-"):
            netns.delete(name)
        for link in netns.host_links(re.compile(rf"^he{pid:06x}v\d+$")):
            netns.ip("link", "del", link, check=False)
        subprocess.run(["pkill", "-f", f"{directory}/"], capture_output=True, timeout=10, check=False)
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(directory)
    return removed + _clean_orphan_networks()


def _clean_orphan_networks() -> list[str]:
    """Removes the namespaces and host links of dead runs whose state lived elsewhere (another
    ``--boot-dir``, since deleted): a host link left behind keeps its route to the VPC's CIDR,
    and a later run's VPC of that CIDR would then be refused a route from the host."""
    removed = []
    for name in netns.names("hpcemu-"):
        found = re.fullmatch(r"hpcemu-(\d+)-\w+", name)
        if found and not _alive(int(found.group(1))):
            netns.delete(name)
            removed.append(f"namespace {name}")
    for link in netns.host_links(re.compile(r"^he[0-9a-f]{6}v\d+$")):
        if not _alive(int(link[2:8], 16)):
            netns.ip("link", "del", link, check=False)
            removed.append(f"host link {link}")
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
    return b"emulator.py" in cmdline


def _glob_files(directory: str, name: str) -> list[str]:
    return [os.path.join(d, name) for d, _, files in os.walk(directory) if name in files]


# --- moto hooks --------------------------------------------------------------------------------


def _image_of(backend: Any, image_id: str | None, kwargs: dict[str, Any]) -> str | None:
    if image_id:
        return image_id
    template_arg = kwargs.get("launch_template") or {}
    return backend._get_template_from_args(template_arg).image_id if template_arg else None


def install(manager: MachineManager) -> None:
    global MANAGER
    MANAGER = manager
    ec2_events.MACHINES_OWN_STATES = True
    original_run = InstanceBackend.run_instances
    original_start, original_stop, original_terminate = Instance.start, Instance.stop, Instance.terminate

    def run_instances(self: Any, image_id: str, count: int, user_data: Any, security_group_names: Any, **kwargs: Any) -> Any:
        image = _image_of(self, image_id, kwargs)
        try:
            root_snapshot(self.account_id, self.region_name, image or "")
        except DiskError as err:
            raise EC2ClientError("InvalidAMIID.Unavailable", str(err)) from err
        granted = manager.reserve(count)
        if granted < count:
            manager.release(granted)
            raise EC2ClientError(
                "InsufficientInstanceCapacity",
                f"We currently do not have sufficient {kwargs.get('instance_type', 'instance')} capacity "
                f"(the emulator's machine budget: {manager.live()} of {manager.budget} machines in use).",
            )
        try:
            reservation = original_run(self, image_id, count, user_data, security_group_names, **kwargs)
        except Exception:
            manager.release(granted)
            raise
        for instance in reservation.instances:
            manager.launch(instance, _boot_fault(instance), reserved=True)
        return reservation

    def start(self: Any) -> Any:
        if manager.reserve(1) < 1:
            raise EC2ClientError(
                "InsufficientInstanceCapacity",
                f"Insufficient capacity to start {self.id} (the emulator's machine budget: {manager.budget}).",
            )
        previous = original_start(self)
        manager.launch(self, None, reserved=True)
        return previous

    def stop(self: Any) -> Any:
        previous = original_stop(self)
        if not manager.end(self.id, "stopped"):  # no machine to follow: moto's change is the state
            ec2_events.states_passed(self, previous.name, ec2_events.STOPPED)
        return previous

    def terminate(self: Any) -> Any:
        previous = original_terminate(self)
        if not manager.end(self.id, "terminated"):  # no machine to follow (a stopped one's has ended)
            ec2_events.states_passed(self, previous.name, ec2_events.TERMINATED)
        return previous

    InstanceBackend.run_instances = run_instances  # type: ignore[method-assign]
    Instance.start, Instance.stop, Instance.terminate = start, stop, terminate  # type: ignore[method-assign]
    threading.Thread(target=_reconcile_forever, args=(manager,), name="boot-reconciler", daemon=True).start()


def _boot_fault(instance: Any) -> BootFault | None:
    attrs = {
        "AvailabilityZone": instance.placement.zone or "",
        "InstanceType": instance.instance_type,
        "SubnetId": instance.subnet_id or "",
        "Lifecycle": "spot" if instance.lifecycle == "spot" else "on-demand",
    }
    action = "CreateFleet" if getattr(instance, "_fleet_id", None) else "RunInstances"
    found = FAULTS.boot_fault(action, attrs)
    return BootFault(found[0], found[1]) if found else None


def console_output(instance_id: str) -> str | None:
    """The base64 console of a booted instance (its last 64 KiB), or None without a machine."""
    machine = MANAGER.machines.get(instance_id) if MANAGER else None
    if machine is None:
        return None
    try:
        with open(machine.console, "rb") as console:
            console.seek(0, os.SEEK_END)
            size = console.tell()
            console.seek(max(0, size - 64 * 1024))
            data = console.read()
    except OSError:
        data = b""
    return base64.b64encode(data).decode()


# --- the reconciler ----------------------------------------------------------------------------


def _reconcile_forever(manager: MachineManager) -> None:
    applied: dict[str, tuple[vpcnet.Vpc, str]] = {}
    while not manager._closing:
        # Each on its own: a round where one fails (moto's state changing under us) must not
        # hold up the others.
        for step in (
            lambda: _link_vpcs(manager),
            lambda: _apply_firewalls(manager, applied),
            lambda: _ensure_shares(manager),
        ):
            try:
                step()
            except Exception as err:  # noqa: BLE001 - try again next round
                log.debug("reconcile: %s", err)
        time.sleep(RECONCILE_INTERVAL_S)


def _live_vpcs(manager: MachineManager) -> dict[peering.VpcKey, vpcnet.Vpc]:
    """The VPC namespaces of this moment (machines add and retire them from other threads)."""
    with manager._lock:
        return dict(manager.vpcs)


def _link_vpcs(manager: MachineManager) -> None:
    """Peering links between VPC namespaces, mount targets' addresses (``peering``)."""
    manager.peerings.reconcile(_live_vpcs(manager), peering.efs_targets())


def _apply_firewalls(manager: MachineManager, applied: dict[str, tuple[vpcnet.Vpc, str]]) -> None:
    """Each VPC namespace's rules: its instances' and mount targets' security groups, and its
    subnets' routes through its peering links (``firewall.vpc_rules``)."""
    live = [m for m in list(manager.machines.values()) if not m.done.is_set() and m.metadata is not None]
    targets = peering.efs_targets()
    members: dict[str, list[str]] = {}
    for machine in live:
        for group in machine.instance.nics[0].group_set:
            members.setdefault(group.id, []).append(machine.address)
    for target in targets:
        for group_id in target.group_ids:
            members.setdefault(group_id, []).append(target.address)
    for key, vpc in _live_vpcs(manager).items():
        interfaces = []
        for machine in live:
            if machine.vpc is not vpc:
                continue
            groups = machine.instance.nics[0].group_set
            interfaces.append(
                firewall.Interface(
                    link=machine.link,
                    ingress=tuple(firewall.permissions([r for g in groups for r in g.ingress_rules], members)),
                    egress=tuple(firewall.permissions([r for g in groups for r in g.egress_rules], members)),
                )
            )
        mount_targets = [
            firewall.MountTarget(t.address, tuple(firewall.permissions(peering.ingress_rules(key, t.group_ids), members)))
            for t in targets
            if t.vpc == key
        ]
        rules = firewall.vpc_rules(interfaces, peering.subnet_routes(vpc), manager.peerings.links_of(vpc), mount_targets)
        # A namespace name comes back with a later VPC: what was applied counts for that VPC only.
        previous = applied.get(vpc.ns)
        if previous is None or previous[0] is not vpc or previous[1] != rules:
            netns.run(["iptables-restore"], ns=vpc.ns, stdin=rules)
            applied[vpc.ns] = (vpc, rules)


def _ensure_shares(manager: MachineManager) -> None:
    """One shared directory per EFS and FSx file system of any account and region."""
    from moto.efs.models import efs_backends

    import fsx

    ids: set[str] = set()
    for account in list(efs_backends.keys()):
        for region in list(efs_backends[account].keys()):
            ids.update(efs_backends[account][region].file_systems_by_id.keys())
    ids.update(fsx.file_system_ids())
    for fs_id in ids:
        os.makedirs(os.path.join(manager.shares_dir, fs_id), exist_ok=True)
