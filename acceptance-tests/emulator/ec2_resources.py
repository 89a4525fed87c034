"""EC2 snapshots and images whose state follows the clock, stored in moto's EC2 backend.

moto's snapshots are always ``completed`` and its images always ``available``, and every
moto ``Ami`` creates a 15 GiB snapshot of its own. These subclasses keep what the request
said instead: a :class:`TimedSnapshot` is ``pending`` until ``ready_at`` (``None``: until
someone sets it, as CompleteSnapshot does), a :class:`TimedImage` is ``pending`` until its
``ready_at`` and maps the snapshots it was given. Both live in moto's ``snapshots`` and
``amis`` dicts, so moto's Describe*, filters, tags and attributes work on them unchanged.
"""

from __future__ import annotations

import fnmatch
import time
from types import SimpleNamespace
from typing import Any

from moto.core.utils import utcnow
from moto.ec2.models.amis import Ami
from moto.ec2.models.elastic_block_store import Snapshot

# Snapshots not made from a volume (EBS direct APIs, copies) report this volume, as EC2 does.
NO_VOLUME_ID = "vol-ffffffff"
# moto files every model class under the service named by the 2nd part of its module.
MODEL_MODULE = "emulator.ec2"


class TimedSnapshot(Snapshot):
    """An EC2 snapshot that is ``pending`` until ``ready_at``, then ``completed``."""

    __module__ = MODEL_MODULE

    def __init__(
        self,
        ec2_backend: Any,
        snapshot_id: str,
        volume_size: int,
        description: str,
        encrypted: bool,
        kms_key_id: str | None,
        ready_at: float | None,
        volume_id: str = NO_VOLUME_ID,
    ) -> None:
        self.ready_at = ready_at
        # The x-amz-Progress of the last PutSnapshotBlock, shown while pending.
        self.write_progress = 0
        # moto reads a snapshot's size and volume id from its volume (CreateVolume, CopySnapshot).
        volume = SimpleNamespace(id=volume_id, size=volume_size)
        super().__init__(ec2_backend, snapshot_id, volume, description, encrypted=encrypted, kms_key_id=kms_key_id)
        self._status = "pending"

    @property  # type: ignore[override]
    def status(self) -> str:
        if self._status == "pending" and self.ready_at is not None and time.time() >= self.ready_at:
            self._status = "completed"
        return self._status

    @status.setter
    def status(self, value: str) -> None:
        self._status = value

    @property
    def progress(self) -> str:
        return "100%" if self.status == "completed" else f"{self.write_progress}%"

    def get_filter_value(self, filter_name: str, method_name: str | None = None) -> Any:
        if filter_name == "progress":
            return self.progress
        return super().get_filter_value(filter_name, method_name)


