"""The rules of FSx for Lustre configuration: validation, defaults and updates.

Values and limits follow the FSx API reference (CreateFileSystemLustreConfiguration,
UpdateFileSystemLustreConfiguration, CreateFileSystem.FileSystemTypeVersion).
"""

from __future__ import annotations

import copy
import re
import secrets
import string
import time
import uuid
from dataclasses import dataclass
from typing import Any

from fsx_common import FsxError, Params, bad_request, get_param, reject_unknown, without_none

DEPLOYMENT_TYPES = ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
SCRATCH_TYPES = ("SCRATCH_1", "SCRATCH_2")
STORAGE_TYPES = ("SSD", "HDD")
VERSIONS = ("2.10", "2.12", "2.15")
THROUGHPUT = {
    ("PERSISTENT_1", "SSD"): (50, 100, 200),
    ("PERSISTENT_1", "HDD"): (12, 40),
    ("PERSISTENT_2", "SSD"): (125, 250, 500, 1000),
}
AUTO_IMPORT_POLICIES = ("NONE", "NEW", "NEW_CHANGED", "NEW_CHANGED_DELETED")
COMPRESSION_TYPES = ("NONE", "LZ4")
DRIVE_CACHE_TYPES = ("NONE", "READ")
LOG_LEVELS = ("DISABLED", "WARN_ONLY", "ERROR_ONLY", "WARN_ERROR")
METADATA_MODES = ("AUTOMATIC", "USER_PROVISIONED")
MAX_METADATA_IOPS = 192000
WEEKLY_TIME = re.compile(r"^[1-7]:([01]\d|2[0-3]):[0-5]\d$")
DAILY_TIME = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")
ROOT_SQUASH = re.compile(r"^\d+:\d+$")
DEFAULT_WEEKLY_MAINTENANCE = "1:05:00"
DEFAULT_DAILY_BACKUP = "05:00"
DEFAULT_CHUNK_SIZE_MIB = 1024
MAX_CHUNK_SIZE_MIB = 512000

WHERE = "LustreConfiguration"
COMMON_KEYS = {
    "WeeklyMaintenanceStartTime",
    "DailyAutomaticBackupStartTime",
    "AutomaticBackupRetentionDays",
    "AutoImportPolicy",
    "DataCompressionType",
    "LogConfiguration",
    "RootSquashConfiguration",
    "PerUnitStorageThroughput",
    "MetadataConfiguration",
}
CREATE_KEYS = COMMON_KEYS | {
    "ImportPath",
    "ExportPath",
    "ImportedFileChunkSize",
    "DeploymentType",
    "CopyTagsToBackups",
    "DriveCacheType",
    "EfaEnabled",
}
UPDATE_KEYS = COMMON_KEYS


@dataclass
class LustreSpec:
    """A validated create request: the LustreConfiguration to echo, and the top-level settings."""

    config: dict[str, Any]
    storage_type: str
    version: str
    kms_key_id: str | None


def default_kms_key(region: str, account: str) -> str:
    """The account's aws/fsx managed key: one stable ARN per account and region."""
    key_id = uuid.uuid5(uuid.NAMESPACE_URL, f"aws/fsx/{account}/{region}")
    return f"arn:aws:kms:{region}:{account}:key/{key_id}"


def storage_capacity_error(deployment: str, storage_type: str, throughput: int | None, capacity: int) -> str | None:
    """Why ``capacity`` (GiB) is invalid for this deployment, or None when it is valid."""
    if capacity <= 0:
        return "StorageCapacity must be a positive number of GiB"
    if storage_type == "HDD":
        step = 6000 if throughput == 12 else 1800
        if capacity % step:
            return f"StorageCapacity for HDD storage at {throughput} MB/s/TiB must be a multiple of {step} GiB"
        return None
    step = 3600 if deployment == "SCRATCH_1" else 2400
    if capacity in (1200, 2400) or capacity % step == 0:
        return None
    return f"StorageCapacity for {deployment} must be 1200, 2400, or a multiple of {step} GiB"


