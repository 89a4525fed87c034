"""FSx for Lustre, emulated: file systems, backups, data repository associations and tasks.

moto's FSx backend has no lifecycles, validation or idempotency, and lacks most of
the Lustre API, so every FSx call is answered here instead (``install`` routes
moto's FSx URL to :class:`LustreResponse`). State is kept per account and region
in a moto ``BackendDict``, so moto's reset clears it too. Lifecycles are computed
from the clock on each read: CREATING turns AVAILABLE ``fsx_create_delay_s``
after creation, and so on for updates and deletions.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import moto.fsx.urls
from moto.core.base_backend import BackendDict, BaseBackend
from moto.core.common_types import TYPE_RESPONSE
from moto.core.responses import BaseResponse
from moto.ec2.exceptions import InvalidNetworkInterfaceIdError, InvalidSubnetIdError
from moto.ec2.models import ec2_backends

import fsx_lustre
from config import CONFIG
from fsx_common import (
    FsxError,
    Params,
    bad_request,
    fingerprint,
    get_param,
    incompatible,
    new_id,
    paginate,
    parse_tags,
    render_tags,
    require_param,
    without_none,
)
from fsx_resources import (
    DRA_LIFECYCLES,
    FS_LIFECYCLES,
    TASK_LIFECYCLES,
    AdminAction,
    Association,
    Backup,
    FileSystem,
    Task,
)

TASK_TYPES = ("EXPORT_TO_REPOSITORY", "IMPORT_METADATA_FROM_REPOSITORY", "RELEASE_DATA_FROM_FILESYSTEM")
S3_EVENTS = ("NEW", "CHANGED", "DELETED")
ENIS_PER_FILE_SYSTEM = 2
MAX_SECURITY_GROUPS = 50
DESCRIBE_DRA_MAX_RESULTS = 25


def _paths_overlap(a: str, b: str) -> bool:
    """Whether one path is the other or lies beneath it (paths separated by '/')."""
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


class LustreBackend(BaseBackend):
    """FSx state of one account in one region; callers hold ``lock`` around each operation."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.lock = threading.RLock()
        self.file_systems: dict[str, FileSystem] = {}
        self.backups: dict[str, Backup] = {}
        self.associations: dict[str, Association] = {}
        self.tasks: dict[str, Task] = {}
        self.tags: dict[str, dict[str, str]] = {}
        self.tokens: dict[tuple[str, str], tuple[str, str]] = {}

    # --- bookkeeping ----------------------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Applies everything whose time has come: finished updates and deletions."""
        for fs in list(self.file_systems.values()):
            if fs.delete_done_at is not None and now >= fs.delete_done_at:
                self._remove_file_system(fs)
                continue
            for action in fs.actions:
                if not action.completed and now >= action.done_at:
                    self._complete(fs, action)
        for dra in list(self.associations.values()):
            if dra.delete_done_at is not None and now >= dra.delete_done_at:
                del self.associations[dra.id]
                self.tags.pop(dra.arn, None)

    def _complete(self, fs: FileSystem, action: AdminAction) -> None:
        action.completed = True
        if action.storage_capacity is not None:
            fs.storage_capacity = action.storage_capacity
        if action.version is not None:
            fs.version = action.version
        fs.lustre.update(copy.deepcopy(action.lustre))
        metadata = fs.lustre.get("MetadataConfiguration")
        if metadata and metadata["Mode"] == "AUTOMATIC":
            metadata["Iops"] = fsx_lustre.automatic_metadata_iops(fs.storage_capacity)

    def _remove_file_system(self, fs: FileSystem) -> None:
        ec2 = ec2_backends[self.account_id][self.region_name]
        for eni_id in fs.eni_ids:
            with contextlib.suppress(InvalidNetworkInterfaceIdError):
                ec2.delete_network_interface(eni_id)
        for dra in [d for d in self.associations.values() if d.fs_id == fs.id]:
            del self.associations[dra.id]
            self.tags.pop(dra.arn, None)
        for task in [t for t in self.tasks.values() if t.fs_id == fs.id]:
            del self.tasks[task.id]
            self.tags.pop(task.arn, None)
        del self.file_systems[fs.id]
        self.tags.pop(fs.arn, None)

    def _arn(self, kind: str, resource_id: str) -> str:
        return f"arn:aws:fsx:{self.region_name}:{self.account_id}:{kind}/{resource_id}"

    def _file_system(self, params: Params) -> FileSystem:
        fs_id = require_param(params, "FileSystemId", str)
        fs = self.file_systems.get(fs_id)
        if fs is None:
            raise FsxError("FileSystemNotFound", f"File system '{fs_id}' does not exist.")
        return fs

    def _association(self, assoc_id: str) -> Association:
        dra = self.associations.get(assoc_id)
        if dra is None:
            raise FsxError(
                "DataRepositoryAssociationNotFound", f"Data repository association '{assoc_id}' does not exist."
            )
        return dra

    def _replayed(self, operation: str, params: Params) -> str | None:
        """The id a previous request with this ClientRequestToken produced, if any.

        Raises IncompatibleParameterError when the token was used with other parameters.
        """
        token = get_param(params, "ClientRequestToken", str)
        if token is None or (operation, token) not in self.tokens:
            return None
        previous, resource_id = self.tokens[(operation, token)]
        if previous != fingerprint(params):
            raise incompatible(
                "ClientRequestToken",
                f"The ClientRequestToken '{token}' was already used for {operation} with different parameters.",
            )
        return resource_id

    def _remember(self, operation: str, params: Params, resource_id: str) -> None:
        token = get_param(params, "ClientRequestToken", str)
        if token is not None:
            self.tokens[(operation, token)] = (fingerprint(params), resource_id)

    # --- file systems ---------------------------------------------------------------------------

    def create_file_system(self, params: Params, now: float) -> dict[str, Any]:
        fs_type = require_param(params, "FileSystemType", str)
        if fs_type in ("WINDOWS", "ONTAP", "OPENZFS"):
            raise FsxError("UnsupportedOperation", f"The emulator implements FSx for Lustre only, not {fs_type}.")
        if fs_type != "LUSTRE":
            raise bad_request(f"Invalid FileSystemType {fs_type!r}")
        replayed = self._replayed("CreateFileSystem", params)
        if replayed in self.file_systems:
            fs = self.file_systems[replayed]
            return {"FileSystem": fs.render(now, self.tags[fs.arn])}

        capacity = require_param(params, "StorageCapacity", int)
        subnet, security_groups = self._network(params)
        spec = fsx_lustre.build_create(params, capacity, self.region_name, self.account_id)
        tags = parse_tags(params.get("Tags"))

        fs_id = new_id("fs")
        fs = FileSystem(
            id=fs_id,
            arn=self._arn("file-system", fs_id),
            owner=self.account_id,
            region=self.region_name,
            created_at=now,
            ready_at=now + CONFIG.snapshot().fsx_create_delay_s,
            storage_capacity=capacity,
            storage_type=spec.storage_type,
            vpc_id=subnet.vpc_id,
            subnet_ids=[subnet.id],
            eni_ids=self._create_enis(subnet, security_groups, fs_id),
            kms_key_id=spec.kms_key_id,
            version=spec.version,
            lustre=spec.config,
        )
        self.file_systems[fs_id] = fs
        self.tags[fs.arn] = tags
        self._remember("CreateFileSystem", params, fs_id)
        return {"FileSystem": fs.render(now, tags)}

    def _network(self, params: Params) -> tuple[Any, list[str]]:
        subnet_ids = require_param(params, "SubnetIds", list)
        if len(subnet_ids) != 1:
            raise bad_request("FSx for Lustre file systems take exactly one subnet in SubnetIds")
        ec2 = ec2_backends[self.account_id][self.region_name]
        try:
            subnet = ec2.get_subnet(subnet_ids[0])
        except InvalidSubnetIdError:
            raise FsxError(
                "InvalidNetworkSettings",
                f"The subnet ID '{subnet_ids[0]}' is either invalid or not part of the VPC specified.",
                InvalidSubnetId=str(subnet_ids[0]),
            ) from None
        group_ids = get_param(params, "SecurityGroupIds", list) or []
        if len(group_ids) > MAX_SECURITY_GROUPS:
            raise bad_request(f"At most {MAX_SECURITY_GROUPS} security groups are allowed")
        for group_id in group_ids:
            group = ec2.get_security_group_from_id(group_id) if isinstance(group_id, str) else None
            if group is None or group.vpc_id != subnet.vpc_id:
                raise FsxError(
                    "InvalidNetworkSettings",
                    f"The security group ID '{group_id}' is either invalid or not part of the VPC {subnet.vpc_id}.",
                    InvalidSecurityGroupId=str(group_id),
                )
        return subnet, list(group_ids)

    def _create_enis(self, subnet: Any, group_ids: list[str], fs_id: str) -> list[str]:
        ec2 = ec2_backends[self.account_id][self.region_name]
        eni_ids = []
        for _ in range(ENIS_PER_FILE_SYSTEM):
            eni = ec2.create_network_interface(
                subnet, [], group_ids=group_ids or None, description=f"ENI for Amazon FSx for Lustre {fs_id}"
            )
            eni.requester_managed = True
            eni_ids.append(eni.id)
        return eni_ids

    def describe_file_systems(self, params: Params, now: float) -> dict[str, Any]:
        ids = get_param(params, "FileSystemIds", list)
        if ids:
            missing = [fs_id for fs_id in ids if fs_id not in self.file_systems]
            if missing:
                raise FsxError("FileSystemNotFound", f"File system '{missing[0]}' does not exist.")
            selected = [self.file_systems[fs_id] for fs_id in ids]
        else:
            selected = list(self.file_systems.values())
        page, next_token = paginate(selected, params)
        return without_none(
            {"FileSystems": [fs.render(now, self.tags[fs.arn]) for fs in page], "NextToken": next_token}
        )

    def update_file_system(self, params: Params, now: float) -> dict[str, Any]:
        fs = self._file_system(params)
        if self._replayed("UpdateFileSystem", params) == fs.id:
            return {"FileSystem": fs.render(now, self.tags[fs.arn])}
        lifecycle = fs.lifecycle(now)
        if lifecycle == "UPDATING":
            raise bad_request(f"Unable to update file system {fs.id}: another update is in progress.")
        if lifecycle != "AVAILABLE":
            raise bad_request(f"Unable to update file system {fs.id} while its lifecycle is {lifecycle}.")

        capacity = get_param(params, "StorageCapacity", int)
        version = get_param(params, "FileSystemTypeVersion", str)
        lustre = get_param(params, "LustreConfiguration", dict)
        if capacity is None and version is None and lustre is None:
            raise bad_request(
                "UpdateFileSystem needs at least one of StorageCapacity, FileSystemTypeVersion, LustreConfiguration"
            )

        update = fsx_lustre.plan_update(
            fs.lustre,
            lustre or {},
            storage_type=fs.storage_type,
            capacity=capacity or fs.storage_capacity,
            region=self.region_name,
            account=self.account_id,
        )
        action = AdminAction(request_time=now, done_at=now, target={}, lustre=update.deferred)
        if capacity is not None:
            self._check_capacity_increase(fs, capacity, update.deferred.get("PerUnitStorageThroughput"))
            action.storage_capacity = capacity
            action.target["StorageCapacity"] = capacity
        if version is not None and version != fs.version:
            if version not in fsx_lustre.VERSIONS:
                raise bad_request(
                    f"Invalid FileSystemTypeVersion {version!r}; valid values: {', '.join(fsx_lustre.VERSIONS)}"
                )
            if fsx_lustre.VERSIONS.index(version) < fsx_lustre.VERSIONS.index(fs.version):
                raise bad_request(
                    f"FileSystemTypeVersion can only be upgraded (current {fs.version}, requested {version})"
                )
            action.version = version
            action.target["FileSystemTypeVersion"] = version
        if update.deferred:
            action.target["LustreConfiguration"] = copy.deepcopy(update.deferred)
        if action.target:
            action.done_at = now + CONFIG.snapshot().fsx_update_delay_s
        else:
            action.completed = True
            action.target["LustreConfiguration"] = {
                key: value for key, value in update.config.items() if fs.lustre.get(key) != value
            }
        fs.lustre = update.config
        fs.actions.append(action)
        self._remember("UpdateFileSystem", params, fs.id)
        return {"FileSystem": fs.render(now, self.tags[fs.arn])}

    @staticmethod
    def _check_capacity_increase(fs: FileSystem, capacity: int, new_throughput: int | None) -> None:
        if fs.deployment == "SCRATCH_1":
            raise bad_request("Storage capacity of SCRATCH_1 file systems cannot be changed")
        if capacity <= fs.storage_capacity:
            raise bad_request(
                f"Storage capacity can only be increased: requested {capacity} GiB, current {fs.storage_capacity} GiB"
            )
        if capacity < fs.storage_capacity * 1.1:
            raise bad_request("The new storage capacity must be at least 10% larger than the current storage capacity")
        throughput = new_throughput or fs.lustre.get("PerUnitStorageThroughput")
        error = fsx_lustre.storage_capacity_error(fs.deployment, fs.storage_type, throughput, capacity)
        if error:
            raise bad_request(error)

    def delete_file_system(self, params: Params, now: float) -> dict[str, Any]:
        fs = self._file_system(params)
        if fs.delete_response is not None:
            return fs.delete_response
        lustre = get_param(params, "LustreConfiguration", dict) or {}
        skip_backup = get_param(lustre, "SkipFinalBackup", bool, where="LustreConfiguration")
        final_tags = parse_tags(lustre.get("FinalBackupTags"), "FinalBackupTags")
        response: dict[str, Any] = {"FileSystemId": fs.id, "Lifecycle": "DELETING"}
        if skip_backup is False:
            if fs.deployment in fsx_lustre.SCRATCH_TYPES:
                raise bad_request(f"Backups are not supported for {fs.deployment} file systems; set SkipFinalBackup")
            if not final_tags and fs.lustre.get("CopyTagsToBackups"):
                final_tags = dict(self.tags[fs.arn])
            backup = self._backup(fs, final_tags, now)
            response["LustreResponse"] = {"FinalBackupId": backup.id, "FinalBackupTags": render_tags(final_tags)}
        elif final_tags:
            raise bad_request("FinalBackupTags require SkipFinalBackup to be false")
        delete_at = now + CONFIG.snapshot().fsx_delete_delay_s
        fs.delete_done_at = delete_at
        fs.delete_response = response
        for dra in self.associations.values():
            if dra.fs_id == fs.id and dra.delete_done_at is None:
                dra.delete_done_at = delete_at
        return response

    # --- backups --------------------------------------------------------------------------------

    def _backup(self, fs: FileSystem, tags: dict[str, str], now: float) -> Backup:
        backup_id = new_id("backup")
        snapshot = fs.render(now, self.tags[fs.arn])
        for key in ("Tags", "AdministrativeActions", "NetworkInterfaceIds"):
            snapshot.pop(key, None)
        backup = Backup(
            id=backup_id,
            arn=self._arn("backup", backup_id),
            owner=self.account_id,
            created_at=now,
            ready_at=now + CONFIG.snapshot().fsx_create_delay_s,
            file_system=snapshot,
            kms_key_id=fs.kms_key_id,
        )
        self.backups[backup_id] = backup
        self.tags[backup.arn] = tags
        return backup

    def create_backup(self, params: Params, now: float) -> dict[str, Any]:
        if params.get("VolumeId") is not None:
            raise FsxError("UnsupportedOperation", "The emulator implements backups of Lustre file systems only.")
        replayed = self._replayed("CreateBackup", params)
        if replayed in self.backups:
            backup = self.backups[replayed]
            return {"Backup": backup.render(now, self.tags[backup.arn])}
        fs = self._file_system(params)
        if fs.deployment in fsx_lustre.SCRATCH_TYPES:
            raise bad_request(f"Backups are not supported for {fs.deployment} file systems")
        if fs.lifecycle(now) != "AVAILABLE":
            raise bad_request(f"File system {fs.id} must be AVAILABLE to be backed up")
        tags = parse_tags(params.get("Tags"))
        if not tags and fs.lustre.get("CopyTagsToBackups"):
            tags = dict(self.tags[fs.arn])
        backup = self._backup(fs, tags, now)
        self._remember("CreateBackup", params, backup.id)
        return {"Backup": backup.render(now, tags)}

    def describe_backups(self, params: Params, now: float) -> dict[str, Any]:
        ids = get_param(params, "BackupIds", list)
        if ids:
            missing = [backup_id for backup_id in ids if backup_id not in self.backups]
            if missing:
                raise FsxError("BackupNotFound", f"Backup '{missing[0]}' does not exist.")
            selected = [self.backups[backup_id] for backup_id in ids]
        else:
            selected = list(self.backups.values())
        filters = _filters(params, {"file-system-id", "backup-type", "file-system-type"})
        rendered = [backup.render(now, self.tags[backup.arn]) for backup in selected]
        rendered = [
            b
            for b in rendered
            if _passes(filters, "file-system-id", b["FileSystem"]["FileSystemId"])
            and _passes(filters, "backup-type", b["Type"])
            and _passes(filters, "file-system-type", b["FileSystem"]["FileSystemType"])
        ]
        page, next_token = paginate(rendered, params)
        return without_none({"Backups": page, "NextToken": next_token})

    def delete_backup(self, params: Params, now: float) -> dict[str, Any]:
        backup_id = require_param(params, "BackupId", str)
        backup = self.backups.pop(backup_id, None)
        if backup is None:
            raise FsxError("BackupNotFound", f"Backup '{backup_id}' does not exist.")
        self.tags.pop(backup.arn, None)
        return {"BackupId": backup_id, "Lifecycle": "DELETED"}

    # --- data repository associations -----------------------------------------------------------

    def create_data_repository_association(self, params: Params, now: float) -> dict[str, Any]:
        replayed = self._replayed("CreateDataRepositoryAssociation", params)
        if replayed in self.associations:
            dra = self.associations[replayed]
            return {"Association": dra.render(now, self.tags[dra.arn])}
        fs = self._file_system(params)
        self._check_supports_associations(fs, now)
        fs_path = require_param(params, "FileSystemPath", str)
        repo_path = require_param(params, "DataRepositoryPath", str)
        if not fs_path.startswith("/"):
            raise bad_request(f"FileSystemPath {fs_path!r} must be an absolute path starting with '/'")
        if not repo_path.startswith("s3://") or len(repo_path) <= len("s3://"):
            raise bad_request(f"DataRepositoryPath {repo_path!r} must be an S3 URI of the form s3://bucket[/prefix]")
        for other in self.associations.values():
            if other.fs_id != fs.id:
                continue
            if _paths_overlap(other.file_system_path, fs_path):
                raise bad_request(
                    f"FileSystemPath {fs_path!r} overlaps {other.file_system_path!r} of association {other.id}"
                )
            if _paths_overlap(other.data_repository_path, repo_path):
                raise bad_request(
                    f"DataRepositoryPath {repo_path!r} overlaps {other.data_repository_path!r} "
                    f"of association {other.id}"
                )
        chunk_size = get_param(params, "ImportedFileChunkSize", int)
        if chunk_size is not None and not 1 <= chunk_size <= fsx_lustre.MAX_CHUNK_SIZE_MIB:
            raise bad_request(f"ImportedFileChunkSize must be between 1 and {fsx_lustre.MAX_CHUNK_SIZE_MIB} MiB")
        s3 = _s3_configuration(params.get("S3"))
        tags = parse_tags(params.get("Tags"))
        dra_id = new_id("dra")
        dra = Association(
            id=dra_id,
            arn=self._arn("association", f"{fs.id}/{dra_id}"),
            fs_id=fs.id,
            created_at=now,
            ready_at=now + CONFIG.snapshot().fsx_create_delay_s,
            file_system_path=fs_path,
            data_repository_path=repo_path,
            batch_import=get_param(params, "BatchImportMetaDataOnCreate", bool) or False,
            chunk_size=chunk_size or fsx_lustre.DEFAULT_CHUNK_SIZE_MIB,
            s3=s3,
        )
        self.associations[dra_id] = dra
        self.tags[dra.arn] = tags
        self._remember("CreateDataRepositoryAssociation", params, dra_id)
        return {"Association": dra.render(now, tags)}

    @staticmethod
    def _check_supports_associations(fs: FileSystem, now: float) -> None:
        if fs.deployment == "SCRATCH_1" or fs.version == "2.10":
            raise bad_request(
                "Data repository associations are not supported on SCRATCH_1 or Lustre 2.10 file systems "
                f"({fs.id} is {fs.deployment}, Lustre {fs.version})"
            )
        if "DataRepositoryConfiguration" in fs.lustre:
            raise bad_request(f"File system {fs.id} is linked to S3 through ImportPath and cannot have associations")
        lifecycle = fs.lifecycle(now)
        if lifecycle not in ("AVAILABLE", "UPDATING"):
            raise bad_request(f"File system {fs.id} is {lifecycle}; it must be AVAILABLE")

    def describe_data_repository_associations(self, params: Params, now: float) -> dict[str, Any]:
        ids = get_param(params, "AssociationIds", list)
        selected = [self._association(dra_id) for dra_id in ids] if ids else list(self.associations.values())
        filters = _filters(params, {"file-system-id", "data-repository-type", "file-cache-id"})
        selected = [
            dra
            for dra in selected
            if _passes(filters, "file-system-id", dra.fs_id)
            and _passes(filters, "data-repository-type", "S3")
            and "file-cache-id" not in filters
        ]
        page, next_token = paginate(selected, params, DESCRIBE_DRA_MAX_RESULTS)
        return without_none(
            {"Associations": [dra.render(now, self.tags[dra.arn]) for dra in page], "NextToken": next_token}
        )

    def update_data_repository_association(self, params: Params, now: float) -> dict[str, Any]:
        dra = self._association(require_param(params, "AssociationId", str))
        if self._replayed("UpdateDataRepositoryAssociation", params) == dra.id:
            return {"Association": dra.render(now, self.tags[dra.arn])}
        lifecycle = dra.lifecycle(now)
        if lifecycle != "AVAILABLE":
            raise bad_request(
                f"Data repository association {dra.id} is {lifecycle}; it must be AVAILABLE to be updated"
            )
        chunk_size = get_param(params, "ImportedFileChunkSize", int)
        if chunk_size is not None and not 1 <= chunk_size <= fsx_lustre.MAX_CHUNK_SIZE_MIB:
            raise bad_request(f"ImportedFileChunkSize must be between 1 and {fsx_lustre.MAX_CHUNK_SIZE_MIB} MiB")
        if chunk_size is None and "S3" not in params:
            raise bad_request("UpdateDataRepositoryAssociation needs ImportedFileChunkSize or S3")
        if chunk_size is not None:
            dra.chunk_size = chunk_size
        if "S3" in params:
            dra.s3 = _s3_configuration(params["S3"])
        dra.update_done_at = now + CONFIG.snapshot().fsx_update_delay_s
        self._remember("UpdateDataRepositoryAssociation", params, dra.id)
        return {"Association": dra.render(now, self.tags[dra.arn])}

    def delete_data_repository_association(self, params: Params, now: float) -> dict[str, Any]:
        dra = self._association(require_param(params, "AssociationId", str))
        if dra.delete_done_at is None:
            dra.delete_data = get_param(params, "DeleteDataInFileSystem", bool) or False
            dra.delete_done_at = now + CONFIG.snapshot().fsx_delete_delay_s
        return {"AssociationId": dra.id, "Lifecycle": "DELETING", "DeleteDataInFileSystem": dra.delete_data}

    # --- data repository tasks ------------------------------------------------------------------

    def create_data_repository_task(self, params: Params, now: float) -> dict[str, Any]:
        replayed = self._replayed("CreateDataRepositoryTask", params)
        if replayed in self.tasks:
            task = self.tasks[replayed]
            return {"DataRepositoryTask": task.render(now, self.tags[task.arn])}
        fs = self._file_system(params)
        task_type = require_param(params, "Type", str)
        if task_type not in TASK_TYPES:
            raise bad_request(
                f"Invalid task Type {task_type!r} for a file system; valid values: {', '.join(TASK_TYPES)}"
            )
        if fs.lifecycle(now) not in ("AVAILABLE", "UPDATING"):
            raise bad_request(f"File system {fs.id} is {fs.lifecycle(now)}; it must be AVAILABLE")
        linked = "DataRepositoryConfiguration" in fs.lustre or any(
            dra.fs_id == fs.id and dra.lifecycle(now) in ("AVAILABLE", "UPDATING") for dra in self.associations.values()
        )
        if not linked:
            raise bad_request(f"File system {fs.id} is not linked to a data repository")
        busy = next((t for t in self.tasks.values() if t.fs_id == fs.id and t.active(now)), None)
        if busy is not None:
            raise FsxError(
                "DataRepositoryTaskExecuting",
                f"Data repository task {busy.id} is {busy.lifecycle(now)} on file system {fs.id}; "
                "wait for it to finish.",
            )
        paths = get_param(params, "Paths", list) or []
        if not all(isinstance(path, str) for path in paths):
            raise bad_request("Paths must be a list of strings")
        release = _release_configuration(params.get("ReleaseConfiguration"), task_type)
        delay = CONFIG.snapshot().fsx_create_delay_s
        task_id = new_id("task")
        task = Task(
            id=task_id,
            arn=self._arn("task", task_id),
            fs_id=fs.id,
            type=task_type,
            paths=paths,
            report=_report(params.get("Report")),
            release=release,
            capacity_to_release=get_param(params, "CapacityToRelease", int),
            created_at=now,
            start_at=now + delay / 2,
            end_at=now + delay,
        )
        tags = parse_tags(params.get("Tags"))
        self.tasks[task_id] = task
        self.tags[task.arn] = tags
        self._remember("CreateDataRepositoryTask", params, task_id)
        return {"DataRepositoryTask": task.render(now, tags)}

    def describe_data_repository_tasks(self, params: Params, now: float) -> dict[str, Any]:
        ids = get_param(params, "TaskIds", list)
        if ids:
            missing = [task_id for task_id in ids if task_id not in self.tasks]
            if missing:
                raise FsxError("DataRepositoryTaskNotFound", f"Data repository task '{missing[0]}' does not exist.")
            selected = [self.tasks[task_id] for task_id in ids]
        else:
            selected = list(self.tasks.values())
        filters = _filters(
            params, {"file-system-id", "task-lifecycle", "data-repository-association-id", "file-cache-id"}
        )
        if "data-repository-association-id" in filters or "file-cache-id" in filters:
            selected = []
        selected = [
            task
            for task in selected
            if _passes(filters, "file-system-id", task.fs_id)
            and _passes(filters, "task-lifecycle", task.lifecycle(now))
        ]
        page, next_token = paginate(selected, params)
        return without_none(
            {"DataRepositoryTasks": [task.render(now, self.tags[task.arn]) for task in page], "NextToken": next_token}
        )

    def cancel_data_repository_task(self, params: Params, now: float) -> dict[str, Any]:
        task_id = require_param(params, "TaskId", str)
        task = self.tasks.get(task_id)
        if task is None:
            raise FsxError("DataRepositoryTaskNotFound", f"Data repository task '{task_id}' does not exist.")
        if not task.active(now):
            raise FsxError(
                "DataRepositoryTaskEnded", f"Data repository task {task_id} has already ended ({task.lifecycle(now)})."
            )
        task.canceled_at = now
        return {"Lifecycle": "CANCELING", "TaskId": task_id}

    # --- tags -----------------------------------------------------------------------------------

    def _tags_of(self, params: Params) -> dict[str, str]:
        arn = require_param(params, "ResourceARN", str)
        if not arn.startswith("arn:aws:fsx:"):
            raise FsxError("NotServiceResourceError", f"Resource {arn} is not an Amazon FSx resource.", ResourceARN=arn)
        if arn not in self.tags:
            raise FsxError("ResourceNotFound", f"The resource {arn} does not exist.", ResourceARN=arn)
        return self.tags[arn]

    def tag_resource(self, params: Params, now: float) -> dict[str, Any]:
        tags = self._tags_of(params)
        tags.update(parse_tags(require_param(params, "Tags", list)))
        return {}

    def untag_resource(self, params: Params, now: float) -> dict[str, Any]:
        tags = self._tags_of(params)
        for key in require_param(params, "TagKeys", list):
            tags.pop(key, None)
        return {}

    def list_tags_for_resource(self, params: Params, now: float) -> dict[str, Any]:
        page, next_token = paginate(render_tags(self._tags_of(params)), params)
        return without_none({"Tags": page, "NextToken": next_token})

    # --- control API ----------------------------------------------------------------------------

    def force_lifecycle(self, resource_id: str, lifecycle: str, message: str | None, now: float) -> bool:
        """Pins the lifecycle of a file system, association or task; False when it is not here."""
        resource: FileSystem | Association | Task
        allowed: tuple[str, ...]
        if resource_id in self.file_systems:
            resource, allowed = self.file_systems[resource_id], FS_LIFECYCLES
        elif resource_id in self.associations:
            resource, allowed = self.associations[resource_id], DRA_LIFECYCLES
        elif resource_id in self.tasks:
            resource, allowed = self.tasks[resource_id], TASK_LIFECYCLES
        else:
            return False
        if lifecycle not in allowed:
            raise ValueError(f"Lifecycle {lifecycle!r} is not valid for {resource_id}; valid: {', '.join(allowed)}")
        resource.forced = lifecycle
        resource.failure = message
        if isinstance(resource, Task):
            resource.forced_at = now
        return True


