"""EC2 image and snapshot actions as EC2 answers them, mixed into the emulator's EC2 handler.

moto's RegisterImage drops everything but the name (and snapshots a made-up volume),
its CopyImage ignores tags, tokens and snapshots, neither checks names or snapshot states,
and images are ``available`` at once. :class:`ImageActions` answers instead:

- RegisterImage: EBS-backed images from snapshots of this region: the name's format and
  uniqueness per owner (``InvalidAMIName.Malformed`` / ``.Duplicate``), snapshots that
  exist (``InvalidSnapshot.NotFound``) and are ``completed`` (``IncorrectState``), volume
  sizes, the enums (architecture, boot mode, ...) and the service's defaults (i386,
  paravirtual, gp2, DeleteOnTermination). TagSpecifications may tag only the image.
- CreateImage: snapshots of the instance's volumes (tagged by ``snapshot`` tag specs).
- CopyImage (called in the destination region): new image and snapshots there, the
  ClientToken (same token → same image), ``CopyImageTags``, encryption; blocks written
  with the EBS direct APIs stay readable from the copied snapshots.
- Images are ``pending`` for ``image_delay_s`` (copies and CreateImage also wait for their
  snapshots, ``snapshot_delay_s``).
- DeregisterImage with ``DeleteAssociatedSnapshots``; DeleteSnapshot of a snapshot an
  image maps fails ``InvalidSnapshot.InUse``.
- DescribeSnapshots honours ``OwnerIds`` (``self`` or account ids; moto listed everything).
- ModifySnapshotAttribute with ``CreateVolumePermission`` Add/Remove (moto read only
  ``OperationType``/``UserIds``); DescribeImageAttribute in the API's shape for every
  attribute (moto answered 500 for most).
"""

from __future__ import annotations

import copy as copy_module
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from moto.core.base_backend import BackendDict, BaseBackend
from moto.core.responses import ActionResult, EmptyResult
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models import ec2_backends
from moto.ec2.utils import random_ami_id, random_snapshot_id

import ebs
from config import CONFIG
from ec2_resources import IMAGE_FILTERS, TimedImage, TimedSnapshot, image_matches, snapshot_ids_of

IMAGE_NAME = re.compile(r"^[A-Za-z0-9()\[\] ./\-'@_]{3,128}$")
ARCHITECTURES = ("i386", "x86_64", "arm64", "x86_64_mac", "arm64_mac")
VIRTUALIZATION_TYPES = ("hvm", "paravirtual")
BOOT_MODES = ("legacy-bios", "uefi", "uefi-preferred")
VOLUME_TYPES = ("standard", "io1", "io2", "gp2", "sc1", "st1", "gp3")
GP3_DEFAULT_IOPS, GP3_DEFAULT_THROUGHPUT = 3000, 125
ACCOUNT_ID = re.compile(r"^\d{12}$")
# What a CopyImage ClientToken stands for: the same token with other values is a mismatch.
COPY_PARAMETERS = (
    "SourceRegion",
    "SourceImageId",
    "Name",
    "Description",
    "Encrypted",
    "KmsKeyId",
    "CopyImageTags",
    "TagSpecifications",
)


@dataclass
class SnapshotCopy:
    """What CopyImage asked for, as each of the source image's snapshots is copied."""

    source_region: str
    source_image_id: str
    image_id: str
    encrypted: bool
    kms_key_id: str | None
    tags: dict[str, str]
    created: float


class ImageBackend(BaseBackend):
    """CopyImage client tokens of one account in one region (reset together with moto)."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.copy_tokens: dict[str, tuple[str, str]] = {}


image_backends = BackendDict(ImageBackend, "ec2")


def error(code: str, message: str) -> EC2ClientError:
    return EC2ClientError(code, message)


def _flag(value: Any) -> bool | None:
    if value is None:
        return None
    return str(value).lower() == "true"


def _choice(value: Any, parameter: str, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        raise error(
            "InvalidParameterValue",
            f"Value ({value}) for parameter {parameter} is invalid. Valid values: {', '.join(allowed)}",
        )


def _tags(tag_specifications: list[dict[str, Any]], allowed: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Tags by resource type; a type this operation cannot tag fails the request, as EC2 does."""
    tags: dict[str, dict[str, str]] = {}
    for spec in tag_specifications:
        resource_type = spec.get("ResourceType")
        if resource_type not in allowed:
            raise error(
                "InvalidParameterValue", f"'{resource_type}' is not a valid taggable resource type for this operation."
            )
        tags.setdefault(resource_type, {}).update({t["Key"]: t.get("Value", "") for t in spec.get("Tags", [])})
    return tags