def automatic_metadata_iops(capacity: int) -> int:
    if capacity <= 1200:
        return 1500
    if capacity <= 2400:
        return 3000
    if capacity <= 9600:
        return 6000
    if capacity <= 45600:
        return 12000
    return min(12000 * (capacity // 24000), MAX_METADATA_IOPS)


def build_create(params: Params, storage_capacity: int, region: str, account: str) -> LustreSpec:
    """Validates a CreateFileSystem request for LUSTRE and fills in the service's defaults."""
    lustre = get_param(params, WHERE, dict) or {}
    reject_unknown(lustre, CREATE_KEYS, WHERE)
    deployment = _enum(lustre, "DeploymentType", DEPLOYMENT_TYPES) or "SCRATCH_1"
    scratch = deployment in SCRATCH_TYPES
    storage_type = _enum(params, "StorageType", STORAGE_TYPES, where="") or "SSD"
    if storage_type == "HDD" and deployment != "PERSISTENT_1":
        raise bad_request("HDD storage is supported only with the PERSISTENT_1 deployment type")

    throughput = get_param(lustre, "PerUnitStorageThroughput", int, where=WHERE)
    if scratch and throughput is not None:
        raise bad_request(f"PerUnitStorageThroughput is not supported for {deployment} file systems")
    if not scratch:
        if throughput is None:
            raise bad_request(f"PerUnitStorageThroughput is required for {deployment} file systems")
        _check_throughput(deployment, storage_type, throughput)
    capacity_error = storage_capacity_error(deployment, storage_type, throughput, storage_capacity)
    if capacity_error:
        raise bad_request(capacity_error)

    metadata = _metadata(lustre.get("MetadataConfiguration"), deployment, storage_capacity, current=None)
    version = _version(params, deployment, has_metadata=metadata is not None)
    kms_key_id = get_param(params, "KmsKeyId", str)
    if scratch and kms_key_id is not None:
        raise bad_request(
            f"KmsKeyId is not supported for {deployment} file systems; they are encrypted with AWS-owned keys"
        )
    if not scratch and kms_key_id is None:
        kms_key_id = default_kms_key(region, account)

    drive_cache = _enum(lustre, "DriveCacheType", DRIVE_CACHE_TYPES)
    if storage_type == "HDD" and drive_cache is None:
        raise bad_request("DriveCacheType is required for HDD storage")
    if storage_type == "SSD" and drive_cache is not None:
        raise bad_request("DriveCacheType is supported only for HDD storage")

    retention = _retention(lustre, scratch) or 0
    daily = _daily_backup_time(lustre, scratch)
    if daily is None and retention > 0:
        daily = DEFAULT_DAILY_BACKUP
    copy_tags = get_param(lustre, "CopyTagsToBackups", bool, where=WHERE) or False
    if scratch and copy_tags:
        raise bad_request(f"CopyTagsToBackups is not supported for {deployment} file systems")

    efa = get_param(lustre, "EfaEnabled", bool, where=WHERE)
    if efa and (deployment != "PERSISTENT_2" or metadata is None):
        raise bad_request("EfaEnabled requires the PERSISTENT_2 deployment type with a MetadataConfiguration")

    config = without_none(
        {
            "WeeklyMaintenanceStartTime": _weekly_time(lustre) or DEFAULT_WEEKLY_MAINTENANCE,
            "DataRepositoryConfiguration": _data_repository(lustre, deployment),
            "DeploymentType": deployment,
            "PerUnitStorageThroughput": throughput,
            "MountName": "fsx" if deployment == "SCRATCH_1" else _mount_name(),
            "DailyAutomaticBackupStartTime": daily,
            "AutomaticBackupRetentionDays": retention,
            "CopyTagsToBackups": copy_tags,
            "DriveCacheType": drive_cache,
            "DataCompressionType": _enum(lustre, "DataCompressionType", COMPRESSION_TYPES) or "NONE",
            "LogConfiguration": _log_configuration(lustre.get("LogConfiguration"), region, account),
            "RootSquashConfiguration": _root_squash(lustre.get("RootSquashConfiguration")),
            "MetadataConfiguration": metadata,
            "EfaEnabled": efa,
        }
    )
    return LustreSpec(config=config, storage_type=storage_type, version=version, kms_key_id=kms_key_id)


@dataclass
class LustreUpdate:
    """A validated UpdateFileSystem.LustreConfiguration.

    ``config`` is the configuration with the changes that apply at once; ``deferred``
    holds PerUnitStorageThroughput / MetadataConfiguration changes, which take effect
    when the FILE_SYSTEM_UPDATE administrative action completes.
    """

    config: dict[str, Any]
    deferred: dict[str, Any]


def plan_update(
    current: dict[str, Any], lustre: Params, *, storage_type: str, capacity: int, region: str, account: str
) -> LustreUpdate:
    reject_unknown(lustre, UPDATE_KEYS, WHERE)
    deployment = current["DeploymentType"]
    scratch = deployment in SCRATCH_TYPES
    config = copy.deepcopy(current)
    deferred: dict[str, Any] = {}

    if (weekly := _weekly_time(lustre)) is not None:
        config["WeeklyMaintenanceStartTime"] = weekly
    if (daily := _daily_backup_time(lustre, scratch)) is not None:
        config["DailyAutomaticBackupStartTime"] = daily
    if (retention := _retention(lustre, scratch)) is not None:
        config["AutomaticBackupRetentionDays"] = retention
        if retention > 0 and "DailyAutomaticBackupStartTime" not in config:
            config["DailyAutomaticBackupStartTime"] = DEFAULT_DAILY_BACKUP
    if (policy := _enum(lustre, "AutoImportPolicy", AUTO_IMPORT_POLICIES)) is not None:
        if "DataRepositoryConfiguration" not in config:
            raise bad_request("AutoImportPolicy can be updated only on file systems created with an ImportPath")
        config["DataRepositoryConfiguration"]["AutoImportPolicy"] = policy
    if (compression := _enum(lustre, "DataCompressionType", COMPRESSION_TYPES)) is not None:
        config["DataCompressionType"] = compression
    if "LogConfiguration" in lustre:
        config["LogConfiguration"] = _log_configuration(lustre["LogConfiguration"], region, account)
    if "RootSquashConfiguration" in lustre:
        config["RootSquashConfiguration"] = _root_squash(lustre["RootSquashConfiguration"])

    throughput = get_param(lustre, "PerUnitStorageThroughput", int, where=WHERE)
    if throughput is not None and throughput != current.get("PerUnitStorageThroughput"):
        if scratch:
            raise bad_request(f"PerUnitStorageThroughput cannot be changed on {deployment} file systems")
        _check_throughput(deployment, storage_type, throughput)
        deferred["PerUnitStorageThroughput"] = throughput
    if "MetadataConfiguration" in lustre:
        metadata = _metadata(
            lustre["MetadataConfiguration"], deployment, capacity, current.get("MetadataConfiguration")
        )
        if metadata != current.get("MetadataConfiguration"):
            deferred["MetadataConfiguration"] = metadata
    return LustreUpdate(config=config, deferred=deferred)


# --- individual settings -------------------------------------------------------------------------


def _enum(params: Params, key: str, allowed: tuple[str, ...], where: str = WHERE) -> str | None:
    value = get_param(params, key, str, where=where)
    if value is not None and value not in allowed:
        name = f"{where}.{key}" if where else key
        raise bad_request(f"Invalid value {value!r} for {name}; valid values: {', '.join(allowed)}")
    return value


def _check_throughput(deployment: str, storage_type: str, throughput: int) -> None:
    allowed = THROUGHPUT[(deployment, storage_type)]
    if throughput not in allowed:
        raise FsxError(
            "InvalidPerUnitStorageThroughput",
            f"PerUnitStorageThroughput {throughput} is not valid for {deployment} {storage_type} file systems; "
            f"valid values: {', '.join(map(str, allowed))}",
        )


def _version(params: Params, deployment: str, has_metadata: bool) -> str:
    version = _enum(params, "FileSystemTypeVersion", VERSIONS, where="")
    if version is None:
        if deployment != "PERSISTENT_2":
            return "2.10"
        return "2.15" if has_metadata else "2.12"
    if version == "2.10" and deployment == "PERSISTENT_2":
        raise bad_request("Lustre version 2.10 is supported only by the SCRATCH and PERSISTENT_1 deployment types")
    if version == "2.12" and has_metadata:
        raise bad_request("Lustre version 2.12 does not support a MetadataConfiguration; use 2.15")
    return version


def _weekly_time(lustre: Params) -> str | None:
    value = get_param(lustre, "WeeklyMaintenanceStartTime", str, where=WHERE)
    if value is not None and not WEEKLY_TIME.match(value):
        raise bad_request(f"WeeklyMaintenanceStartTime {value!r} must have the form d:HH:MM (d = 1..7, Monday = 1)")
    return value


def _daily_backup_time(lustre: Params, scratch: bool) -> str | None:
    value = get_param(lustre, "DailyAutomaticBackupStartTime", str, where=WHERE)
    if value is None:
        return None
    if scratch:
        raise bad_request("Automatic backups are not supported for SCRATCH file systems")
    if not DAILY_TIME.match(value):
        raise bad_request(f"DailyAutomaticBackupStartTime {value!r} must have the form HH:MM")
    return value


def _retention(lustre: Params, scratch: bool) -> int | None:
    value = get_param(lustre, "AutomaticBackupRetentionDays", int, where=WHERE)
    if value is None:
        return None
    if not 0 <= value <= 90:
        raise bad_request("AutomaticBackupRetentionDays must be between 0 and 90")
    if scratch and value > 0:
        raise bad_request("Automatic backups are not supported for SCRATCH file systems")
    return value


def _data_repository(lustre: Params, deployment: str) -> dict[str, Any] | None:
    import_path = get_param(lustre, "ImportPath", str, where=WHERE)
    export_path = get_param(lustre, "ExportPath", str, where=WHERE)
    chunk_size = get_param(lustre, "ImportedFileChunkSize", int, where=WHERE)
    policy = _enum(lustre, "AutoImportPolicy", AUTO_IMPORT_POLICIES)
    if import_path is None:
        if export_path is not None or chunk_size is not None or policy is not None:
            raise bad_request("ExportPath, ImportedFileChunkSize and AutoImportPolicy require an ImportPath")
        return None
    if deployment == "PERSISTENT_2":
        raise bad_request("PERSISTENT_2 file systems link to S3 through data repository associations, not ImportPath")
    if not import_path.startswith("s3://") or len(import_path) <= len("s3://"):
        raise FsxError(
            "InvalidImportPath", f"ImportPath {import_path!r} must be an S3 URI of the form s3://bucket[/prefix]"
        )
    bucket = import_path[len("s3://") :].split("/", 1)[0]
    if export_path is not None and not (export_path == f"s3://{bucket}" or export_path.startswith(f"s3://{bucket}/")):
        raise FsxError(
            "InvalidExportPath", f"ExportPath {export_path!r} must be in the ImportPath's bucket s3://{bucket}"
        )
    if chunk_size is not None and not 1 <= chunk_size <= MAX_CHUNK_SIZE_MIB:
        raise bad_request(f"ImportedFileChunkSize must be between 1 and {MAX_CHUNK_SIZE_MIB} MiB")
    return {
        "ImportPath": import_path,
        "ExportPath": export_path or _default_export_path(import_path),
        "ImportedFileChunkSize": chunk_size or DEFAULT_CHUNK_SIZE_MIB,
        "AutoImportPolicy": policy or "NONE",
    }


def _default_export_path(import_path: str) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{import_path.rstrip('/')}/FSxLustre{stamp}"


def _log_configuration(raw: Any, region: str, account: str) -> dict[str, str]:
    if raw is None:
        return {"Level": "DISABLED"}
    if not isinstance(raw, dict):
        raise bad_request("LogConfiguration must be an object")
    reject_unknown(raw, {"Level", "Destination"}, "LogConfiguration")
    level = _enum(raw, "Level", LOG_LEVELS, where="LogConfiguration")
    if level is None:
        raise bad_request("Missing required parameter: LogConfiguration.Level")
    if level == "DISABLED":
        return {"Level": level}
    destination = get_param(raw, "Destination", str, where="LogConfiguration")
    if destination is None:
        destination = f"arn:aws:logs:{region}:{account}:log-group:/aws/fsx/lustre"
    elif not destination.startswith("arn:aws:logs:"):
        raise bad_request("LogConfiguration.Destination must be the ARN of a CloudWatch Logs log group")
    return {"Level": level, "Destination": destination}


def _root_squash(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise bad_request("RootSquashConfiguration must be an object")
    reject_unknown(raw, {"RootSquash", "NoSquashNids"}, "RootSquashConfiguration")
    squash = get_param(raw, "RootSquash", str, where="RootSquashConfiguration")
    if squash is not None and not ROOT_SQUASH.match(squash):
        raise bad_request(f"RootSquash {squash!r} must have the form UID:GID")
    nids = get_param(raw, "NoSquashNids", list, where="RootSquashConfiguration")
    if nids is not None and not all(isinstance(nid, str) for nid in nids):
        raise bad_request("NoSquashNids must be a list of strings")
    return without_none({"RootSquash": squash, "NoSquashNids": nids})


def _metadata(raw: Any, deployment: str, capacity: int, current: dict[str, Any] | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    if deployment != "PERSISTENT_2":
        raise bad_request("MetadataConfiguration is supported only for the PERSISTENT_2 deployment type")
    if not isinstance(raw, dict):
        raise bad_request("MetadataConfiguration must be an object")
    reject_unknown(raw, {"Mode", "Iops"}, "MetadataConfiguration")
    mode = _enum(raw, "Mode", METADATA_MODES, where="MetadataConfiguration")
    if mode is None:
        raise bad_request("Missing required parameter: MetadataConfiguration.Mode")
    iops = get_param(raw, "Iops", int, where="MetadataConfiguration")
    if mode == "AUTOMATIC":
        if iops is not None:
            raise bad_request("MetadataConfiguration.Iops can be given only in USER_PROVISIONED mode")
        return {"Iops": automatic_metadata_iops(capacity), "Mode": mode}
    if iops is None:
        raise bad_request("MetadataConfiguration.Iops is required in USER_PROVISIONED mode")
    if iops not in (1500, 3000, 6000) and (iops % 12000 or not 12000 <= iops <= MAX_METADATA_IOPS):
        raise bad_request(
            f"MetadataConfiguration.Iops {iops} is invalid; valid values are 1500, 3000, 6000, 12000 and "
            f"multiples of 12000 up to {MAX_METADATA_IOPS}"
        )
    if current is not None and iops < current.get("Iops", 0):
        raise bad_request(f"Metadata IOPS can only be increased (current: {current['Iops']})")
    return {"Iops": iops, "Mode": mode}


def _mount_name() -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))
