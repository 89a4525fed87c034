"""Boot mode: EBS volumes and network interfaces that outlive the instances they are attached to.

An EBS volume is a sparse file of its size (``<run>/volumes/<vol-id>.img``), made on its first
attachment. CreateSnapshot copies a volume's file as it is then (``<run>/snapshots/<snap-id>.img``,
sparse; crash-consistent, as an EBS snapshot of an attached volume is), and CreateVolume from
that snapshot starts from the copy (DeleteSnapshot, in ``ec2_images``, drops it). AttachVolume to a booted machine puts the file behind a loop device and makes the
device node inside the machine as a Nitro instance sees it: ``/dev/nvme<N>n1`` with udev's
``/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol<hex>`` link (the volume id is the NVMe
serial), so the product finds it the way it does on EC2. DetachVolume, and the end of the
machine, remove the node and the loop device; the file keeps the data for the next attachment.

moto does not check what EC2 refuses here, and this module does: a volume attached elsewhere
(``VolumeInUse``) or in another zone (``InvalidVolume.ZoneMismatch``), a ModifyVolume that would
shrink a volume (``InvalidParameterValue``; a larger size grows the attached device at once), an
instance that is not pending or running, the deletion of a volume whose data a machine still holds, and a network
interface that is still attached to another instance when RunInstances names it
(``InvalidNetworkInterface.InUse``). A network interface that outlives its instance
(DeleteOnTermination false) becomes ``available`` once the instance is terminated, as on EC2.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any

from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models.elastic_block_store import EBSBackend
from moto.ec2.models.elastic_network_interfaces import NetworkInterfaceBackend
from moto.ec2.models.instances import Instance, InstanceBackend

log = logging.getLogger("emulator.volumes")

# How long a plug waits for the machine's init (an attachment right after RunInstances).
PLUG_WAIT_S = 60.0
BY_ID = "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_"


@dataclass
class Plugged:
    volume_id: str
    loop: str
    device: str


class VolumeStore:
    """The volumes' files and which machine holds each one's loop device."""

    def __init__(self, state_dir: str) -> None:
        self.directory = os.path.join(state_dir, "volumes")
        os.makedirs(self.directory, exist_ok=True)
        self.snapshots = os.path.join(state_dir, "snapshots")
        os.makedirs(self.snapshots, exist_ok=True)
        self.plugged: dict[str, dict[str, Plugged]] = {}  # instance id -> volume id -> plug
        self.attached: dict[str, dict[str, int]] = {}  # instance id -> volume id -> GiB (AttachVolume)
        self._lock = threading.RLock()

    def path(self, volume_id: str) -> str:
        return os.path.join(self.directory, f"{volume_id}.img")

    def holder(self, volume_id: str) -> str | None:
        with self._lock:
            for instance_id, volumes in self.plugged.items():
                if volume_id in volumes:
                    return instance_id
        return None

    def plug(self, machine: Any, volume_id: str, size_gib: int) -> None:
        """Makes the volume's device inside the running machine (waits for its init)."""
        path = self.path(volume_id)
        if not os.path.exists(path):
            with open(path, "wb") as handle:
                handle.truncate(size_gib << 30)
        elif os.path.getsize(path) < size_gib << 30:  # ModifyVolume grew it
            os.truncate(path, size_gib << 30)
        pid = _wait_init(machine)
        loop = _run(["losetup", "--find", "--show", path]).strip()
        with self._lock:
            mine = self.plugged.setdefault(machine.instance_id, {})
            used = {p.device for p in mine.values()}
            index = next(i for i in range(1, 64) if f"/dev/nvme{i}n1" not in used)
            plug = Plugged(volume_id, loop, f"/dev/nvme{index}n1")
            mine[volume_id] = plug
        rdev = os.stat(loop).st_rdev
        serial = volume_id.replace("-", "")
        script = (
            f"mknod {plug.device} b {os.major(rdev)} {os.minor(rdev)} && mkdir -p /dev/disk/by-id && "
            f"ln -sfn ../../{os.path.basename(plug.device)} {BY_ID}{serial}"
        )
        _run(["nsenter", "-t", str(pid), "-m", "--", "sh", "-c", script])
        log.info("volume %s is %s (%s) on %s", volume_id, plug.device, loop, machine.instance_id)

    def unplug(self, machine: Any, volume_id: str) -> None:
        with self._lock:
            plug = self.plugged.get(machine.instance_id, {}).pop(volume_id, None)
        if plug is None:
            return
        pid = _init_pid(machine)
        if pid is not None:
            serial = volume_id.replace("-", "")
            script = f"rm -f {plug.device} {BY_ID}{serial}"
            _run(["nsenter", "-t", str(pid), "-m", "--", "sh", "-c", script], check=False)
        # A mounted file system keeps the loop busy until the machine is gone: detach lazily.
        _run(["losetup", "--detach", plug.loop], check=False)

    def attach(self, machine: Any, volume_id: str, size_gib: int) -> None:
        """Records AttachVolume and makes the device in the background (the machine may still
        be starting)."""
        with self._lock:
            self.attached.setdefault(machine.instance_id, {})[volume_id] = size_gib
        self._plug_later(machine, volume_id, size_gib)

    def detach(self, machine: Any, volume_id: str) -> None:
        with self._lock:
            self.attached.get(machine.instance_id, {}).pop(volume_id, None)
        self.unplug(machine, volume_id)

    def replug(self, machine: Any) -> None:
        """After a reboot the machine's /dev is new: its attached volumes are made again."""
        with self._lock:
            volumes = dict(self.attached.get(machine.instance_id, {}))
        for volume_id, size_gib in volumes.items():
            if self.holder(volume_id) is None:
                self._plug_later(machine, volume_id, size_gib)

    def _plug_later(self, machine: Any, volume_id: str, size_gib: int) -> None:
        def plug() -> None:
            try:
                self.plug(machine, volume_id, size_gib)
            except Exception as err:  # noqa: BLE001 - the instance sees no device, as a failed attachment
                log.error("volume %s could not be attached to %s: %s", volume_id, machine.instance_id, err)

        threading.Thread(target=plug, name=f"plug-{volume_id}", daemon=True).start()

    def unplug_all(self, machine: Any, forget: bool) -> None:
        with self._lock:
            volumes = list(self.plugged.get(machine.instance_id, {}))
        for volume_id in volumes:
            self.unplug(machine, volume_id)
        with self._lock:
            self.plugged.pop(machine.instance_id, None)
            if forget:
                self.attached.pop(machine.instance_id, None)

    def grow(self, volume_id: str, size_gib: int) -> None:
        """ModifyVolume to a larger size: the file grows, and a plugged loop device takes the new
        capacity at once, as an attached EBS volume does."""
        path = self.path(volume_id)
        with self._lock:
            for volumes in self.attached.values():
                if volume_id in volumes:
                    volumes[volume_id] = size_gib
            loops = [p.loop for v in self.plugged.values() for p in v.values() if p.volume_id == volume_id]
        if os.path.exists(path) and os.path.getsize(path) < size_gib << 30:
            os.truncate(path, size_gib << 30)
        for loop in loops:
            _run(["losetup", "--set-capacity", loop])
        log.info("volume %s grew to %d GiB", volume_id, size_gib)

    def remove(self, volume_id: str) -> None:
        try:
            os.remove(self.path(volume_id))
        except FileNotFoundError:
            pass

    def snapshot_path(self, snapshot_id: str) -> str:
        return os.path.join(self.snapshots, f"{snapshot_id}.img")

    def snapshot(self, volume_id: str, snapshot_id: str) -> None:
        """The volume's data as it is now, kept as the snapshot's (nothing for a volume never
        attached: it holds only zeros)."""
        source = self.path(volume_id)
        if os.path.exists(source):
            _run(["cp", "--sparse=always", source, self.snapshot_path(snapshot_id)])
            log.info("snapshot %s holds volume %s's data", snapshot_id, volume_id)

    def restore(self, snapshot_id: str, volume_id: str) -> None:
        """A new volume starts from the snapshot's data (its file grows to the volume's size
        when attached)."""
        source = self.snapshot_path(snapshot_id)
        if os.path.exists(source):
            _run(["cp", "--sparse=always", source, self.path(volume_id)])
            log.info("volume %s starts from snapshot %s", volume_id, snapshot_id)

    def forget_snapshot(self, snapshot_id: str) -> None:
        try:
            os.remove(self.snapshot_path(snapshot_id))
        except FileNotFoundError:
            pass

    def close(self) -> None:
        with self._lock:
            loops = [p.loop for volumes in self.plugged.values() for p in volumes.values()]
            self.plugged.clear()
        for loop in loops:
            _run(["losetup", "--detach", loop], check=False)


