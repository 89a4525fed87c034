"""Boot mode: every EC2 instance is a real machine booted from its AMI's disk.

A machine is systemd-nspawn on an overlay (the AMI's root read-only below, the instance's own
upper layer above) in a network namespace plugged into its VPC's (``vpcnet``), in a time
namespace of its own so Slurm sees a fresh boot, with its console (the container's
/dev/console) written to a file that GetConsoleOutput serves. The instance's state follows
its machine: ``pending`` until the machine starts, ``running`` while it runs,
``stopping``/``shutting-down`` until it is gone; a machine that powers off by itself is
``stopped`` or ``terminated`` (InstanceInitiatedShutdownBehavior), one that dies is
``terminated`` with ``Server.InternalError``. Each change of state goes to EventBridge
(``ec2_events``).

What the emulator must tell an instance (cloud-init's datasource, where the AWS endpoint
is, the shared-storage mount helpers) goes into the instance's upper layer before boot,
never into the image.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from moto.ec2.models import ec2_backends
from moto.ec2.models.instances import InstanceState, StateReason

import ec2_events
import iam_enforce
import netns
import peering
import volumes
import vpcnet
from disks import DiskStore
from imds import Imds, MetadataSource

log = logging.getLogger("emulator.boot")

STOP_GRACE_S = 20
CONSOLE_LIMIT = 64 * 1024
SHARES_IN_MACHINE = "/run/hpcemu/shares"
DEFAULT_MEMORY_PER_MACHINE = 384 << 20


def default_budget() -> int:
    """Machines the host holds: memory / 384 MiB (a node with Slurm and an agent), at most 64."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            total_kib = int(next(line for line in handle if line.startswith("MemTotal")).split()[1])
    except (OSError, StopIteration, ValueError):
        return 8
    return max(1, min(64, (total_kib << 10) // DEFAULT_MEMORY_PER_MACHINE))


@dataclass
class BootFault:
    kind: str  # never-arrives | dies-at-boot | spot-interruption
    delay_s: float = 120.0


# Shortest time from a launch to the machine's boot (see MachineManager._boot).
MIN_PENDING_S = 2.0


@dataclass
class Machine:
    instance: Any
    account: str
    region: str
    index: int
    directory: str
    vpc: vpcnet.Vpc
    mac: str
    address: str
    fault: BootFault | None = None
    process: subprocess.Popen[bytes] | None = None
    wanted: str = "running"  # running | stopped | terminated
    interruption: dict[str, str] | None = None
    metadata: MetadataSource | None = None
    started_at: float = 0.0
    lower: str = ""
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def instance_id(self) -> str:
        return self.instance.id

    @property
    def ns(self) -> str:
        return f"{self.vpc.run_prefix}-i{self.index}"

    @property
    def link(self) -> str:
        return f"e{self.index}"

    @property
    def console(self) -> str:
        return os.path.join(self.directory, "console.log")


STATES = {"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}


def _set_state(instance: Any, name: str, reason: tuple[str, str] | None = None) -> None:
    """Sets the instance's state and, when it changes, tells EventBridge (``ec2_events``)."""
    previous = instance._state.name
    instance._state = InstanceState(name, STATES[name])
    if reason is not None:
        instance.state_reason = StateReason(reason[0], reason[1])
        instance._reason = reason[0]
    if name != previous:
        ec2_events.state_changed(instance, name)



class MachineManager:
    """Boots, tracks and ends the machines of one emulator run."""

    def __init__(self, state_root: str, budget: int, app: Any, route_host: bool = True) -> None:
        self.route_host = route_host
        self.run_prefix = f"hpcemu-{os.getpid()}"
        self.state_dir = os.path.join(state_root, f"run-{os.getpid()}")
        os.makedirs(self.state_dir, exist_ok=True)
        with open(os.path.join(self.state_dir, "owner.pid"), "w", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
        self.budget = budget
        self.app = app
        self.disks = DiskStore(self.state_dir)
        self.shares_dir = os.path.join(self.state_dir, "shares")
        os.makedirs(self.shares_dir, exist_ok=True)
        self.imds = Imds(self._metadata_at)
        self.volumes = volumes.VolumeStore(self.state_dir)
        self.machines: dict[str, Machine] = {}
        self.vpcs: dict[tuple[str, str, str], vpcnet.Vpc] = {}
        self.peerings = peering.Peerings(self.shares_dir)
        self._reserved = 0
        self._counter = 0
        self._lock = threading.RLock()
        self._servers: dict[str, list[Any]] = {}
        self._closing = False

    # --- capacity -------------------------------------------------------------------------------

    def live(self) -> int:
        with self._lock:
            return sum(1 for m in self.machines.values() if not m.done.is_set()) + self._reserved

    def reserve(self, count: int) -> int:
        """Reserves up to ``count`` machines; returns how many fit the budget."""
        with self._lock:
            granted = max(0, min(count, self.budget - self.live()))
            self._reserved += granted
            return granted

    def release(self, count: int) -> None:
        with self._lock:
            self._reserved = max(0, self._reserved - count)

    # --- networks -------------------------------------------------------------------------------

    def _vpc(self, account: str, region: str, subnet: Any) -> vpcnet.Vpc:
        key = (account, region, subnet.vpc_id)
        with self._lock:
            vpc = self.vpcs.get(key)
            if vpc is None:
                backend = ec2_backends[account][region]
                cidr = backend.vpcs[subnet.vpc_id].cidr_block
                index = len(self.vpcs)
                vpc = vpcnet.Vpc(
                    run_prefix=self.run_prefix, index=index, account=account, region=region,
                    vpc_id=subnet.vpc_id, cidr=ipaddress.ip_network(cidr),
                    state_dir=os.path.join(self.state_dir, f"vpc{index}"),
                )
                vpc.create(route_host=self.route_host)
                self._serve_in(vpc)
                self.vpcs[key] = vpc
        vpc.add_subnet(subnet.id, subnet.cidr_block)
        return vpc

    def _serve_in(self, vpc: vpcnet.Vpc) -> None:
        """IMDS and the AWS endpoint, listening inside the VPC's namespace."""
        from werkzeug.serving import make_server

        imds_server = self.imds.serve(netns.listen_tcp(vpc.ns, vpcnet.IMDS_ADDRESS, 80))
        sock = netns.listen_tcp(vpc.ns, vpcnet.ENDPOINT_ADDRESS, 80)
        server = make_server(vpcnet.ENDPOINT_ADDRESS, 80, self.app, threaded=True, fd=sock.fileno())
        threading.Thread(target=server.serve_forever, name=f"endpoint-{vpc.ns}", daemon=True).start()
        self._servers[vpc.ns] = [imds_server, server]

    def _retire_idle_vpcs(self) -> None:
        """A VPC's namespace, servers and host route go with its last machine (a VPC made later
        with the same CIDR is then routed from the host)."""
        with self._lock:
            busy = {id(m.vpc) for m in self.machines.values() if not m.done.is_set()}
            for key, vpc in list(self.vpcs.items()):
                if id(vpc) in busy:
                    continue
                for server in self._servers.pop(vpc.ns, []):
                    _shutdown(server)
                self.peerings.forget(vpc)
                vpc.destroy()
                del self.vpcs[key]

    def _metadata_at(self, address: str) -> MetadataSource | None:
        with self._lock:
            for machine in self.machines.values():
                if machine.address == address and not machine.done.is_set():
                    return machine.metadata
        return None

    # --- launch ---------------------------------------------------------------------------------

    def launch(self, instance: Any, fault: BootFault | None, reserved: bool) -> None:
        """Starts booting a new (or started) instance; returns at once, as EC2 does."""
        account, region = instance.ec2_backend.account_id, instance.ec2_backend.region_name
        nic = instance.nics[0]
        subnet = instance.ec2_backend.get_subnet(instance.subnet_id)
        with self._lock:
            if reserved:
                self._reserved = max(0, self._reserved - 1)
            previous = self.machines.get(instance.id)
            index = previous.index if previous else self._counter
            self._counter += 0 if previous else 1
            machine = Machine(
                instance=instance, account=account, region=region, index=index,
                directory=os.path.join(self.state_dir, "machines", instance.id),
                vpc=self._vpc(account, region, subnet), mac=nic.mac_address,
                address=nic.private_ip_address, fault=fault,
            )
            self.machines[instance.id] = machine
        _set_state(instance, "pending")
        threading.Thread(target=self._boot, args=(machine,), name=f"boot-{instance.id}", daemon=True).start()

    def _boot(self, machine: Machine) -> None:
        launched = time.time()
        try:
            self._prepare(machine)
            # Pending for a moment, as on EC2: a boot time in the very second of the launch
            # request reads to slurmctld (one-second resolution) as a boot from before it asked,
            # and it waits for another boot that never comes.
            time.sleep(max(0.0, launched + MIN_PENDING_S - time.time()))
            if machine.wanted != "running":  # stopped or terminated while pending
                return self._ended(machine, None)
            self._start(machine)
        except Exception as err:  # noqa: BLE001 - any failure ends this machine, with the reason
            log.error("instance %s did not boot: %s", machine.instance_id, err)
            with open(machine.console, "a", encoding="utf-8") as console:
                console.write(f"hpcemu: the machine could not boot: {err}\n")
            self._ended(machine, ("Server.InternalError: Internal error on launch", "Server.InternalError"))

    def _prepare(self, machine: Machine) -> None:
        os.makedirs(machine.directory, exist_ok=True)
        lower = self.disks.root(machine.account, machine.region, machine.instance.image_id)
        upper = os.path.join(machine.directory, "upper")
        first_boot = not os.path.isdir(upper)
        for sub in ("upper", "work", "root", "cgroup"):
            os.makedirs(os.path.join(machine.directory, sub), exist_ok=True)
        if first_boot:
            write_overlay(upper, lower, machine)
        machine.metadata = MetadataSource(
            instance_id=machine.instance_id,
            tokens_required=_tokens_required(machine.instance),
            tree=lambda: metadata_tree(machine, instance_credentials),
            user_data=lambda: user_data(machine.instance),
        )
        netns.delete(machine.ns)
        netns.create(machine.ns)
        machine.vpc.attach(machine.ns, machine.link, machine.mac, machine.address, machine.instance.subnet_id)
        machine.lower = lower

    def _start(self, machine: Machine) -> None:
        console = open(machine.console, "ab")
        if machine.fault is not None and machine.fault.kind == "never-arrives":
            console.write(b"hpcemu: fault 'never-arrives': the machine is held before boot and never runs\n")
            console.close()
            _set_state(machine.instance, "running")
            return
        if needs_unified_cgroups(machine.lower) and host_cgroup2() is None:
            console.write(
                b"hpcemu: the machine could not boot: its systemd needs the unified cgroup hierarchy and this host "
                b"has no cgroup2 (mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified, as root)\n"
            )
        script = boot_script(machine, self.shares_dir)
        uptime = int(float(open("/proc/uptime", encoding="utf-8").read().split()[0]))
        machine.process = subprocess.Popen(
            [
                "nsenter", f"--net={netns.NETNS_DIR}/{machine.ns}", "--",
                "unshare", "--mount", "--propagation", "slave", "--time", "--boottime", str(-uptime),
                "--monotonic", str(-uptime), "--fork", "--kill-child=SIGKILL", "sh", "-c", script,
            ],
            stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, start_new_session=True,
        )
        console.close()
        machine.started_at = time.time()
        _set_state(machine.instance, "running")
        self.volumes.replug(machine)
        threading.Thread(target=self._watch, args=(machine,), name=f"watch-{machine.instance_id}", daemon=True).start()
        if machine.fault is not None and machine.fault.kind == "dies-at-boot":
            threading.Timer(machine.fault.delay_s, self._die, args=(machine,)).start()
        if machine.fault is not None and machine.fault.kind == "spot-interruption":
            self.interrupt(machine.instance_id, machine.fault.delay_s)

    def _watch(self, machine: Machine) -> None:
        assert machine.process is not None
        code = machine.process.wait()
        if machine.wanted == "running" and code in (133,) and not self._closing:
            log.info("instance %s rebooted", machine.instance_id)
            # Its /dev went with it: the attached volumes are plugged into the new one (EBS
            # volumes stay attached through a reboot).
            self.volumes.unplug_all(machine, forget=False)
            return self._start(machine)
        reason = None
        if machine.wanted == "running":
            behavior = getattr(machine.instance, "instance_initiated_shutdown_behavior", "stop") or "stop"
            if code == 0:
                machine.wanted = "terminated" if behavior == "terminate" else "stopped"
                reason = ("Client.InstanceInitiatedShutdown: Instance initiated shutdown", "Client.InstanceInitiatedShutdown")
            else:
                machine.wanted = "terminated"
                reason = ("Server.InternalError: Internal error on launch", "Server.InternalError")
        self._ended(machine, reason)

    def _ended(self, machine: Machine, reason: tuple[str, str] | None) -> None:
        if machine.wanted == "running":
            machine.wanted = "terminated"
        final = machine.wanted
        if machine.instance._state.name in ("pending", "running"):  # it ended by itself: EC2 passes through
            _set_state(machine.instance, "stopping" if final == "stopped" else "shutting-down")
        self._teardown_process(machine)
        volumes.machine_ended(self, machine, terminated=final == "terminated")
        _set_state(machine.instance, final, reason)
        machine.done.set()
        self._retire_idle_vpcs()
        if final == "terminated":
            iam_enforce.forget(machine.instance_id)
            shutil.rmtree(os.path.join(machine.directory, "upper"), ignore_errors=True)
            shutil.rmtree(os.path.join(machine.directory, "work"), ignore_errors=True)

    def _teardown_process(self, machine: Machine) -> None:
        machine.vpc.detach(machine.mac)
        netns.delete(machine.ns)

    # --- stop, terminate, interrupt -------------------------------------------------------------

    def end(self, instance_id: str, wanted: str) -> bool:
        """Stops or terminates a machine; returns False if the instance has none."""
        machine = self.machines.get(instance_id)
        if machine is None or machine.done.is_set():
            return False
        machine.wanted = wanted
        _set_state(machine.instance, "stopping" if wanted == "stopped" else "shutting-down")
        process = machine.process
        if process is None or process.poll() is not None:
            if machine.fault is not None and machine.fault.kind == "never-arrives":
                threading.Thread(target=self._ended, args=(machine, None), daemon=True).start()
            return True
        threading.Thread(target=self._stop_process, args=(machine,), daemon=True).start()
        return True

    def _stop_process(self, machine: Machine) -> None:
        process = machine.process
        if process is None:
            return
        pid = _nspawn_pid(machine)
        try:
            os.kill(pid or process.pid, signal.SIGTERM)
            process.wait(timeout=STOP_GRACE_S)
        except (OSError, subprocess.TimeoutExpired):
            self._kill(machine)

    def _kill(self, machine: Machine) -> None:
        if machine.process is not None and machine.process.poll() is None:
            try:
                os.killpg(machine.process.pid, signal.SIGKILL)
            except OSError:
                pass

    def fail(self, instance_id: str) -> dict[str, Any]:
        """The host under a running machine fails: every process on it dies at once, without a
        shutdown (nothing on it reports anything), and EC2 ends the instance as after an
        internal error (``shutting-down``, then ``terminated``, each sent to EventBridge)."""
        machine = self.machines.get(instance_id)
        process = machine.process if machine is not None else None
        if machine is None or machine.done.is_set() or process is None or process.poll() is not None:
            raise LookupError(f"instance {instance_id} has no running machine")
        self._die(machine)
        return {"InstanceId": instance_id, "failed": True}

    def _die(self, machine: Machine) -> None:
        """Every process of the machine dies at once: killing the container's init ends its
        whole PID namespace, then nspawn (nspawn alone may leave the container running)."""
        for child in _children(_nspawn_pid(machine)):
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
        self._kill(machine)

    def interrupt(self, instance_id: str, delay_s: float) -> dict[str, Any]:
        """A spot interruption: the notice on IMDS and EventBridge's warning now, termination
        ``delay_s`` later."""
        machine = self.machines.get(instance_id)
        if machine is None or machine.done.is_set():
            raise LookupError(f"instance {instance_id} has no running machine")
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + delay_s))
        machine.interruption = {"action": "terminate", "time": when}
        ec2_events.interruption_warning(machine.instance)
        threading.Timer(delay_s, self.end, args=(instance_id, "terminated")).start()
        return {"InstanceId": instance_id, "action": "terminate", "time": when}

    def describe(self) -> list[dict[str, Any]]:
        with self._lock:
            machines = list(self.machines.values())
        return [
            {
                "InstanceId": m.instance_id,
                "State": m.instance._state.name,
                "PrivateIpAddress": m.address,
                "Namespace": m.ns,
                "VpcNamespace": m.vpc.ns,
                "RoutedFromHost": m.vpc.host_route,
                "ClientAddress": m.vpc.client_address,
                "ClientNamespace": m.vpc.client_ns,
                "Fault": m.fault.kind if m.fault else None,
            }
            for m in machines
        ]

    def reset(self) -> None:
        """Ends every machine (the emulator's reset clears the instances they belong to)."""
        for machine in list(self.machines.values()):
            if not machine.done.is_set():
                self.end(machine.instance_id, "terminated")
        for machine in list(self.machines.values()):
            machine.done.wait(STOP_GRACE_S + 5)
        with self._lock:
            self.machines.clear()

    # --- teardown -------------------------------------------------------------------------------

    def close(self) -> None:
        """Ends every machine, namespace and mount of this run (SIGTERM/SIGINT of the emulator)."""
        self._closing = True
        for machine in list(self.machines.values()):
            if not machine.done.is_set():
                self.end(machine.instance_id, "terminated")
        deadline = time.monotonic() + STOP_GRACE_S + 5
        for machine in list(self.machines.values()):
            if machine.process is not None:
                machine.done.wait(max(0.0, deadline - time.monotonic()))
                self._kill(machine)
        for servers in self._servers.values():
            for server in servers:
                _shutdown(server)
        self.peerings.close()
        for vpc in self.vpcs.values():
            vpc.destroy()
        self.volumes.close()
        self.disks.close()
        for name in netns.names(self.run_prefix + "-"):
            netns.delete(name)
        shutil.rmtree(self.state_dir, ignore_errors=True)


def _shutdown(server: Any) -> None:
    try:
        server.shutdown()
        server.server_close()
    except Exception:  # noqa: BLE001 - best effort while stopping
        pass


def _nspawn_pid(machine: Machine) -> int | None:
    try:
        with open(os.path.join(machine.directory, "nspawn.pid"), encoding="utf-8") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def _children(pid: int | None) -> list[int]:
    """The direct children of ``pid`` (none when it is gone)."""
    if pid is None:
        return []
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="utf-8") as handle:
            return [int(p) for p in handle.read().split()]
    except (OSError, ValueError):
        return []


def _template_data(instance: Any) -> dict[str, Any]:
    tags = {tag["key"]: tag["value"] for tag in instance.get_tags()} if hasattr(instance, "get_tags") else {}
    template_id = tags.get("aws:ec2launchtemplate:id")
    if not template_id:
        return {}
    try:
        template = instance.ec2_backend.get_launch_template(template_id)
        return template.get_version(tags.get("aws:ec2launchtemplate:version", "$Default")).data
    except Exception:  # noqa: BLE001 - a template deleted since is no template
        return {}


def _tokens_required(instance: Any) -> bool:
    options = _template_data(instance).get("MetadataOptions", {}) or {}
    tokens = options.get("HttpTokens") or instance.metadata_options.http_tokens
    return tokens == "required"


def user_data(instance: Any) -> bytes | None:
    if instance.user_data:
        raw = instance.user_data
        text = raw[0] if isinstance(raw, list) else raw
        encoded = text.as_bytes() if hasattr(text, "as_bytes") else str(text).encode()
        return base64.b64decode(encoded)
    template = _template_data(instance).get("UserData")
    return base64.b64decode(template) if template else None


def instance_profile_role(instance: Any) -> Any | None:
    from moto.iam.models import iam_backends

    association = instance.ec2_backend.iam_instance_profile_associations.get(instance.id)
    profile = association.iam_instance_profile if association is not None else None
    if profile is None:
        spec = _template_data(instance).get("IamInstanceProfile") or {}
        iam = iam_backends[instance.ec2_backend.account_id]["global"]
        for candidate in iam.instance_profiles.values():
            if candidate.arn == spec.get("Arn") or candidate.name == spec.get("Name"):
                profile = candidate
    return profile.roles[0] if profile is not None and profile.roles else None


def instance_credentials(machine: Machine) -> dict[str, Any] | None:
    role = instance_profile_role(machine.instance)
    if role is None:
        return None
    return iam_enforce.credentials_for(machine.account, machine.region, role, machine.instance_id)


def metadata_tree(machine: Machine, credentials: Any) -> dict[str, Any]:
    """The instance's metadata, built from what EC2 knows of it now."""
    instance = machine.instance
    backend = instance.ec2_backend
    subnet = backend.get_subnet(instance.subnet_id)
    vpc = backend.vpcs[subnet.vpc_id]
    hostname = vpcnet.ec2_hostname(machine.address, machine.region)
    zone = subnet.availability_zone
    groups = [group.id for group in instance.nics[0].group_set]
    tree: dict[str, Any] = {
        "ami-id": instance.image_id,
        "ami-launch-index": "0",
        "hostname": hostname,
        "instance-id": instance.id,
        "instance-type": instance.instance_type,
        "instance-life-cycle": "spot" if instance.lifecycle == "spot" else "on-demand",
        "local-hostname": hostname,
        "local-ipv4": machine.address,
        "mac": machine.mac,
        "reservation-id": getattr(instance, "reservation_id", "r-0"),
        "security-groups": [group.name for group in instance.nics[0].group_set],
        "placement": {"availability-zone": zone, "region": machine.region},
        "network": {"interfaces": {"macs": {machine.mac: {
            "device-number": "0",
            "interface-id": instance.nics[0].id,
            "local-hostname": hostname,
            "local-ipv4s": machine.address,
            "mac": machine.mac,
            "owner-id": machine.account,
            "security-group-ids": groups,
            "subnet-id": subnet.id,
            "subnet-ipv4-cidr-block": subnet.cidr_block,
            "vpc-id": vpc.id,
            "vpc-ipv4-cidr-block": vpc.cidr_block,
            "vpc-ipv4-cidr-blocks": vpc.cidr_block,
        }}}},
        "services": {"domain": "amazonaws.com", "partition": "aws"},
        "_dynamic": {"instance-identity": {"document": json.dumps({
            "accountId": machine.account, "architecture": "x86_64", "availabilityZone": zone,
            "imageId": instance.image_id, "instanceId": instance.id, "instanceType": instance.instance_type,
            "pendingTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(machine.started_at or time.time())),
            "privateIp": machine.address, "region": machine.region, "version": "2017-09-30",
        })}},
    }
    key = backend.key_pairs.get(instance.key_name) if instance.key_name else None
    if key is not None:
        tree["public-keys"] = {"_listing": f"0={key.key_name}", "0": {"openssh-key": key.material_public.decode()
                                                                      if isinstance(key.material_public, bytes)
                                                                      else key.material_public}}
    options = _template_data(instance).get("MetadataOptions", {}) or {}
    if (options.get("InstanceMetadataTags") or instance.metadata_options.instance_metadata_tags) == "enabled":
        tree["tags"] = {"instance": {tag["key"]: tag["value"] for tag in instance.get_tags()
                                     if not tag["key"].startswith("aws:")}}
    creds = credentials(machine)
    if creds is not None:
        role_name = creds.pop("_role")
        tree["iam"] = {
            "info": json.dumps({"Code": "Success", "InstanceProfileArn": creds.pop("_profile_arn", ""),
                                "LastUpdated": creds["LastUpdated"]}),
            "security-credentials": {role_name: json.dumps(creds)},
        }
    if machine.interruption is not None:
        tree["spot"] = {"instance-action": json.dumps(machine.interruption),
                        "termination-time": machine.interruption["time"]}
    return tree


CLOUD_CONFIG = """\
# hpcemu (the local EC2 of hpcforge's emulator): this instance's datasource is EC2's IMDS.
datasource_list: [ Ec2 ]
datasource:
  Ec2:
    strict_id: false
    metadata_urls: [ "http://169.254.169.254" ]
    max_wait: 30
    timeout: 5
"""

MOUNT_HELPER = r"""#!/bin/sh
# hpcemu: this kernel has neither NFS nor Lustre, so a file system is mounted as a bind of the
# emulator's shared directory for it: every instance sees the same files. The server is
#  - a DNS name: EFS fs-….efs.<region>.amazonaws.com:/path, FSx fs-….fsx.<region>.amazonaws.com@tcp:/name
#    (each resolves only in its own region, as their names do);
#  - an EFS mount target's IPv4 address (as from a peered VPC): it must answer on TCP 2049 over
#    the emulated network (routes, peering, security groups), a refused connection proving the
#    path; which file system it serves is in SHARES/.mount-targets/<this VPC's id>.
set -eu
export LC_ALL=C
spec=$1; target=$2; shift 2
options=
while [ $# -gt 0 ]; do
  case $1 in -o) options=${2:-}; shift 2 || shift ;; -o*) options=${1#-o}; shift ;; *) shift ;; esac
done
me=$(basename "$0")
server=${spec%%:*}; server=${server%@tcp}
fail() { echo "$me: $*" >&2; exit 32; }
case $server in
  fs-*.efs.*.amazonaws.com|fs-*.fsx.*.amazonaws.com)
    region=$(printf '%s' "$server" | sed -n 's/^fs-[0-9a-f]*\.\(efs\|fsx\)\.\([a-z0-9-]*\)\.amazonaws\.com$/\2/p')
    own=$(cat /etc/hpcemu/region 2>/dev/null || true)
    [ -z "$own" ] || [ "$region" = "$own" ] || fail "Failed to resolve server $server: Name or service not known"
    fsid=${server%%.*} ;;
  fs-*.fsx.*)
    fsid=${server%%.*} ;;
  *[!0-9.]*|"")
    fail "$spec: not an EFS or FSx DNS name, nor a mount target's address" ;;
  *)
    if probe=$(timeout 3 bash -c "exec 3<>/dev/tcp/$server/2049" 2>&1) || echo "$probe" | grep -q 'Connection refused'; then
      :
    else
      reason=$(echo "$probe" | sed -n 's/.*: \(No route to host\|Network is unreachable\)$/\1/p' | head -n1)
      fail "$spec: mount target unreachable (${reason:-Connection timed out})"
    fi
    map=SHARES/.mount-targets/$(cat /etc/hpcemu/vpc-id 2>/dev/null || true)
    fsid=$(awk -v a="$server" '$1 == a { print $2 }' "$map" 2>/dev/null || true)
    [ -n "$fsid" ] || fail "$spec: Connection refused (no EFS mount target at $server)" ;;
esac
dir=SHARES/$fsid
[ -d "$dir" ] || fail "$spec: no such file system (mount target unreachable)"
mount --bind "$dir" "$target"
# The flags the kernel's client applies for these options hold on the bind as well: a nosuid
# /home runs no setuid file, as on NFS or Lustre.
flags=$(printf '%s' "$options" | tr ',' '\n' | grep -xE 'nosuid|nodev|noexec|ro' | paste -sd, - || true)
[ -z "$flags" ] || mount -o "remount,bind,$flags" "$target"
""".replace("SHARES", SHARES_IN_MACHINE)


# On a cgroup v1 host nspawn mounts the controller hierarchies read-only; on a VM they are the
# machine's own, and slurmd's cgroup plugins (proctrack, task) create their groups there.
CGROUP_UNIT = "hpcemu-cgroup-rw.service"
CGROUP_RW = """[Unit]
Description=hpcemu: writable cgroup controllers, as on a virtual machine
DefaultDependencies=no
Before=sysinit.target
ConditionPathIsMountPoint=/sys/fs/cgroup/freezer

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'for d in /sys/fs/cgroup/*/; do mount -o remount,bind,rw "$d"; done'
"""


def write_overlay(upper: str, lower: str, machine: Machine) -> None:
    """The emulator's own files in the instance's upper layer (never in the image)."""
    endpoint = f"http://{vpcnet.ENDPOINT_ADDRESS}"
    files = {
        "etc/fstab": ("# hpcemu: the root is this instance's overlay; no other disks\n", 0o644),
        "etc/cloud/cloud.cfg.d/99-hpcemu.cfg": (CLOUD_CONFIG, 0o644),
        "etc/systemd/system.conf.d/90-hpcemu.conf": (
            f'[Manager]\nDefaultEnvironment="AWS_ENDPOINT_URL={endpoint}"\n', 0o644
        ),
        "etc/environment": (_read(os.path.join(lower, "etc/environment")) + f"AWS_ENDPOINT_URL={endpoint}\n", 0o644),
        "etc/hpcemu/instance-id": (machine.instance_id + "\n", 0o644),
        # The mount helper's: EFS names resolve in their own region only; the VPC's mount targets.
        "etc/hpcemu/region": (machine.region + "\n", 0o644),
        "etc/hpcemu/vpc-id": (machine.vpc.vpc_id + "\n", 0o644),
        # sudo resets the environment; the endpoint stays (and root's SDK config names it too).
        "etc/sudoers.d/90-hpcemu": ('Defaults env_keep += "AWS_ENDPOINT_URL"\n', 0o440),
        "root/.aws/config": (f"[default]\nendpoint_url = {endpoint}\n", 0o600),
        f"etc/systemd/system/{CGROUP_UNIT}": (CGROUP_RW, 0o644),
    }
    # usr/sbin, not sbin: the image's /sbin is a link to usr/sbin (merged /usr).
    for helper in ("mount.nfs4", "mount.nfs", "mount.lustre"):
        files[f"usr/sbin/{helper}"] = (MOUNT_HELPER, 0o755)
    for relative, (text, mode) in files.items():
        path = os.path.join(upper, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(path, mode)
    os.chmod(os.path.join(upper, "root"), 0o700)  # as the image's /root
    os.chmod(os.path.join(upper, "root/.aws"), 0o700)
    wants = os.path.join(upper, "etc/systemd/system/sysinit.target.wants", CGROUP_UNIT)
    os.makedirs(os.path.dirname(wants), exist_ok=True)
    if not os.path.lexists(wants):
        os.symlink(f"../{CGROUP_UNIT}", wants)
    # The console is read-only (GetConsoleOutput reads it): no login prompt on it. NFS mounts are
    # binds here (the helpers above), and a container cannot mount rpc_pipefs: no kernel NFS client.
    for unit in ("console-getty.service", "run-rpc_pipefs.mount"):
        masked = os.path.join(upper, "etc/systemd/system", unit)
        os.makedirs(os.path.dirname(masked), exist_ok=True)
        if not os.path.lexists(masked):
            os.symlink("/dev/null", masked)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return ""
    return text if not text or text.endswith("\n") else text + "\n"


# systemd 258 dropped cgroup v1: a guest of that or later must get the unified hierarchy.
FIRST_SYSTEMD_WITHOUT_CGROUP_V1 = 258


def guest_systemd_version(root: str) -> int | None:
    """The systemd release of an image's root, from its libsystemd-shared-<version>.so."""
    directories = ["usr/lib/systemd", "usr/lib64/systemd"]
    # Debian's multiarch directories: usr/lib/x86_64-linux-gnu/systemd.
    try:
        directories += [f"usr/lib/{d}/systemd" for d in os.listdir(os.path.join(root, "usr/lib")) if "-linux-" in d]
    except OSError:
        pass
    for directory in directories:
        try:
            names = os.listdir(os.path.join(root, directory))
        except OSError:
            continue
        for name in names:
            match = re.fullmatch(r"libsystemd-shared-(\d+)(?:[.~-].*)?\.so", name)
            if match:
                return int(match.group(1))
    return None


def needs_unified_cgroups(root: str) -> bool:
    """Whether the guest's systemd refuses cgroup v1, which nspawn gives a guest on a host
    without the unified hierarchy at /sys/fs/cgroup unless told otherwise."""
    version = guest_systemd_version(root)
    return version is not None and version >= FIRST_SYSTEMD_WITHOUT_CGROUP_V1


HOST_CGROUP2 = "/sys/fs/cgroup/unified"


def host_cgroup2() -> str | None:
    """Where the host has a cgroup2 hierarchy, mounting one at /sys/fs/cgroup/unified (as a
    hybrid host has it) when it has none; None with the reason printed when it cannot."""
    with open("/proc/self/mounts", encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            if len(fields) > 2 and fields[2] == "cgroup2":
                return fields[1]
    os.makedirs(HOST_CGROUP2, exist_ok=True)
    done = subprocess.run(["mount", "-t", "cgroup2", "cgroup2", HOST_CGROUP2], capture_output=True, text=True)
    if done.returncode != 0:
        log.warning("no cgroup2 hierarchy on the host, and mounting one at %s failed: %s", HOST_CGROUP2, done.stderr)
        return None
    return HOST_CGROUP2


def boot_script(machine: Machine, shares_dir: str) -> str:
    """Runs in the machine's own mount and time namespaces, inside its network namespace.
    /sys is this network namespace's sysfs, so the instance sees its own eth0. A guest whose
    systemd has no cgroup v1 gets the unified hierarchy (the host must have cgroup2 mounted:
    unified, or hybrid at /sys/fs/cgroup/unified).
    """
    d = machine.directory
    machine_uuid = uuid.uuid5(uuid.NAMESPACE_URL, f"hpcemu:{machine.instance_id}")
    unified = "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 " if needs_unified_cgroups(machine.lower) else ""
    return f"""set -eu
mount -t overlay overlay -o lowerdir={machine.lower},upperdir={d}/upper,workdir={d}/work {d}/root
mount --rbind /sys/fs/cgroup {d}/cgroup
mount -t sysfs sysfs /sys
mount --move {d}/cgroup /sys/fs/cgroup
echo $$ > {d}/nspawn.pid
exec env {unified}systemd-nspawn --quiet --boot --register=no --keep-unit --directory={d}/root \\
  --machine={machine.instance_id} --uuid={machine_uuid} --capability=CAP_NET_ADMIN \\
  --resolv-conf=off --timezone=off --link-journal=no --console=read-only \\
  --bind={shares_dir}:{SHARES_IN_MACHINE} systemd.show_status=yes
"""