class ImageActions:
    """EC2 image and snapshot actions; a mixin for the emulator's ``EC2Response`` subclass."""

    # Provided by moto's EC2Response.
    ec2_backend: Any
    region: str
    current_account: str
    _get_param: Any
    _filters_from_querystring: Any
    error_on_dryrun: Any

    # --- helpers --------------------------------------------------------------------------------

    def _check_new_image_name(self, name: Any) -> str:
        backend = self.ec2_backend
        if not name:
            raise error("MissingParameter", "The request must contain the parameter name")
        if not IMAGE_NAME.match(name):
            raise error(
                "InvalidAMIName.Malformed",
                "AMI names must be between 3 and 128 characters long, and may contain letters, numbers, "
                "'(', ')', '.', '-', '/', '_', spaces, brackets, single quotes and '@'",
            )
        for image in list(backend.amis.values()):
            if image.name == name and image.owner_id == backend.account_id:
                raise error("InvalidAMIName.Duplicate", f"AMI name {name} is already in use by AMI {image.id}")
        return name

    def _image(self, image_id: str, backend: Any = None) -> Any:
        backend = backend or self.ec2_backend
        image = backend.amis.get(image_id)
        if image is None:
            raise error("InvalidAMIID.NotFound", f"The image id '[{image_id}]' does not exist")
        return image

    def _snapshot(self, snapshot_id: str) -> Any:
        snapshot = self.ec2_backend.snapshots.get(snapshot_id)
        if snapshot is None:
            raise error("InvalidSnapshot.NotFound", f"The snapshot '{snapshot_id}' does not exist.")
        return snapshot

    def _mappings(self, raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """RegisterImage block device mappings, checked and completed with EC2's defaults."""
        mappings = []
        for entry in raw:
            device = entry.get("DeviceName")
            if not device:
                raise error("InvalidBlockDeviceMapping", "A block device mapping needs a DeviceName.")
            if entry.get("NoDevice") is not None:
                continue
            if entry.get("VirtualName"):
                mappings.append({"DeviceName": device, "VirtualName": entry["VirtualName"]})
                continue
            spec = entry.get("Ebs") or {}
            volume_type = spec.get("VolumeType") or "gp2"
            _choice(volume_type, "volumeType", VOLUME_TYPES)
            volume: dict[str, Any] = {
                "DeleteOnTermination": _flag(spec.get("DeleteOnTermination")) is not False,
                "VolumeType": volume_type,
            }
            size = spec.get("VolumeSize")
            snapshot_id = spec.get("SnapshotId")
            if snapshot_id:
                snapshot = self._snapshot(snapshot_id)
                if snapshot.status != "completed":
                    raise error(
                        "IncorrectState", f"Snapshot '{snapshot_id}' is not 'completed' (it is '{snapshot.status}')."
                    )
                if size is not None and int(size) < snapshot.volume_size:
                    raise error(
                        "InvalidBlockDeviceMapping",
                        f"Volume of size {size}GB is smaller than snapshot '{snapshot_id}', "
                        f"expect size >= {snapshot.volume_size}GB",
                    )
                volume["SnapshotId"] = snapshot_id
                volume["VolumeSize"] = int(size) if size is not None else snapshot.volume_size
                volume["Encrypted"] = bool(snapshot.encrypted)
                if snapshot.kms_key_id:
                    volume["KmsKeyId"] = snapshot.kms_key_id
            elif size is None:
                raise error("InvalidBlockDeviceMapping", f"The device {device} needs a SnapshotId or a VolumeSize.")
            else:
                volume["VolumeSize"] = int(size)
                volume["Encrypted"] = _flag(spec.get("Encrypted")) is True
            for key in ("Iops", "Throughput"):
                if spec.get(key) is not None:
                    volume[key] = int(spec[key])
            if volume_type == "gp3":
                volume.setdefault("Iops", GP3_DEFAULT_IOPS)
                volume.setdefault("Throughput", GP3_DEFAULT_THROUGHPUT)
            mappings.append({"DeviceName": device, "Ebs": volume})
        return mappings

    def _image_in_use(self, snapshot_id: str, ignore: str | None = None) -> str | None:
        for image in list(self.ec2_backend.amis.values()):
            if image.id != ignore and snapshot_id in snapshot_ids_of(image):
                return image.id
        return None

    # --- actions --------------------------------------------------------------------------------

    def register_image(self) -> ActionResult:
        if self._get_param("ImageLocation"):
            return super().register_image()  # type: ignore[misc]  # instance-store: moto's
        name = self._check_new_image_name(self._get_param("Name"))
        architecture = self._get_param("Architecture") or "i386"
        virtualization = self._get_param("VirtualizationType") or "paravirtual"
        boot_mode = self._get_param("BootMode")
        sriov = self._get_param("SriovNetSupport")
        _choice(architecture, "architecture", ARCHITECTURES)
        _choice(virtualization, "virtualizationType", VIRTUALIZATION_TYPES)
        _choice(boot_mode, "bootMode", BOOT_MODES)
        _choice(sriov, "sriovNetSupport", ("simple",))
        _choice(self._get_param("ImdsSupport"), "imdsSupport", ("v2.0",))
        _choice(self._get_param("TpmSupport"), "tpmSupport", ("v2.0",))
        root = self._get_param("RootDeviceName")
        raw_mappings = self._get_param("BlockDeviceMappings", [])
        if not root:
            raise error("MissingParameter", "The request must contain the parameter rootDeviceName")
        mappings = self._mappings(raw_mappings)
        if not any(m["DeviceName"] == root and m.get("Ebs", {}).get("SnapshotId") for m in mappings):
            raise error(
                "InvalidBlockDeviceMapping",
                f"The root device {root} needs a block device mapping with an EBS snapshot.",
            )
        tags = _tags(self._get_param("TagSpecifications", []), ("image",))
        self.error_on_dryrun()
        image = TimedImage(
            self.ec2_backend,
            random_ami_id(),
            name=name,
            description=self._get_param("Description"),
            architecture=architecture,
            virtualization_type=virtualization,
            root_device_name=root,
            mappings=mappings,
            ready_at=time.time() + CONFIG.snapshot().image_delay_s,
            boot_mode=boot_mode,
            ena_support=_flag(self._get_param("EnaSupport")),
            sriov_net_support=sriov,
            imds_support=self._get_param("ImdsSupport"),
            tpm_support=self._get_param("TpmSupport"),
            kernel_id=self._get_param("KernelId"),
            ramdisk_id=self._get_param("RamdiskId"),
        )
        self.ec2_backend.amis[image.id] = image
        image.add_tags(tags.get("image", {}))
        return ActionResult({"ImageId": image.id})

    def create_image(self) -> ActionResult:
        instance = self.ec2_backend.get_instance(self._get_param("InstanceId"))
        name = self._check_new_image_name(self._get_param("Name"))
        tags = _tags(self._get_param("TagSpecifications", []), ("image", "snapshot"))
        overrides = {m.get("DeviceName"): m for m in self._get_param("BlockDeviceMappings", [])}
        self.error_on_dryrun()
        now, settings = time.time(), CONFIG.snapshot()
        image_id = random_ami_id()
        mappings = []
        for device, block in instance.get_block_device_mapping:
            override = overrides.get(device, {})
            if override.get("NoDevice") is not None:
                continue
            volume = self.ec2_backend.get_volume(block.volume_id)
            snapshot = self._new_snapshot(
                size=volume.size,
                description=f"Created by CreateImage({instance.id}) for {image_id}",
                encrypted=bool(volume.encrypted),
                kms_key_id=volume.kms_key_id,
                volume_id=volume.id,
                tags=tags.get("snapshot", {}),
                ready_at=now + settings.snapshot_delay_s,
            )
            delete = _flag((override.get("Ebs") or {}).get("DeleteOnTermination"))
            mapping: dict[str, Any] = {
                "DeleteOnTermination": block.delete_on_termination if delete is None else delete,
                "SnapshotId": snapshot.id,
                "VolumeSize": volume.size,
                "VolumeType": volume.volume_type or "gp2",
                "Encrypted": bool(volume.encrypted),
            }
            for key, value in (("Iops", volume.iops), ("Throughput", volume.throughput)):
                if value:
                    mapping[key] = value
            mappings.append({"DeviceName": device, "Ebs": mapping})
        image = TimedImage(
            self.ec2_backend,
            image_id,
            name=name,
            description=self._get_param("Description"),
            architecture=instance.architecture,
            virtualization_type=instance.virtualization_type,
            root_device_name=instance.root_device_name,
            mappings=mappings,
            ready_at=now + max(settings.image_delay_s, settings.snapshot_delay_s),
            boot_mode=getattr(instance, "boot_mode", None),
            ena_support=True,
            sriov_net_support=getattr(instance, "sriov_net_support", None),
            source_instance_id=instance.id,
        )
        self.ec2_backend.amis[image.id] = image
        image.add_tags(tags.get("image", {}))
        return ActionResult({"ImageId": image.id})

    def copy_image(self) -> ActionResult:
        source_region = self._get_param("SourceRegion")
        source_id = self._get_param("SourceImageId")
        if not source_region or not source_id:
            missing = "sourceRegion" if not source_region else "sourceImageId"
            raise error("MissingParameter", f"The request must contain the parameter {missing}")
        token = self._get_param("ClientToken")
        images = image_backends[self.current_account][self.region]
        fingerprint = json.dumps({k: self._get_param(k) for k in COPY_PARAMETERS}, sort_keys=True, default=str)
        if token and token in images.copy_tokens:
            known, image_id = images.copy_tokens[token]
            if known != fingerprint:
                raise error(
                    "IdempotentParameterMismatch",
                    "The client token you have provided is associated with a resource that is already deleted "
                    "or has different parameters.",
                )
            return ActionResult({"ImageId": image_id})

        source_backend = ec2_backends[self.current_account][source_region]
        source = self._image(source_id, source_backend)
        if source.state != "available":
            raise error("IncorrectState", f"Image {source_id} is not available (it is '{source.state}').")
        name = self._check_new_image_name(self._get_param("Name"))
        encrypted = _flag(self._get_param("Encrypted")) is True
        kms_key_id = self._get_param("KmsKeyId")
        if kms_key_id and not encrypted:
            raise error("InvalidParameterDependency", "The parameter KmsKeyId requires the parameter Encrypted.")
        tags = _tags(self._get_param("TagSpecifications", []), ("image", "snapshot"))
        self.error_on_dryrun()

        now, settings = time.time(), CONFIG.snapshot()
        image_id = random_ami_id()
        copy = SnapshotCopy(
            source_region=source_region,
            source_image_id=source_id,
            image_id=image_id,
            encrypted=encrypted,
            kms_key_id=kms_key_id,
            tags=tags.get("snapshot", {}),
            created=now,
        )
        mappings = [self._copy_mapping(mapping, source_backend, copy) for mapping in source.block_device_mappings]
        image = TimedImage(
            self.ec2_backend,
            image_id,
            name=name,
            description=self._get_param("Description") or source.description,
            architecture=source.architecture,
            virtualization_type=source.virtualization_type,
            root_device_name=source.root_device_name,
            mappings=mappings,
            ready_at=now + max(settings.image_delay_s, settings.snapshot_delay_s),
            boot_mode=getattr(source, "boot_mode", None),
            ena_support=getattr(source, "ena_support", None),
            sriov_net_support=getattr(source, "sriov_net_support", None) or getattr(source, "sriov", None),
            imds_support=getattr(source, "imds_support", None),
            tpm_support=getattr(source, "tpm_support", None),
            kernel_id=source.kernel_id,
            ramdisk_id=getattr(source, "ramdisk_id", None),
            source_image_id=source_id,
            source_image_region=source_region,
        )
        self.ec2_backend.amis[image.id] = image
        image_tags: dict[str, str] = {}
        if _flag(self._get_param("CopyImageTags")):
            image_tags = {t["key"]: t["value"] for t in source.get_tags() if not t["key"].startswith("aws:")}
        image_tags.update(tags.get("image", {}))
        image.add_tags(image_tags)
        if token:
            images.copy_tokens[token] = (fingerprint, image.id)
        return ActionResult({"ImageId": image.id})

    def _copy_mapping(self, mapping: dict[str, Any], source_backend: Any, copy: SnapshotCopy) -> dict[str, Any]:
        """A source image's block device mapping, its snapshot copied into this region."""
        copied = copy_module.deepcopy(mapping)
        spec = copied.get("Ebs") or {}
        source_snapshot_id = spec.get("SnapshotId")
        if not source_snapshot_id:
            return copied
        source = source_backend.snapshots.get(source_snapshot_id)
        encrypted = copy.encrypted or bool(source is not None and source.encrypted)
        key = copy.kms_key_id or (self._default_kms_key() if encrypted else None)
        snapshot = self._new_snapshot(
            size=source.volume_size if source is not None else int(spec.get("VolumeSize", 8)),
            description=f"Copied for DestinationAmi {copy.image_id} from SourceAmi {copy.source_image_id} "
            f"for SourceSnapshot {source_snapshot_id}. Task created on {int(copy.created * 1000)}.",
            encrypted=encrypted,
            kms_key_id=key,
            tags=copy.tags,
            ready_at=copy.created + CONFIG.snapshot().snapshot_delay_s,
        )
        ebs.share_blocks(self.current_account, copy.source_region, source_snapshot_id, self.region, snapshot)
        spec.update({"SnapshotId": snapshot.id, "Encrypted": encrypted})
        spec.pop("KmsKeyId", None)
        if key:
            spec["KmsKeyId"] = key
        return copied

    def _new_snapshot(
        self,
        size: int,
        description: str,
        encrypted: bool,
        kms_key_id: str | None,
        tags: dict[str, str],
        ready_at: float,
        volume_id: str | None = None,
    ) -> TimedSnapshot:
        extra = {"volume_id": volume_id} if volume_id else {}
        snapshot = TimedSnapshot(
            self.ec2_backend,
            random_snapshot_id(),
            volume_size=size,
            description=description,
            encrypted=encrypted,
            kms_key_id=kms_key_id,
            ready_at=ready_at,
            **extra,
        )
        self.ec2_backend.snapshots[snapshot.id] = snapshot
        snapshot.add_tags(tags)
        return snapshot

    def _default_kms_key(self) -> str:
        backend = self.ec2_backend
        return backend.default_kms_key_id or backend._create_default_encryption_key()

    def describe_images(self) -> ActionResult:
        """moto's, plus the filters of ``ec2_resources.IMAGE_FILTERS`` (moto answers 500 for them)."""
        self.error_on_dryrun()
        filters = self._filters_from_querystring()
        ours = {name: values for name, values in filters.items() if name in IMAGE_FILTERS}
        images = self.ec2_backend.describe_images(
            ami_ids=self._get_param("ImageIds", []),
            filters={name: values for name, values in filters.items() if name not in ours},
            exec_users=self._get_param("ExecutableUsers", []),
            owners=self._get_param("Owners", []),
        )
        images = [i for i in images if all(image_matches(i, name, values) for name, values in ours.items())]
        return ActionResult({"Images": images})

    def deregister_image(self) -> ActionResult:
        image_id = self._get_param("ImageId")
        delete_snapshots = _flag(self._get_param("DeleteAssociatedSnapshots")) is True
        image = self.ec2_backend.amis.get(image_id)
        snapshot_ids = snapshot_ids_of(image) if image is not None else []
        self.error_on_dryrun()
        self.ec2_backend.deregister_image(image_id)
        result: dict[str, Any] = {"Return": True}
        if delete_snapshots:
            results = []
            for snapshot_id in snapshot_ids:
                if self._image_in_use(snapshot_id) is not None:
                    results.append({"SnapshotId": snapshot_id, "ReturnCode": "skipped"})
                    continue
                self.ec2_backend.snapshots.pop(snapshot_id, None)
                ebs.forget_snapshot(self.current_account, self.region, snapshot_id)
                _forget_volume_data(snapshot_id)
                results.append({"SnapshotId": snapshot_id, "ReturnCode": "success"})
            result["DeleteSnapshotResults"] = results
        return ActionResult(result)

    def delete_snapshot(self) -> EmptyResult:
        snapshot_id = self._get_param("SnapshotId")
        self._snapshot(snapshot_id)
        user = self._image_in_use(snapshot_id)
        if user is not None:
            raise error("InvalidSnapshot.InUse", f"The snapshot {snapshot_id} is currently in use by {user}")
        self.error_on_dryrun()
        self.ec2_backend.snapshots.pop(snapshot_id)
        ebs.forget_snapshot(self.current_account, self.region, snapshot_id)
        _forget_volume_data(snapshot_id)
        return EmptyResult()

    def describe_snapshots(self) -> ActionResult:
        """moto's, plus OwnerIds (moto ignored it) and a message naming an unknown snapshot."""
        self.error_on_dryrun()
        snapshot_ids = self._get_param("SnapshotIds", [])
        for snapshot_id in snapshot_ids:
            self._snapshot(snapshot_id)
        snapshots = self.ec2_backend.describe_snapshots(
            snapshot_ids=snapshot_ids, filters=self._filters_from_querystring()
        )
        owners = {self.current_account if o == "self" else o for o in self._get_param("OwnerIds", [])}
        if owners:
            snapshots = [s for s in snapshots if s.owner_id in owners or getattr(s, "owner_alias", None) in owners]
        return ActionResult({"Snapshots": snapshots})

    def modify_snapshot_attribute(self) -> EmptyResult:
        snapshot = self._snapshot(self._get_param("SnapshotId"))
        attribute = self._get_param("Attribute")
        if attribute not in (None, "createVolumePermission"):
            raise error("InvalidParameterValue", f"Value ({attribute}) for parameter attribute is invalid.")
        modifications = self._get_param("CreateVolumePermission") or {}
        add = list(modifications.get("Add") or [])
        remove = list(modifications.get("Remove") or [])
        operation = self._get_param("OperationType")
        if operation in ("add", "remove"):
            listed = [{"UserId": u} for u in self._get_param("UserIds", [])]
            listed += [{"Group": g} for g in self._get_param("GroupNames", [])]
            (add if operation == "add" else remove).extend(listed)
        elif operation is not None:
            raise error("InvalidParameterValue", f"Value ({operation}) for parameter operationType is invalid.")
        for permission in add + remove:
            user, group = permission.get("UserId"), permission.get("Group")
            if user is not None and not ACCOUNT_ID.match(str(user)):
                raise error("InvalidParameterValue", f"Value ({user}) for parameter userId is invalid.")
            if group is not None and group != "all":
                raise error("InvalidParameterValue", f"Value ({group}) for parameter group is invalid.")
        self.error_on_dryrun()
        for permission in add:
            if "UserId" in permission:
                snapshot.create_volume_permission_userids.add(str(permission["UserId"]))
            if "Group" in permission:
                snapshot.create_volume_permission_groups.add(permission["Group"])
        for permission in remove:
            snapshot.create_volume_permission_userids.discard(str(permission.get("UserId")))
            snapshot.create_volume_permission_groups.discard(permission.get("Group"))
        return EmptyResult()

    def describe_snapshot_attribute(self) -> ActionResult:
        snapshot = self._snapshot(self._get_param("SnapshotId"))
        attribute = self._get_param("Attribute")
        result: dict[str, Any] = {"SnapshotId": snapshot.id}
        if attribute == "createVolumePermission":
            groups = [{"Group": g} for g in sorted(snapshot.create_volume_permission_groups)]
            users = [{"UserId": u} for u in sorted(snapshot.create_volume_permission_userids)]
            result["CreateVolumePermissions"] = groups + users
        elif attribute == "productCodes":
            result["ProductCodes"] = []
        else:
            raise error("InvalidParameterValue", f"Value ({attribute}) for parameter attribute is invalid.")
        return ActionResult(result)

    def describe_image_attribute(self) -> ActionResult:
        image = self._image(self._get_param("ImageId"))
        attribute = self._get_param("Attribute")
        result: dict[str, Any] = {"ImageId": image.id}
        values = {
            "description": ("Description", image.description),
            "kernel": ("KernelId", image.kernel_id),
            "ramdisk": ("RamdiskId", getattr(image, "ramdisk_id", None)),
            "sriovNetSupport": ("SriovNetSupport", getattr(image, "sriov_net_support", None) or image.sriov),
            "bootMode": ("BootMode", image.boot_mode),
            "tpmSupport": ("TpmSupport", getattr(image, "tpm_support", None)),
            "imdsSupport": ("ImdsSupport", getattr(image, "imds_support", None)),
            "uefiData": ("UefiData", None),
            "lastLaunchedTime": ("LastLaunchedTime", None),
            "deregistrationProtection": ("DeregistrationProtection", "disabled"),
        }
        if attribute == "launchPermission":
            result["LaunchPermissions"] = list(image.launch_permissions)
        elif attribute == "productCodes":
            codes = sorted(image.product_codes)
            result["ProductCodes"] = [{"ProductCodeId": c, "ProductCodeType": "marketplace"} for c in codes]
        elif attribute == "blockDeviceMapping":
            # EC2 refuses this attribute (moto does the same): read BlockDeviceMappings from DescribeImages.
            raise error("AuthFailure", "Unauthorized attempt to access restricted resource")
        elif attribute in values:
            member, value = values[attribute]
            result[member] = {"Value": value} if value is not None else {}
        else:
            raise error("InvalidParameterValue", f"Value ({attribute}) for parameter attribute is invalid.")
        self.error_on_dryrun()
        return ActionResult(result)


def _forget_volume_data(snapshot_id: str) -> None:
    """In boot mode, a deleted snapshot's copy of its volume's data goes too (``volumes.py``)."""
    import boot

    if boot.MANAGER is not None:
        boot.MANAGER.volumes.forget_snapshot(snapshot_id)