def detach_stale_loops(state_dir: str) -> list[str]:
    """Loop devices a crashed run left on its volume files."""
    directory = os.path.join(state_dir, "volumes")
    if not os.path.isdir(directory):
        return []
    detached = []
    for name in os.listdir(directory):
        for line in _run(["losetup", "--associated", os.path.join(directory, name)], check=False).splitlines():
            loop = line.split(":", 1)[0]
            if loop:
                _run(["losetup", "--detach", loop], check=False)
                detached.append(loop)
    return detached


def _init_pid(machine: Any) -> int | None:
    """The machine's PID 1, or None before it exists: the child of nspawn that is PID 1 in its
    own PID namespace. While the machine starts, nspawn's first child is a helper that sets up
    the root and exits; taken for PID 1, an nsenter into it failed once it was gone ("cannot
    open /proc/N/ns/mnt", two booted tests beside each other), and one in time would have made
    the device in the helper's /dev instead of the machine's."""
    try:
        with open(os.path.join(machine.directory, "nspawn.pid"), encoding="utf-8") as handle:
            nspawn = int(handle.read().strip())
        with open(f"/proc/{nspawn}/task/{nspawn}/children", encoding="utf-8") as handle:
            children = [int(pid) for pid in handle.read().split()]
    except (OSError, ValueError):
        return None
    return next((child for child in children if _pid_one_of_its_namespace(child)), None)