def _filters(params: Params, allowed: set[str]) -> dict[str, list[str]]:
    filters: dict[str, list[str]] = {}
    for entry in get_param(params, "Filters", list) or []:
        name = entry.get("Name") if isinstance(entry, dict) else None
        if name not in allowed:
            raise bad_request(f"Invalid filter name {name!r}; valid names: {', '.join(sorted(allowed))}")
        filters.setdefault(name, []).extend(entry.get("Values") or [])
    return filters


def _passes(filters: dict[str, list[str]], name: str, value: str) -> bool:
    return name not in filters or value in filters[name]


def _s3_configuration(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise bad_request("S3 must be an object")
    s3: dict[str, Any] = {}
    for policy in ("AutoImportPolicy", "AutoExportPolicy"):
        if policy not in raw:
            continue
        events = (raw[policy] or {}).get("Events", []) if isinstance(raw[policy], dict) else None
        if not isinstance(events, list) or any(event not in S3_EVENTS for event in events):
            raise bad_request(f"S3.{policy}.Events must be a list of {', '.join(S3_EVENTS)}")
        s3[policy] = {"Events": list(events)}
    unknown = set(raw) - {"AutoImportPolicy", "AutoExportPolicy"}
    if unknown:
        raise bad_request(f"Unsupported parameter(s) in S3: {', '.join(sorted(unknown))}")
    return s3


def _report(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict) or not isinstance(raw.get("Enabled"), bool):
        raise bad_request("Report is required and needs Enabled (true or false)")
    if not raw["Enabled"]:
        return {"Enabled": False}
    report_format = raw.get("Format", "REPORT_CSV_20191124")
    scope = raw.get("Scope", "FAILED_FILES_ONLY")
    if report_format != "REPORT_CSV_20191124" or scope != "FAILED_FILES_ONLY":
        raise bad_request("Report Format must be REPORT_CSV_20191124 and Scope FAILED_FILES_ONLY")
    return without_none({"Enabled": True, "Path": raw.get("Path"), "Format": report_format, "Scope": scope})


def _release_configuration(raw: Any, task_type: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    if task_type != "RELEASE_DATA_FROM_FILESYSTEM":
        raise bad_request("ReleaseConfiguration is valid only for RELEASE_DATA_FROM_FILESYSTEM tasks")
    duration = raw.get("DurationSinceLastAccess") if isinstance(raw, dict) else None
    if duration is None:
        return {}
    if not isinstance(duration, dict) or duration.get("Unit", "DAYS") != "DAYS":
        raise bad_request("ReleaseConfiguration.DurationSinceLastAccess.Unit must be DAYS")
    value = duration.get("Value", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise bad_request("ReleaseConfiguration.DurationSinceLastAccess.Value must be a non-negative integer")
    return {"DurationSinceLastAccess": {"Unit": "DAYS", "Value": value}}


lustre_backends = BackendDict(LustreBackend, "fsx")

Operation = Callable[[LustreBackend, Params, float], dict[str, Any]]
OPERATIONS: dict[str, Operation] = {
    "CreateFileSystem": LustreBackend.create_file_system,
    "DescribeFileSystems": LustreBackend.describe_file_systems,
    "UpdateFileSystem": LustreBackend.update_file_system,
    "DeleteFileSystem": LustreBackend.delete_file_system,
    "CreateBackup": LustreBackend.create_backup,
    "DescribeBackups": LustreBackend.describe_backups,
    "DeleteBackup": LustreBackend.delete_backup,
    "CreateDataRepositoryAssociation": LustreBackend.create_data_repository_association,
    "DescribeDataRepositoryAssociations": LustreBackend.describe_data_repository_associations,
    "UpdateDataRepositoryAssociation": LustreBackend.update_data_repository_association,
    "DeleteDataRepositoryAssociation": LustreBackend.delete_data_repository_association,
    "CreateDataRepositoryTask": LustreBackend.create_data_repository_task,
    "DescribeDataRepositoryTasks": LustreBackend.describe_data_repository_tasks,
    "CancelDataRepositoryTask": LustreBackend.cancel_data_repository_task,
    "TagResource": LustreBackend.tag_resource,
    "UntagResource": LustreBackend.untag_resource,
    "ListTagsForResource": LustreBackend.list_tags_for_resource,
}


class LustreResponse(BaseResponse):
    """Answers FSx JSON 1.1 calls; moto resolves the caller's account and region."""

    def __init__(self) -> None:
        super().__init__(service_name="fsx")

    def call_action(self) -> TYPE_RESPONSE:
        action = self._get_action()
        headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": str(uuid.uuid4())}
        try:
            operation = OPERATIONS.get(action)
            if operation is None:
                raise FsxError("UnsupportedOperation", f"The emulator does not implement fsx:{action}.")
            try:
                params = json.loads(self.body or "{}")
            except json.JSONDecodeError as err:
                raise FsxError("SerializationException", f"Request body is not valid JSON: {err}") from err
            if not isinstance(params, dict):
                raise FsxError("SerializationException", "Request body must be a JSON object")
            backend = lustre_backends[self.current_account][self.region]
            now = time.time()
            with backend.lock:
                backend.advance(now)
                result = operation(backend, params, now)
            return 200, headers, json.dumps(result)
        except FsxError as err:
            headers["x-amzn-ErrorType"] = err.error_type
            return err.code, headers, err.description


def file_system_ids() -> set[str]:
    """Every Lustre file system of every account and region (boot mode shares one directory each)."""
    ids: set[str] = set()
    for account in list(lustre_backends.keys()):
        for region in list(lustre_backends[account].keys()):
            ids.update(lustre_backends[account][region].file_systems.keys())
    return ids


def force_lifecycle(resource_id: str, lifecycle: str, message: str | None) -> dict[str, Any]:
    """Control-API hook: pins a lifecycle on the FSx resource with this id, in any account or region."""
    now = time.time()
    for per_account in list(lustre_backends.values()):
        for backend in list(per_account.values()):
            with backend.lock:
                backend.advance(now)
                if backend.force_lifecycle(resource_id, lifecycle, message, now):
                    return {"ResourceId": resource_id, "Lifecycle": lifecycle}
    raise LookupError(f"no FSx file system, association or task with id {resource_id!r}")


def install() -> None:
    """Routes moto's FSx endpoint to :class:`LustreResponse`; call before serving."""
    moto.fsx.urls.url_paths["{0}/$"] = LustreResponse.dispatch