class TimedImage(Ami):
    """An EBS-backed image made by RegisterImage, CreateImage or CopyImage.

    ``mappings`` are block device mappings in the API's shape
    (``{"DeviceName", "Ebs": {"SnapshotId", "VolumeSize", ...}}`` or ``{"DeviceName", "VirtualName"}``).
    """

    __module__ = MODEL_MODULE

    def __init__(
        self,
        ec2_backend: Any,
        image_id: str,
        name: str,
        description: str | None,
        architecture: str,
        virtualization_type: str,
        root_device_name: str,
        mappings: list[dict[str, Any]],
        ready_at: float,
        boot_mode: str | None = None,
        ena_support: bool | None = None,
        sriov_net_support: str | None = None,
        imds_support: str | None = None,
        tpm_support: str | None = None,
        kernel_id: str | None = None,
        ramdisk_id: str | None = None,
        source_instance_id: str | None = None,
        source_image_id: str | None = None,
        source_image_region: str | None = None,
    ) -> None:
        # Deliberately not Ami.__init__: that one makes a snapshot of its own.
        self.ec2_backend = ec2_backend
        self.id = image_id
        self.ready_at = ready_at
        self._state = "pending"
        self.name = name
        self.description = description
        self.owner_id = ec2_backend.account_id
        self.owner_alias: str | None = None
        self.image_type = "machine"
        self.image_location = f"{self.owner_id}/{name}"
        self.architecture = architecture
        self.virtualization_type = virtualization_type
        self.hypervisor = "xen"
        self.platform: str | None = None
        self.platform_details = "Linux/UNIX"
        self.usage_operation = "RunInstances"
        self.kernel_id = kernel_id
        self.ramdisk_id = ramdisk_id
        self.root_device_name = root_device_name
        self.root_device_type = "ebs"
        self.mappings = mappings
        self.boot_mode = boot_mode
        self.ena_support = ena_support
        self.sriov_net_support = sriov_net_support
        self.sriov = sriov_net_support
        self.imds_support = imds_support
        self.tpm_support = tpm_support
        self.creation_date = utcnow()
        self.product_codes: set[str] = set()
        self.launch_permissions: list[dict[str, str]] = []
        self.instance_id = source_instance_id
        self.source_image_id = source_image_id
        self.source_image_region = source_image_region

    @property  # type: ignore[override]
    def state(self) -> str:
        if self._state == "pending" and time.time() >= self.ready_at:
            self._state = "available"
        return self._state

    @state.setter
    def state(self, value: str) -> None:
        self._state = value

    @property
    def block_device_mappings(self) -> list[dict[str, Any]]:
        return self.mappings

    @property
    def snapshot_ids(self) -> list[str]:
        return snapshot_ids_of(self)

    def get_filter_value(self, filter_name: str, method_name: str | None = None) -> Any:
        if filter_name in IMAGE_FILTERS:
            return image_filter_value(self, filter_name)
        return super().get_filter_value(filter_name, method_name)


def _ebs_values(key: str) -> Any:
    """Reads one member of every EBS mapping of an image."""

    def values(image: Any) -> list[Any]:
        return [mapping["Ebs"].get(key) for mapping in image.block_device_mappings if "Ebs" in mapping]

    return values


# DescribeImages filters moto lacks, for its images and ours alike.
IMAGE_FILTERS: dict[str, Any] = {
    "description": lambda image: image.description,
    "root-device-name": lambda image: image.root_device_name,
    "root-device-type": lambda image: image.root_device_type,
    "image-type": lambda image: image.image_type,
    "hypervisor": lambda image: image.hypervisor,
    "ena-support": lambda image: getattr(image, "ena_support", None),
    "sriov-net-support": lambda image: getattr(image, "sriov_net_support", None) or getattr(image, "sriov", None),
    "boot-mode": lambda image: image.boot_mode,
    "source-image-id": lambda image: getattr(image, "source_image_id", None),
    "source-image-region": lambda image: getattr(image, "source_image_region", None),
    "block-device-mapping.device-name": lambda image: [m["DeviceName"] for m in image.block_device_mappings],
    "block-device-mapping.snapshot-id": _ebs_values("SnapshotId"),
    "block-device-mapping.volume-type": _ebs_values("VolumeType"),
    "block-device-mapping.encrypted": _ebs_values("Encrypted"),
}


def image_filter_value(image: Any, filter_name: str) -> Any:
    """The value a filter of :data:`IMAGE_FILTERS` compares, for moto's images and ours."""
    return IMAGE_FILTERS[filter_name](image)


def image_matches(image: Any, filter_name: str, patterns: list[str]) -> bool:
    """Whether any value of the filter matches any pattern (``*`` and ``?`` wildcards, booleans as text)."""
    value = image_filter_value(image, filter_name)
    values = value if isinstance(value, list) else [value]
    texts = [str(v).lower() if isinstance(v, bool) else v for v in values if v is not None]
    return any(fnmatch.fnmatchcase(text, pattern) for text in texts for pattern in patterns)


def snapshot_ids_of(image: Any) -> list[str]:
    """The snapshot ids an image (ours or moto's) maps."""
    return [
        mapping["Ebs"]["SnapshotId"]
        for mapping in image.block_device_mappings
        if mapping.get("Ebs", {}).get("SnapshotId")
    ]