def _pid_one_of_its_namespace(pid: int) -> bool:
    """Whether ``pid`` is PID 1 of a PID namespace below the host's (``NSpid: <host pid> 1``)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("NSpid:"):
                    ids = line.split()[1:]
                    return len(ids) > 1 and ids[-1] == "1"
    except OSError:
        pass
    return False


def _wait_init(machine: Any) -> int:
    deadline = time.monotonic() + PLUG_WAIT_S
    while time.monotonic() < deadline:
        if machine.done.is_set():
            raise RuntimeError(f"instance {machine.instance_id} ended before its volume was attached")
        pid = _init_pid(machine)
        if pid is not None:
            return pid
        time.sleep(0.2)
    raise RuntimeError(f"instance {machine.instance_id} did not start within {PLUG_WAIT_S:.0f} s")


def _run(args: list[str], check: bool = True) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


# --- moto hooks --------------------------------------------------------------------------------


def install(manager: Any) -> None:
    store: VolumeStore = manager.volumes
    original_attach, original_detach = EBSBackend.attach_volume, EBSBackend.detach_volume
    original_delete = EBSBackend.delete_volume
    original_modify = EBSBackend.modify_volume
    original_create_volume = EBSBackend.create_volume
    original_create_snapshot = EBSBackend.create_snapshot
    original_run = InstanceBackend.run_instances
    original_terminate = Instance.terminate

    def attach_volume(self: Any, volume_id: str, instance_id: str, device_path: str, delete_on_termination: bool = False) -> Any:
        volume = self.get_volume(volume_id)
        instance = self.get_instance(instance_id)
        machine = manager.machines.get(instance_id)
        if machine is None:  # moto's own launch-time volumes (root, the template's mappings)
            return original_attach(self, volume_id, instance_id, device_path, delete_on_termination)
        holder = volume.attachment.instance.id if volume.attachment else store.holder(volume_id)
        if holder is not None:
            raise EC2ClientError("VolumeInUse", f"{volume_id} is already attached to an instance")
        if volume.zone.name != instance.placement.zone:
            raise EC2ClientError(
                "InvalidVolume.ZoneMismatch",
                f"The volume '{volume_id}' is not in the same availability zone as instance '{instance_id}'",
            )
        if instance._state.name not in ("pending", "running"):
            raise EC2ClientError("IncorrectState", f"Instance '{instance_id}' is not 'running'.")
        attachment = original_attach(self, volume_id, instance_id, device_path, delete_on_termination)
        if not machine.done.is_set():
            store.attach(machine, volume_id, volume.size)
        return attachment

    def detach_volume(self: Any, volume_id: str, instance_id: str | None, device_path: str | None) -> Any:
        volume = self.get_volume(volume_id)
        if not instance_id and volume.attachment:  # InstanceId is optional
            instance_id = volume.attachment.instance.id
        attachment = original_detach(self, volume_id, instance_id, device_path)
        instance = attachment.instance
        machine = manager.machines.get(instance.id)
        # moto detaches everything when TerminateInstances is called; on EC2 the volumes stay
        # attached until the instance is gone, and so does the machine's device here.
        if machine is not None and not getattr(instance, "_hpcemu_terminating", False):
            store.detach(machine, volume_id)
        return attachment

    def delete_volume(self: Any, volume_id: str) -> Any:
        holder = store.holder(volume_id)
        if holder is not None:
            raise EC2ClientError("VolumeInUse", f"Volume {volume_id} is currently attached to {holder}")
        volume = original_delete(self, volume_id)
        store.remove(volume_id)
        return volume

    def create_volume(self: Any, size: Any, zone_name: str, snapshot_id: str | None = None, *args: Any, **kwargs: Any) -> Any:
        if snapshot_id and size not in (None, ""):
            smallest = int(self.get_snapshot(snapshot_id).volume.size)
            if int(size) < smallest:
                raise EC2ClientError(
                    "InvalidParameterValue", f"Volume of {size}GiB is too small; minimum is {smallest}GiB."
                )
        volume = original_create_volume(self, size, zone_name, snapshot_id, *args, **kwargs)
        if snapshot_id:
            store.restore(snapshot_id, volume.id)
        return volume

    def create_snapshot(self: Any, volume_id: str, description: str, *args: Any, **kwargs: Any) -> Any:
        snapshot = original_create_snapshot(self, volume_id, description, *args, **kwargs)
        store.snapshot(volume_id, snapshot.id)
        return snapshot

    def modify_volume(self: Any, volume_id: str, target_size: Any = None, *args: Any, **kwargs: Any) -> Any:
        volume = self.get_volume(volume_id)
        size = None if target_size in (None, "") else int(target_size)
        if size is not None and size < int(volume.size):
            raise EC2ClientError("InvalidParameterValue", "New size cannot be smaller than existing size")
        modified = original_modify(self, volume_id, target_size, *args, **kwargs)
        if size is not None:
            store.grow(volume_id, size)
        return modified

    def run_instances(self: Any, image_id: str, count: int, user_data: Any, security_group_names: Any, **kwargs: Any) -> Any:
        for nic in kwargs.get("nics") or []:
            eni_id = nic.get("NetworkInterfaceId")
            if not eni_id:
                continue
            eni = self.get_network_interface(eni_id)
            if eni.instance is not None:
                raise EC2ClientError(
                    "InvalidNetworkInterface.InUse", f"Interface: [{eni_id}] in use."
                )
        return original_run(self, image_id, count, user_data, security_group_names, **kwargs)

    def terminate(self: Any) -> Any:
        self._hpcemu_terminating = True
        return original_terminate(self)

    original_create_eni = NetworkInterfaceBackend.create_network_interface
    original_delete_eni = NetworkInterfaceBackend.delete_network_interface

    def create_network_interface(self: Any, subnet: Any, private_ip_address: Any, *args: Any, **kwargs: Any) -> Any:
        # moto draws a random address of the subnet (its network, broadcast or an instance's);
        # EC2 hands out a free one.
        addresses = kwargs.get("private_ip_addresses") or (args[0] if args else None)
        if not private_ip_address and not addresses and hasattr(subnet, "get_available_subnet_ip"):
            private_ip_address = subnet.get_available_subnet_ip(instance=None)
        return original_create_eni(self, subnet, private_ip_address, *args, **kwargs)

    def delete_network_interface(self: Any, eni_id: str) -> None:
        eni = self.get_network_interface(eni_id)
        if eni.instance is not None and not getattr(eni.instance, "_hpcemu_terminating", False):
            raise EC2ClientError(
                "InvalidNetworkInterface.InUse", f"The network interface '{eni_id}' is currently in use."
            )
        original_delete_eni(self, eni_id)
        if eni.private_ip_address and hasattr(eni.subnet, "del_subnet_ip"):
            eni.subnet.del_subnet_ip(eni.private_ip_address)

    NetworkInterfaceBackend.create_network_interface = create_network_interface  # type: ignore[method-assign]
    NetworkInterfaceBackend.delete_network_interface = delete_network_interface  # type: ignore[method-assign]
    Instance.terminate = terminate  # type: ignore[method-assign]
    EBSBackend.attach_volume = attach_volume  # type: ignore[method-assign]
    EBSBackend.detach_volume = detach_volume  # type: ignore[method-assign]
    EBSBackend.delete_volume = delete_volume  # type: ignore[method-assign]
    EBSBackend.modify_volume = modify_volume  # type: ignore[method-assign]
    EBSBackend.create_volume = create_volume  # type: ignore[method-assign]
    EBSBackend.create_snapshot = create_snapshot  # type: ignore[method-assign]
    InstanceBackend.run_instances = run_instances  # type: ignore[method-assign]


def machine_ended(manager: Any, machine: Any, terminated: bool) -> None:
    """The machine's loop devices go; a terminated instance's surviving interfaces are free."""
    manager.volumes.unplug_all(machine, forget=terminated)
    if not terminated:
        return
    if not getattr(machine.instance, "_hpcemu_terminating", False):
        # It ended by itself (its host failed, it died at boot, it shut down to terminate): EC2
        # lets go of its volumes as after TerminateInstances (data volumes available again,
        # volumes deleted on termination gone); the devices went with the machine above.
        machine.instance._hpcemu_terminating = True
        machine.instance.teardown_defaults()
    # Free, not detached: moto describes a terminated instance through its first interface.
    for eni in list(machine.instance.nics.values()):
        if eni.instance is machine.instance and not eni.delete_on_termination:
            eni.instance, eni.attachment_id, eni.attach_time = None, None, None
            eni.status, eni.device_index = "available", None
