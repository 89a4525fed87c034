"""The FSx resources the emulator keeps, and how each renders in the FSx API's shapes.

Lifecycles are not stored but computed from the clock: a resource knows when its
creation, update or deletion is due to finish and reports the matching state.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from fsx_common import render_tags, without_none

FS_LIFECYCLES = (
    "AVAILABLE",
    "CREATING",
    "FAILED",
    "DELETING",
    "MISCONFIGURED",
    "UPDATING",
    "MISCONFIGURED_UNAVAILABLE",
)
DRA_LIFECYCLES = ("CREATING", "AVAILABLE", "MISCONFIGURED", "UPDATING", "DELETING", "FAILED")
TASK_LIFECYCLES = ("PENDING", "EXECUTING", "FAILED", "SUCCEEDED", "CANCELED", "CANCELING")


def _progress(start: float, end: float, now: float) -> int:
    if end <= start:
        return 100
    return max(0, min(100, int(100 * (now - start) / (end - start))))


@dataclass
class AdminAction:
    """A FILE_SYSTEM_UPDATE administrative action; deferred changes apply when it completes."""

    request_time: float
    done_at: float
    target: dict[str, Any]
    storage_capacity: int | None = None
    version: str | None = None
    lustre: dict[str, Any] = field(default_factory=dict)
    completed: bool = False

    def render(self, now: float) -> dict[str, Any]:
        return {
            "AdministrativeActionType": "FILE_SYSTEM_UPDATE",
            "ProgressPercent": 100 if self.completed else min(_progress(self.request_time, self.done_at, now), 99),
            "RequestTime": self.request_time,
            "Status": "COMPLETED" if self.completed else "IN_PROGRESS",
            "TargetFileSystemValues": self.target,
        }


@dataclass
class FileSystem:
    id: str
    arn: str
    owner: str
    region: str
    created_at: float
    ready_at: float
    storage_capacity: int
    storage_type: str
    vpc_id: str
    subnet_ids: list[str]
    eni_ids: list[str]
    kms_key_id: str | None
    version: str
    lustre: dict[str, Any]
    actions: list[AdminAction] = field(default_factory=list)
    delete_done_at: float | None = None
    delete_response: dict[str, Any] | None = None
    forced: str | None = None
    failure: str | None = None

    @property
    def deployment(self) -> str:
        return self.lustre["DeploymentType"]

    def pending_action(self) -> AdminAction | None:
        return next((action for action in self.actions if not action.completed), None)

    def lifecycle(self, now: float) -> str:
        if self.delete_done_at is not None:
            return "DELETING"
        if self.forced:
            return self.forced
        if now < self.ready_at:
            return "CREATING"
        if self.pending_action() is not None:
            return "UPDATING"
        return "AVAILABLE"

    def render(self, now: float, tags: dict[str, str]) -> dict[str, Any]:
        lifecycle = self.lifecycle(now)
        lustre = copy.deepcopy(self.lustre)
        repository = lustre.get("DataRepositoryConfiguration")
        if repository is not None:
            repository["Lifecycle"] = lifecycle if lifecycle in ("CREATING", "DELETING") else "AVAILABLE"
        return without_none(
            {
                "OwnerId": self.owner,
                "CreationTime": self.created_at,
                "FileSystemId": self.id,
                "FileSystemType": "LUSTRE",
                "Lifecycle": lifecycle,
                "FailureDetails": {"Message": self.failure} if self.failure else None,
                "StorageCapacity": self.storage_capacity,
                "StorageType": self.storage_type,
                "VpcId": self.vpc_id,
                "SubnetIds": list(self.subnet_ids),
                "NetworkInterfaceIds": list(self.eni_ids),
                "DNSName": f"{self.id}.fsx.{self.region}.amazonaws.com",
                "KmsKeyId": self.kms_key_id,
                "ResourceARN": self.arn,
                "Tags": render_tags(tags),
                "LustreConfiguration": lustre,
                "AdministrativeActions": [action.render(now) for action in self.actions] or None,
                "FileSystemTypeVersion": self.version,
            }
        )


@dataclass
class Backup:
    id: str
    arn: str
    owner: str
    created_at: float
    ready_at: float
    file_system: dict[str, Any]
    kms_key_id: str | None

    def render(self, now: float, tags: dict[str, str]) -> dict[str, Any]:
        available = now >= self.ready_at
        return without_none(
            {
                "BackupId": self.id,
                "Lifecycle": "AVAILABLE" if available else "CREATING",
                "Type": "USER_INITIATED",
                "ProgressPercent": _progress(self.created_at, self.ready_at, now),
                "CreationTime": self.created_at,
                "KmsKeyId": self.kms_key_id,
                "ResourceARN": self.arn,
                "Tags": render_tags(tags),
                "FileSystem": self.file_system,
                "OwnerId": self.owner,
                "ResourceType": "FILE_SYSTEM",
            }
        )


@dataclass
class Association:
    id: str
    arn: str
    fs_id: str
    created_at: float
    ready_at: float
    file_system_path: str
    data_repository_path: str
    batch_import: bool
    chunk_size: int
    s3: dict[str, Any] | None
    update_done_at: float | None = None
    delete_done_at: float | None = None
    delete_data: bool = False
    forced: str | None = None
    failure: str | None = None

    def lifecycle(self, now: float) -> str:
        if self.delete_done_at is not None:
            return "DELETING"
        if self.forced:
            return self.forced
        if now < self.ready_at:
            return "CREATING"
        if self.update_done_at is not None and now < self.update_done_at:
            return "UPDATING"
        return "AVAILABLE"

    def render(self, now: float, tags: dict[str, str]) -> dict[str, Any]:
        return without_none(
            {
                "AssociationId": self.id,
                "ResourceARN": self.arn,
                "FileSystemId": self.fs_id,
                "Lifecycle": self.lifecycle(now),
                "FailureDetails": {"Message": self.failure} if self.failure else None,
                "FileSystemPath": self.file_system_path,
                "DataRepositoryPath": self.data_repository_path,
                "BatchImportMetaDataOnCreate": self.batch_import,
                "ImportedFileChunkSize": self.chunk_size,
                "S3": copy.deepcopy(self.s3),
                "Tags": render_tags(tags),
                "CreationTime": self.created_at,
            }
        )


@dataclass
class Task:
    id: str
    arn: str
    fs_id: str
    type: str
    paths: list[str]
    report: dict[str, Any]
    release: dict[str, Any] | None
    capacity_to_release: int | None
    created_at: float
    start_at: float
    end_at: float
    canceled_at: float | None = None
    forced: str | None = None
    forced_at: float | None = None
    failure: str | None = None

    def lifecycle(self, now: float) -> str:
        if self.forced:
            return self.forced
        if self.canceled_at is not None:
            return "CANCELED"
        if now < self.start_at:
            return "PENDING"
        if now < self.end_at:
            return "EXECUTING"
        return "SUCCEEDED"

    def active(self, now: float) -> bool:
        return self.lifecycle(now) in ("PENDING", "EXECUTING", "CANCELING")

    def render(self, now: float, tags: dict[str, str]) -> dict[str, Any]:
        lifecycle = self.lifecycle(now)
        started = lifecycle != "PENDING" and (self.canceled_at is None or self.canceled_at >= self.start_at)
        end_time = {
            "SUCCEEDED": self.end_at,
            "CANCELED": self.canceled_at,
            "FAILED": self.forced_at,
        }.get(lifecycle)
        files = max(len(self.paths), 1)
        succeeded = files if lifecycle == "SUCCEEDED" else 0
        status = without_none(
            {
                "TotalCount": files if started else 0,
                "SucceededCount": succeeded,
                "FailedCount": files if lifecycle == "FAILED" else 0,
                "LastUpdatedTime": min(now, end_time) if end_time else now,
                "ReleasedCapacity": 0 if self.type == "RELEASE_DATA_FROM_FILESYSTEM" else None,
            }
        )
        return without_none(
            {
                "TaskId": self.id,
                "Lifecycle": lifecycle,
                "Type": self.type,
                "CreationTime": self.created_at,
                "StartTime": self.start_at if started else None,
                "EndTime": end_time,
                "ResourceARN": self.arn,
                "Tags": render_tags(tags),
                "FileSystemId": self.fs_id,
                "Paths": list(self.paths),
                "FailureDetails": {"Message": self.failure} if self.failure else None,
                "Status": status,
                "Report": copy.deepcopy(self.report),
                "CapacityToRelease": self.capacity_to_release,
                "ReleaseConfiguration": copy.deepcopy(self.release),
            }
        )
