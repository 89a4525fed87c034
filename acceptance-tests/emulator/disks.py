"""Root file systems of booted instances, read from the AMI's own snapshot.

An AMI registered from a snapshot written through the EBS direct APIs (``hpc-image
publish``) boots that disk: its blocks are written once into a sparse raw file, the root
partition (the GPT partition that is not the EFI system partition) is loop-mounted read-only
and becomes the lower layer of each instance's overlay. Copies of the image (CopyImage) share
the blocks, so they boot too. An AMI with no such disk (moto's built-in ones) is refused.
"""

from __future__ import annotations

import os
import struct
import subprocess
import threading
import uuid
from dataclasses import dataclass

from moto.ec2.models import ec2_backends

import ebs
from ec2_resources import TimedImage

SECTOR = 512
ESP_TYPE = uuid.UUID("c12a7328-f81f-11d2-ba4b-00a0c93ec93b")


class DiskError(RuntimeError):
    """The AMI cannot be booted; the message names the AMI and why."""


@dataclass
class RootDisk:
    snapshot_id: str
    raw: str
    mountpoint: str


def root_snapshot(account: str, region: str, image_id: str) -> str:
    """The snapshot id of an AMI's root device, if the AMI has a disk written here."""
    image = ec2_backends[account][region].amis.get(image_id)
    if image is None:
        raise DiskError(f"boot mode: AMI {image_id} does not exist in {region}")
    if not isinstance(image, TimedImage):
        raise DiskError(
            f"boot mode: AMI {image_id} ({image.name}) has no disk to boot: only images registered from a "
            "snapshot uploaded through the EBS direct APIs (hpc-image publish) or copied from one can boot"
        )
    for mapping in image.block_device_mappings:
        if mapping.get("DeviceName") == image.root_device_name and mapping.get("Ebs", {}).get("SnapshotId"):
            snapshot_id = mapping["Ebs"]["SnapshotId"]
            if ebs.has_blocks(account, region, snapshot_id):
                return snapshot_id
    raise DiskError(
        f"boot mode: AMI {image_id} ({image.name}): its root snapshot holds no blocks written through the "
        "EBS direct APIs, so there is no disk to boot"
    )


def root_partition(raw: str) -> tuple[int, int]:
    """(offset, size) in bytes of the first GPT partition that is not the EFI system partition."""
    with open(raw, "rb") as disk:
        disk.seek(SECTOR)
        header = disk.read(92)
        if header[:8] != b"EFI PART":
            raise DiskError(f"{raw}: no GPT partition table")
        entries_lba, count, entry_size = struct.unpack_from("<QII", header, 72)
        disk.seek(entries_lba * SECTOR)
        table = disk.read(count * entry_size)
    for index in range(count):
        entry = table[index * entry_size : (index + 1) * entry_size]
        type_guid = uuid.UUID(bytes_le=entry[:16])
        if type_guid.int == 0 or type_guid == ESP_TYPE:
            continue
        first, last = struct.unpack_from("<QQ", entry, 32)
        return first * SECTOR, (last - first + 1) * SECTOR
    raise DiskError(f"{raw}: no root partition in the GPT")


class DiskStore:
    """Assembled disks and their read-only root mounts, one per snapshot, kept until ``close``."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = os.path.join(state_dir, "disks")
        os.makedirs(self.state_dir, exist_ok=True)
        self._disks: dict[str, RootDisk] = {}
        self._lock = threading.Lock()

    def root(self, account: str, region: str, image_id: str) -> str:
        snapshot_id = root_snapshot(account, region, image_id)
        with self._lock:
            disk = self._disks.get(snapshot_id)
            if disk is None:
                disk = self._assemble(account, region, snapshot_id)
                self._disks[snapshot_id] = disk
            return disk.mountpoint

    def _assemble(self, account: str, region: str, snapshot_id: str) -> RootDisk:
        raw = os.path.join(self.state_dir, f"{snapshot_id}.raw")
        size, blocks = ebs.snapshot_blocks(account, region, snapshot_id)
        with open(raw, "wb") as out:
            out.truncate(size)
            for index, data in blocks:
                out.seek(index * ebs.BLOCK_SIZE)
                out.write(data)
        offset, length = root_partition(raw)
        mountpoint = os.path.join(self.state_dir, f"{snapshot_id}.root")
        os.makedirs(mountpoint, exist_ok=True)
        done = subprocess.run(
            ["mount", "-o", f"loop,ro,noload,offset={offset},sizelimit={length}", raw, mountpoint],
            capture_output=True, text=True, timeout=60, check=False,
        )
        if done.returncode != 0:
            raise DiskError(f"mounting the root of {snapshot_id}: {done.stderr.strip()}")
        return RootDisk(snapshot_id, raw, mountpoint)

    def close(self) -> None:
        with self._lock:
            for disk in self._disks.values():
                subprocess.run(["umount", "-l", disk.mountpoint], capture_output=True, timeout=60, check=False)
                for path in (disk.raw,):
                    try:
                        os.remove(path)
                    except OSError:
                        pass
            self._disks.clear()
