"""Tests of the local AWS emulator: a real ./serve process driven with boto3 and plain HTTP."""

from __future__ import annotations

import concurrent.futures
import datetime
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from harness import (
    ACCOUNT,
    ALL_EC2_EVENTS,
    DELAY,
    HERE,
    INTERRUPTION_RULES,
    NO_RETRIES,
    REGION,
    TEST_CONFIG,
    client,
    control,
    drain_events,
    error_code,
    event_queue,
    instance_states,
    wait_for,
)

# Fixtures (endpoint, clean_state, ec2) are in conftest.py.


@pytest.fixture
def fsx(endpoint: str) -> Any:
    return client(endpoint, "fsx")


@pytest.fixture
def network(ec2: Any) -> dict[str, Any]:
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = {
        zone: ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=zone)["Subnet"]["SubnetId"]
        for i, zone in enumerate(("us-east-1a", "us-east-1b", "us-east-1c"))
    }
    group = ec2.create_security_group(GroupName="fsx", Description="lustre", VpcId=vpc)["GroupId"]
    return {"vpc": vpc, "subnets": subnets, "subnet": subnets["us-east-1a"], "sg": group}


def create_persistent2(fsx: Any, network: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return fsx.create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        SubnetIds=[network["subnet"]],
        SecurityGroupIds=[network["sg"]],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125},
        **extra,
    )["FileSystem"]


def wait_lifecycle(fsx: Any, fs_id: str, lifecycle: str) -> dict[str, Any]:
    return wait_for(
        lambda: fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"][0],
        lambda fs: fs["Lifecycle"] == lifecycle,
    )


# --- the serve script ------------------------------------------------------------------------------


def test_serve_without_venv_explains_and_exits_2(tmp_path: Path) -> None:
    shutil.copy(HERE / "serve", tmp_path / "serve")
    result = subprocess.run(
        [str(tmp_path / "serve"), "--port", "0"], capture_output=True, text=True, timeout=10, check=False
    )
    assert result.returncode == 2
    assert "emulator venv missing: run 'make emulator-venv'" in result.stderr


def test_health(endpoint: str) -> None:
    health = control(endpoint, "GET", "/health")
    assert health["status"] == "ok" and health["moto_version"] == "5.2.5"


# --- FSx file systems ------------------------------------------------------------------------------


def test_create_file_system_full_shape_and_lifecycle(fsx: Any, ec2: Any, network: dict[str, Any]) -> None:
    fs = fsx.create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=2400,
        SubnetIds=[network["subnet"]],
        SecurityGroupIds=[network["sg"]],
        Tags=[{"Key": "Name", "Value": "scratch"}],
        LustreConfiguration={
            "DeploymentType": "PERSISTENT_2",
            "PerUnitStorageThroughput": 250,
            "MetadataConfiguration": {"Mode": "AUTOMATIC"},
            "DataCompressionType": "LZ4",
            "LogConfiguration": {"Level": "WARN_ERROR"},
            "RootSquashConfiguration": {"RootSquash": "65534:65534", "NoSquashNids": ["10.0.0.1@tcp"]},
            "AutomaticBackupRetentionDays": 3,
            "EfaEnabled": True,
        },
    )["FileSystem"]
    fs_id = fs["FileSystemId"]
    assert re.fullmatch(r"fs-[0-9a-f]{17}", fs_id)
    assert fs["Lifecycle"] == "CREATING"
    assert fs["OwnerId"] == ACCOUNT
    assert fs["VpcId"] == network["vpc"] and fs["SubnetIds"] == [network["subnet"]]
    assert fs["DNSName"] == f"{fs_id}.fsx.{REGION}.amazonaws.com"
    assert fs["ResourceARN"] == f"arn:aws:fsx:{REGION}:{ACCOUNT}:file-system/{fs_id}"
    assert fs["KmsKeyId"].startswith(f"arn:aws:kms:{REGION}:{ACCOUNT}:key/")
    assert fs["FileSystemTypeVersion"] == "2.15"
    assert fs["Tags"] == [{"Key": "Name", "Value": "scratch"}]
    lustre = fs["LustreConfiguration"]
    assert re.fullmatch(r"[a-z0-9]{8}", lustre["MountName"])
    assert lustre["MetadataConfiguration"] == {"Mode": "AUTOMATIC", "Iops": 3000}
    assert lustre["LogConfiguration"] == {
        "Level": "WARN_ERROR",
        "Destination": f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/fsx/lustre",
    }
    assert lustre["RootSquashConfiguration"]["RootSquash"] == "65534:65534"
    assert lustre["DailyAutomaticBackupStartTime"] == "05:00" and lustre["AutomaticBackupRetentionDays"] == 3
    assert lustre["DataCompressionType"] == "LZ4" and lustre["EfaEnabled"] is True
    assert "DataRepositoryConfiguration" not in lustre

    enis = ec2.describe_network_interfaces(NetworkInterfaceIds=fs["NetworkInterfaceIds"])["NetworkInterfaces"]
    assert len(enis) == 2 and all(eni["Groups"][0]["GroupId"] == network["sg"] for eni in enis)

    available = wait_lifecycle(fsx, fs_id, "AVAILABLE")
    assert available["StorageCapacity"] == 2400


def test_scratch_defaults_and_data_repository_configuration(fsx: Any, network: dict[str, Any]) -> None:
    fs = fsx.create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        SubnetIds=[network["subnet"]],
        LustreConfiguration={"ImportPath": "s3://bucket/prefix"},
    )["FileSystem"]
    lustre = fs["LustreConfiguration"]
    assert lustre["DeploymentType"] == "SCRATCH_1" and lustre["MountName"] == "fsx"
    assert "KmsKeyId" not in fs and fs["FileSystemTypeVersion"] == "2.10" and fs["StorageType"] == "SSD"
    assert lustre["AutomaticBackupRetentionDays"] == 0 and lustre["WeeklyMaintenanceStartTime"] == "1:05:00"
    repository = lustre["DataRepositoryConfiguration"]
    assert repository["Lifecycle"] == "CREATING"
    assert re.fullmatch(r"s3://bucket/prefix/FSxLustre\d{8}T\d{6}Z", repository["ExportPath"])
    assert repository["ImportedFileChunkSize"] == 1024 and repository["AutoImportPolicy"] == "NONE"
    assert (
        wait_lifecycle(fsx, fs["FileSystemId"], "AVAILABLE")["LustreConfiguration"]["DataRepositoryConfiguration"][
            "Lifecycle"
        ]
        == "AVAILABLE"
    )


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"SubnetIds": ["subnet-00000000000000000"]}, "InvalidNetworkSettings"),
        ({"StorageCapacity": 1000}, "BadRequest"),
        (
            {"LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 50}},
            "InvalidPerUnitStorageThroughput",
        ),
        ({"LustreConfiguration": {"DeploymentType": "PERSISTENT_2"}}, "BadRequest"),
        ({"KmsKeyId": "arn:aws:kms:us-east-1:123456789012:key/x"}, "BadRequest"),
        ({"LustreConfiguration": {"ImportPath": "http://not-s3"}}, "InvalidImportPath"),
        ({"LustreConfiguration": {"ImportPath": "s3://a", "ExportPath": "s3://b/x"}}, "InvalidExportPath"),
        (
            {
                "FileSystemTypeVersion": "2.10",
                "LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125},
            },
            "BadRequest",
        ),
    ],
)
def test_create_file_system_validation(fsx: Any, network: dict[str, Any], change: dict[str, Any], code: str) -> None:
    request = {"FileSystemType": "LUSTRE", "StorageCapacity": 1200, "SubnetIds": [network["subnet"]], **change}
    with pytest.raises(ClientError) as excinfo:
        fsx.create_file_system(**request)
    assert error_code(excinfo) == code
    assert excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert fsx.describe_file_systems()["FileSystems"] == []


def test_security_group_from_another_vpc_is_invalid_network_settings(
    fsx: Any, ec2: Any, network: dict[str, Any]
) -> None:
    other_vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    foreign = ec2.create_security_group(GroupName="other", Description="x", VpcId=other_vpc)["GroupId"]
    with pytest.raises(ClientError) as excinfo:
        fsx.create_file_system(
            FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[network["subnet"]], SecurityGroupIds=[foreign]
        )
    assert error_code(excinfo) == "InvalidNetworkSettings"
    assert excinfo.value.response["InvalidSecurityGroupId"] == foreign


def test_client_request_token_idempotency(fsx: Any, network: dict[str, Any]) -> None:
    first = create_persistent2(fsx, network, ClientRequestToken="token-1")
    again = create_persistent2(fsx, network, ClientRequestToken="token-1")
    assert again["FileSystemId"] == first["FileSystemId"]
    assert len(fsx.describe_file_systems()["FileSystems"]) == 1
    with pytest.raises(ClientError) as excinfo:
        fsx.create_file_system(
            FileSystemType="LUSTRE", StorageCapacity=2400, SubnetIds=[network["subnet"]], ClientRequestToken="token-1"
        )
    assert error_code(excinfo) == "IncompatibleParameterError"
    assert excinfo.value.response["Parameter"] == "ClientRequestToken"


def test_describe_not_found_and_pagination(fsx: Any, network: dict[str, Any]) -> None:
    with pytest.raises(fsx.exceptions.FileSystemNotFound):
        fsx.describe_file_systems(FileSystemIds=["fs-0123456789abcdef0"])
    created = [create_persistent2(fsx, network)["FileSystemId"] for _ in range(3)]
    first = fsx.describe_file_systems(MaxResults=2)
    second = fsx.describe_file_systems(MaxResults=2, NextToken=first["NextToken"])
    assert "NextToken" not in second
    assert [fs["FileSystemId"] for fs in first["FileSystems"] + second["FileSystems"]] == created
    with pytest.raises(ClientError) as excinfo:
        fsx.describe_file_systems(NextToken="not-a-token")
    assert error_code(excinfo) == "BadRequest"


def test_update_storage_goes_through_updating(endpoint: str, fsx: Any, network: dict[str, Any]) -> None:
    fs_id = create_persistent2(fsx, network)["FileSystemId"]
    wait_lifecycle(fsx, fs_id, "AVAILABLE")
    control(endpoint, "POST", "/config", {"fsx_update_delay_s": 1.0})  # room for the second call below
    updated = fsx.update_file_system(
        FileSystemId=fs_id, StorageCapacity=2400, LustreConfiguration={"PerUnitStorageThroughput": 250}
    )["FileSystem"]
    assert updated["Lifecycle"] == "UPDATING" and updated["StorageCapacity"] == 1200
    action = updated["AdministrativeActions"][0]
    assert action["AdministrativeActionType"] == "FILE_SYSTEM_UPDATE" and action["Status"] == "IN_PROGRESS"
    assert action["TargetFileSystemValues"]["StorageCapacity"] == 2400
    assert action["TargetFileSystemValues"]["LustreConfiguration"]["PerUnitStorageThroughput"] == 250
    with pytest.raises(ClientError) as excinfo:
        fsx.update_file_system(FileSystemId=fs_id, StorageCapacity=4800)
    assert error_code(excinfo) == "BadRequest"

    done = wait_lifecycle(fsx, fs_id, "AVAILABLE")
    assert done["StorageCapacity"] == 2400 and done["LustreConfiguration"]["PerUnitStorageThroughput"] == 250
    assert done["AdministrativeActions"][0]["Status"] == "COMPLETED"


def test_update_rejects_shrink_and_applies_settings_at_once(fsx: Any, network: dict[str, Any]) -> None:
    fs_id = create_persistent2(fsx, network)["FileSystemId"]
    wait_lifecycle(fsx, fs_id, "AVAILABLE")
    with pytest.raises(ClientError) as excinfo:
        fsx.update_file_system(FileSystemId=fs_id, StorageCapacity=600)
    assert error_code(excinfo) == "BadRequest"
    updated = fsx.update_file_system(
        FileSystemId=fs_id,
        ClientRequestToken="update-1",
        LustreConfiguration={"WeeklyMaintenanceStartTime": "3:02:30", "DataCompressionType": "LZ4"},
    )["FileSystem"]
    assert updated["Lifecycle"] == "AVAILABLE"
    assert updated["LustreConfiguration"]["WeeklyMaintenanceStartTime"] == "3:02:30"
    assert updated["AdministrativeActions"][-1]["Status"] == "COMPLETED"
    with pytest.raises(ClientError) as excinfo:
        fsx.update_file_system(FileSystemId=fs_id, ClientRequestToken="update-1", StorageCapacity=2400)
    assert error_code(excinfo) == "IncompatibleParameterError"


def test_delete_with_final_backup(endpoint: str, fsx: Any, ec2: Any, network: dict[str, Any]) -> None:
    fs = create_persistent2(fsx, network)
    fs_id = fs["FileSystemId"]
    wait_lifecycle(fsx, fs_id, "AVAILABLE")
    control(endpoint, "POST", "/config", {"fsx_delete_delay_s": 1.0})  # room to see DELETING
    response = fsx.delete_file_system(
        FileSystemId=fs_id,
        LustreConfiguration={"SkipFinalBackup": False, "FinalBackupTags": [{"Key": "final", "Value": "yes"}]},
    )
    assert response["Lifecycle"] == "DELETING"
    backup_id = response["LustreResponse"]["FinalBackupId"]
    assert response["LustreResponse"]["FinalBackupTags"] == [{"Key": "final", "Value": "yes"}]
    assert fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"][0]["Lifecycle"] == "DELETING"

    backup = fsx.describe_backups(BackupIds=[backup_id])["Backups"][0]
    assert backup["Tags"] == [{"Key": "final", "Value": "yes"}]
    assert backup["FileSystem"]["FileSystemId"] == fs_id and backup["Type"] == "USER_INITIATED"

    wait_for(lambda: fsx.describe_file_systems()["FileSystems"], lambda systems: systems == [])
    with pytest.raises(fsx.exceptions.FileSystemNotFound):
        fsx.describe_file_systems(FileSystemIds=[fs_id])
    with pytest.raises(fsx.exceptions.FileSystemNotFound):
        fsx.delete_file_system(FileSystemId=fs_id)
    remaining = ec2.describe_network_interfaces(Filters=[{"Name": "vpc-id", "Values": [network["vpc"]]}])
    assert not {eni["NetworkInterfaceId"] for eni in remaining["NetworkInterfaces"]} & set(fs["NetworkInterfaceIds"])
    assert (
        fsx.describe_backups(Filters=[{"Name": "file-system-id", "Values": [fs_id]}])["Backups"][0]["BackupId"]
        == backup_id
    )


def test_tags_on_file_systems(fsx: Any, network: dict[str, Any]) -> None:
    arn = create_persistent2(fsx, network, Tags=[{"Key": "a", "Value": "1"}])["ResourceARN"]
    fsx.tag_resource(ResourceARN=arn, Tags=[{"Key": "b", "Value": "2"}])
    fsx.untag_resource(ResourceARN=arn, TagKeys=["a"])
    assert fsx.list_tags_for_resource(ResourceARN=arn)["Tags"] == [{"Key": "b", "Value": "2"}]
    with pytest.raises(ClientError) as excinfo:
        fsx.list_tags_for_resource(ResourceARN=arn.replace("fs-", "fs-0"))
    assert error_code(excinfo) == "ResourceNotFound"


def test_unimplemented_fsx_action_fails_fast(fsx: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        fsx.describe_storage_virtual_machines()
    assert error_code(excinfo) == "UnsupportedOperation"


# --- data repository associations and tasks ----------------------------------------------------------


def test_data_repository_association_lifecycle(fsx: Any, network: dict[str, Any]) -> None:
    fs_id = create_persistent2(fsx, network)["FileSystemId"]
    wait_lifecycle(fsx, fs_id, "AVAILABLE")
    dra = fsx.create_data_repository_association(
        FileSystemId=fs_id,
        FileSystemPath="/data",
        DataRepositoryPath="s3://no-such-bucket/data",
        BatchImportMetaDataOnCreate=True,
        S3={"AutoImportPolicy": {"Events": ["NEW", "CHANGED"]}, "AutoExportPolicy": {"Events": ["NEW"]}},
        Tags=[{"Key": "k", "Value": "v"}],
    )["Association"]
    dra_id = dra["AssociationId"]
    assert re.fullmatch(r"dra-[0-9a-f]{17}", dra_id) and dra["Lifecycle"] == "CREATING"
    assert dra["ImportedFileChunkSize"] == 1024 and dra["S3"]["AutoImportPolicy"]["Events"] == ["NEW", "CHANGED"]
    assert dra["ResourceARN"].startswith(f"arn:aws:fsx:{REGION}:{ACCOUNT}:association/{fs_id}/")
    with pytest.raises(ClientError) as excinfo:
        fsx.create_data_repository_association(
            FileSystemId=fs_id, FileSystemPath="/data/sub", DataRepositoryPath="s3://other"
        )
    assert error_code(excinfo) == "BadRequest"

    describe = lambda: fsx.describe_data_repository_associations(  # noqa: E731
        Filters=[{"Name": "file-system-id", "Values": [fs_id]}]
    )["Associations"]
    assert wait_for(describe, lambda found: found[0]["Lifecycle"] == "AVAILABLE")[0]["AssociationId"] == dra_id
    fsx.tag_resource(ResourceARN=dra["ResourceARN"], Tags=[{"Key": "extra", "Value": "1"}])
    assert len(fsx.list_tags_for_resource(ResourceARN=dra["ResourceARN"])["Tags"]) == 2

    updated = fsx.update_data_repository_association(AssociationId=dra_id, ImportedFileChunkSize=2048)["Association"]
    assert updated["Lifecycle"] == "UPDATING" and updated["ImportedFileChunkSize"] == 2048
    wait_for(describe, lambda found: found[0]["Lifecycle"] == "AVAILABLE")

    deleted = fsx.delete_data_repository_association(AssociationId=dra_id, DeleteDataInFileSystem=False)
    assert deleted["Lifecycle"] == "DELETING"
    wait_for(describe, lambda found: found == [])
    with pytest.raises(ClientError) as excinfo:
        fsx.describe_data_repository_associations(AssociationIds=[dra_id])
    assert error_code(excinfo) == "DataRepositoryAssociationNotFound"


def test_data_repository_association_needs_a_capable_file_system(fsx: Any, network: dict[str, Any]) -> None:
    fs_id = fsx.create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[network["subnet"]])[
        "FileSystem"
    ]["FileSystemId"]
    wait_lifecycle(fsx, fs_id, "AVAILABLE")
    with pytest.raises(ClientError) as excinfo:
        fsx.create_data_repository_association(FileSystemId=fs_id, FileSystemPath="/d", DataRepositoryPath="s3://b")
    assert error_code(excinfo) == "BadRequest"
    assert "SCRATCH_1" in excinfo.value.response["Error"]["Message"]


def test_data_repository_tasks(endpoint: str, fsx: Any, network: dict[str, Any]) -> None:
    fs_id = create_persistent2(fsx, network)["FileSystemId"]
    wait_lifecycle(fsx, fs_id, "AVAILABLE")
    report = {"Enabled": False}
    with pytest.raises(ClientError) as excinfo:
        fsx.create_data_repository_task(FileSystemId=fs_id, Type="EXPORT_TO_REPOSITORY", Report=report)
    assert error_code(excinfo) == "BadRequest"  # not linked to S3 yet

    fsx.create_data_repository_association(FileSystemId=fs_id, FileSystemPath="/ns", DataRepositoryPath="s3://b/ns")
    wait_for(
        lambda: fsx.describe_data_repository_associations()["Associations"][0]["Lifecycle"],
        lambda lc: lc == "AVAILABLE",
    )
    control(endpoint, "POST", "/config", {"fsx_create_delay_s": 1.0})  # PENDING 0.5 s, then EXECUTING 0.5 s
    task = fsx.create_data_repository_task(
        FileSystemId=fs_id,
        Type="RELEASE_DATA_FROM_FILESYSTEM",
        Paths=["ns/old"],
        ReleaseConfiguration={"DurationSinceLastAccess": {"Unit": "DAYS", "Value": 7}},
        Report={
            "Enabled": True,
            "Path": "s3://b/reports",
            "Scope": "FAILED_FILES_ONLY",
            "Format": "REPORT_CSV_20191124",
        },
    )["DataRepositoryTask"]
    task_id = task["TaskId"]
    assert re.fullmatch(r"task-[0-9a-f]{17}", task_id) and task["Lifecycle"] == "PENDING"
    assert task["ReleaseConfiguration"]["DurationSinceLastAccess"] == {"Unit": "DAYS", "Value": 7}
    with pytest.raises(ClientError) as excinfo:
        fsx.create_data_repository_task(FileSystemId=fs_id, Type="EXPORT_TO_REPOSITORY", Report=report)
    assert error_code(excinfo) == "DataRepositoryTaskExecuting"

    describe = lambda: fsx.describe_data_repository_tasks(TaskIds=[task_id])["DataRepositoryTasks"][0]  # noqa: E731
    seen = set()
    done = wait_for(describe, lambda t: seen.add(t["Lifecycle"]) or t["Lifecycle"] == "SUCCEEDED")
    assert "EXECUTING" in seen
    assert done["Status"]["SucceededCount"] == done["Status"]["TotalCount"] == 1 and "EndTime" in done
    listed = fsx.describe_data_repository_tasks(Filters=[{"Name": "task-lifecycle", "Values": ["SUCCEEDED"]}])
    assert [t["TaskId"] for t in listed["DataRepositoryTasks"]] == [task_id]
    with pytest.raises(ClientError) as excinfo:
        fsx.describe_data_repository_tasks(TaskIds=["task-00000000000000000"])
    assert error_code(excinfo) == "DataRepositoryTaskNotFound"


def test_forced_lifecycle(endpoint: str, fsx: Any, network: dict[str, Any]) -> None:
    fs_id = create_persistent2(fsx, network)["FileSystemId"]
    body = {"Lifecycle": "FAILED", "FailureDetails": {"Message": "capacity"}}
    assert control(endpoint, "POST", f"/fsx/{fs_id}/lifecycle", body) == {"ResourceId": fs_id, "Lifecycle": "FAILED"}
    time.sleep(DELAY)
    fs = fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"][0]
    assert fs["Lifecycle"] == "FAILED" and fs["FailureDetails"]["Message"] == "capacity"
    control(endpoint, "POST", "/fsx/fs-00000000000000000/lifecycle", body, expect=404)
    control(endpoint, "POST", f"/fsx/{fs_id}/lifecycle", {"Lifecycle": "BROKEN"}, expect=400)


def test_assumed_role_sees_its_own_account(endpoint: str, fsx: Any, network: dict[str, Any]) -> None:
    create_persistent2(fsx, network)
    sts = client(endpoint, "sts")
    credentials = sts.assume_role(RoleArn="arn:aws:iam::222233334444:role/deployer", RoleSessionName="test")[
        "Credentials"
    ]
    other = {
        "aws_access_key_id": credentials["AccessKeyId"],
        "aws_secret_access_key": credentials["SecretAccessKey"],
        "aws_session_token": credentials["SessionToken"],
    }
    assert client(endpoint, "sts", **other).get_caller_identity()["Account"] == "222233334444"
    other_fsx = client(endpoint, "fsx", **other)
    assert other_fsx.describe_file_systems()["FileSystems"] == []
    subnet = client(endpoint, "ec2", **other).describe_subnets()["Subnets"][0]["SubnetId"]
    created = other_fsx.create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet])[
        "FileSystem"
    ]
    assert created["OwnerId"] == "222233334444" and ":222233334444:" in created["ResourceARN"]
    assert len(fsx.describe_file_systems()["FileSystems"]) == 1


# --- faults, counters, control API ---------------------------------------------------------------------


def test_fault_by_count_then_success(endpoint: str) -> None:
    fsx = client(endpoint, "fsx", NO_RETRIES)
    rule = {
        "service": "fsx",
        "action": "DescribeFileSystems",
        "code": "ThrottlingException",
        "message": "Rate exceeded",
        "count": 2,
    }
    assert control(endpoint, "POST", "/faults", rule) == {"ids": ["fault-1"]}
    for _ in range(2):
        with pytest.raises(ClientError) as excinfo:
            fsx.describe_file_systems()
        assert error_code(excinfo) == "ThrottlingException"
        response = excinfo.value.response
        assert response["Error"]["Message"] == "Rate exceeded"
        assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert response["ResponseMetadata"]["HTTPHeaders"]["x-amzn-errortype"] == "ThrottlingException"
    assert fsx.describe_file_systems()["FileSystems"] == []
    assert control(endpoint, "GET", "/calls")["calls"] == {"fsx:DescribeFileSystems": 3}
    (described,) = control(endpoint, "GET", "/faults")["faults"]
    assert described["fired"] == 2 and described["remaining"] == 0


def test_sdk_retries_through_throttling(endpoint: str) -> None:
    fsx = client(endpoint, "fsx", Config(retries={"mode": "standard", "total_max_attempts": 3}))
    control(endpoint, "POST", "/faults", {"service": "fsx", "code": "ThrottlingException", "count": 2})
    assert fsx.describe_file_systems()["FileSystems"] == []
    assert control(endpoint, "GET", "/calls")["calls"] == {"fsx:DescribeFileSystems": 3}


def test_fault_by_ratio_is_seeded(endpoint: str) -> None:
    ec2 = client(endpoint, "ec2", NO_RETRIES)

    def pattern() -> list[bool]:
        outcomes = []
        for _ in range(30):
            try:
                ec2.describe_availability_zones()
                outcomes.append(True)
            except ClientError as err:
                assert err.response["Error"]["Code"] == "RequestLimitExceeded"
                outcomes.append(False)
        return outcomes

    rule = {"service": "ec2", "action": "DescribeAvailabilityZones", "code": "RequestLimitExceeded", "ratio": 0.5}
    control(endpoint, "POST", "/faults", rule)
    first = pattern()
    assert 5 < first.count(False) < 25
    control(endpoint, "POST", "/config", {"seed": TEST_CONFIG["seed"]})
    assert pattern() == first


def test_latency_without_error(endpoint: str, ec2: Any) -> None:
    control(endpoint, "POST", "/faults", [{"service": "ec2", "action": "DescribeVpcs", "latency_ms": 800}])
    started = time.monotonic()
    ec2.describe_vpcs()
    assert time.monotonic() - started >= 0.8
    started = time.monotonic()
    ec2.describe_subnets()
    assert time.monotonic() - started < 0.8


def _raw_call(endpoint: str, service: str, body: str) -> tuple[int, str]:
    """A query-protocol call with an unsigned (but well-formed) SigV4 header; moto does not check signatures."""
    scope = f"AKIAIOSFODNN7EXAMPLE/20260101/{REGION}/{service}/aws4_request"
    request = urllib.request.Request(
        endpoint + "/",
        data=body.encode(),
        method="POST",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Authorization": f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders=host, Signature=0",
        },
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_query_error_shapes(endpoint: str) -> None:
    control(
        endpoint,
        "POST",
        "/faults",
        [
            {"service": "ec2", "action": "DescribeVpcs", "code": "RequestLimitExceeded"},
            {"service": "sts", "action": "GetCallerIdentity", "code": "Throttling", "message": "slow down"},
        ],
    )
    status, body = _raw_call(endpoint, "ec2", "Action=DescribeVpcs&Version=2016-11-15")
    assert status == 400
    assert re.search(
        r"<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>.+</Message></Error></Errors><RequestID>",
        body,
    )
    status, body = _raw_call(endpoint, "sts", "Action=GetCallerIdentity&Version=2011-06-15")
    assert status == 400
    assert "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>slow down</Message>" in body
    with pytest.raises(ClientError) as excinfo:
        client(endpoint, "sts", NO_RETRIES).get_caller_identity()
    assert error_code(excinfo) == "Throttling"


def test_counts_rest_and_query_calls_and_resets(endpoint: str, ec2: Any) -> None:
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="AKIAIOSFODNN7EXAMPLE",
        aws_secret_access_key="secret",
        config=Config(s3={"addressing_style": "path"}),
    )
    s3.create_bucket(Bucket="counted")
    s3.put_object(Bucket="counted", Key="a/b.txt", Body=b"x")
    ec2.describe_vpcs()
    calls = control(endpoint, "GET", "/calls")["calls"]
    assert calls == {"s3:CreateBucket": 1, "s3:PutObject": 1, "ec2:DescribeVpcs": 1}
    assert control(endpoint, "POST", "/calls/reset") == {"calls": {}}
    assert control(endpoint, "GET", "/calls") == {"calls": {}, "seconds": {}, "peak_in_flight": {}, "busy_s": 0.0}


def test_reset_clears_state_faults_and_counters(endpoint: str, fsx: Any, network: dict[str, Any]) -> None:
    create_persistent2(fsx, network)
    control(endpoint, "POST", "/faults", {"service": "sts", "code": "Throttling"})
    control(endpoint, "POST", "/reset")
    assert control(endpoint, "GET", "/faults") == {"faults": []}
    assert control(endpoint, "GET", "/calls") == {"calls": {}, "seconds": {}, "peak_in_flight": {}, "busy_s": 0.0}
    assert fsx.describe_file_systems()["FileSystems"] == []

    create_persistent2(fsx, _default_network(endpoint))  # the VPC of `network` went with the reset
    request = urllib.request.Request(f"{endpoint}/moto-api/reset", data=b"", method="POST")
    with urllib.request.urlopen(request) as response:
        assert response.status == 200
    assert fsx.describe_file_systems()["FileSystems"] == []


def _default_network(endpoint: str) -> dict[str, Any]:
    ec2 = client(endpoint, "ec2")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    subnet = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"][0]["SubnetId"]
    group = ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["SecurityGroups"][0]["GroupId"]
    return {"subnet": subnet, "sg": group}


def test_control_api_validation(endpoint: str) -> None:
    assert (
        "count"
        in control(endpoint, "POST", "/faults", {"service": "fsx", "code": "X", "count": 1, "ratio": 0.5}, expect=400)[
            "error"
        ]
    )
    assert "unknown" in control(endpoint, "POST", "/faults", {"service": "fsx", "cod": "X"}, expect=400)["error"]
    control(
        endpoint,
        "POST",
        "/faults",
        {"service": "fsx", "action": "DescribeFileSystems", "code": "X", "match": {"InstanceType": "a"}},
        expect=400,
    )
    assert control(endpoint, "GET", "/faults") == {"faults": []}
    assert control(endpoint, "POST", "/config", {"fsx_create_delay_s": 2.5})["fsx_create_delay_s"] == 2.5
    control(endpoint, "POST", "/config", {"fsx_create_delay": 1}, expect=400)
    ids = control(
        endpoint, "POST", "/faults", [{"service": "ec2", "latency_ms": 1}, {"service": "sts", "latency_ms": 1}]
    )["ids"]
    control(endpoint, "DELETE", f"/faults/{ids[0]}")
    assert [rule["id"] for rule in control(endpoint, "GET", "/faults")["faults"]] == [ids[1]]
    assert control(endpoint, "DELETE", "/faults") == {"deleted": 1}
    control(endpoint, "GET", "/nothing", expect=404)


# --- EC2 ---------------------------------------------------------------------------------------------


def test_placement_groups(ec2: Any) -> None:
    created = ec2.create_placement_group(
        GroupName="hpc-cluster",
        Strategy="cluster",
        TagSpecifications=[{"ResourceType": "placement-group", "Tags": [{"Key": "team", "Value": "hpc"}]}],
    )["PlacementGroup"]
    assert re.fullmatch(r"pg-[0-9a-f]{17}", created["GroupId"]) and created["State"] == "available"
    ec2.create_placement_group(GroupName="hpc-partition", Strategy="partition", PartitionCount=3)
    ec2.create_placement_group(GroupName="hpc-spread", Strategy="spread")
    with pytest.raises(ClientError) as excinfo:
        ec2.create_placement_group(GroupName="hpc-cluster", Strategy="cluster")
    assert error_code(excinfo) == "InvalidPlacementGroup.Duplicate"

    (cluster,) = ec2.describe_placement_groups(GroupNames=["hpc-cluster"])["PlacementGroups"]
    assert cluster["Strategy"] == "cluster" and cluster["Tags"] == [{"Key": "team", "Value": "hpc"}]
    assert cluster["GroupArn"] == f"arn:aws:ec2:{REGION}:{ACCOUNT}:placement-group/hpc-cluster"
    partition = ec2.describe_placement_groups(Filters=[{"Name": "strategy", "Values": ["partition"]}])[
        "PlacementGroups"
    ]
    assert [(g["GroupName"], g["PartitionCount"]) for g in partition] == [("hpc-partition", 3)]
    assert len(ec2.describe_placement_groups()["PlacementGroups"]) == 3

    ec2.delete_placement_group(GroupName="hpc-spread")
    with pytest.raises(ClientError) as excinfo:
        ec2.describe_placement_groups(GroupNames=["hpc-spread"])
    assert error_code(excinfo) == "InvalidPlacementGroup.Unknown"


@pytest.fixture
def efa_template(endpoint: str, ec2: Any, network: dict[str, Any]) -> str:
    client(endpoint, "iam").create_instance_profile(InstanceProfileName="compute-node")
    ec2.create_placement_group(GroupName="gpu-pg", Strategy="cluster")
    ec2.create_launch_template(
        LaunchTemplateName="gpu-nodes",
        LaunchTemplateData={
            "ImageId": "ami-12345678",
            "InstanceType": "p5.48xlarge",
            "IamInstanceProfile": {"Name": "compute-node"},
            "Placement": {"GroupName": "gpu-pg"},
            "NetworkInterfaces": [
                {"DeviceIndex": 0, "InterfaceType": "efa", "Groups": [network["sg"]]},
                {"DeviceIndex": 1, "NetworkCardIndex": 1, "InterfaceType": "efa-only", "Groups": [network["sg"]]},
            ],
        },
    )
    return "gpu-nodes"


def _overrides(network: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"InstanceType": "p5.48xlarge", "SubnetId": network["subnets"][zone], "Priority": float(priority)}
        for priority, zone in enumerate(("us-east-1a", "us-east-1b", "us-east-1c"))
    ]


def test_instant_fleet_fails_over_between_zones(
    endpoint: str, ec2: Any, network: dict[str, Any], efa_template: str
) -> None:
    control(
        endpoint,
        "POST",
        "/faults",
        {
            "service": "ec2",
            "action": "CreateFleet",
            "code": "InsufficientInstanceCapacity",
            "match": {"AvailabilityZone": "us-east-1a", "InstanceType": "p5.48xlarge"},
        },
    )
    fleet = ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 2, "DefaultTargetCapacityType": "on-demand"},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": efa_template, "Version": "$Latest"},
                "Overrides": _overrides(network),
            }
        ],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "slurm-node", "Value": "gpu-1"}]}],
    )
    (error,) = fleet["Errors"]
    assert error["ErrorCode"] == "InsufficientInstanceCapacity" and error["Lifecycle"] == "on-demand"
    assert error["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"] == network["subnets"]["us-east-1a"]
    (launched,) = fleet["Instances"]
    assert launched["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"] == network["subnets"]["us-east-1b"]
    assert len(launched["InstanceIds"]) == 2 and launched["InstanceType"] == "p5.48xlarge"

    reservations = ec2.describe_instances(InstanceIds=launched["InstanceIds"])["Reservations"]
    for instance in (i for r in reservations for i in r["Instances"]):
        assert instance["Placement"]["AvailabilityZone"] == "us-east-1b"
        assert instance["Placement"]["GroupName"] == "gpu-pg"
        assert sorted(nic["InterfaceType"] for nic in instance["NetworkInterfaces"]) == ["efa", "efa-only"]
        assert instance["IamInstanceProfile"]["Arn"].endswith("instance-profile/compute-node")
        assert {"Key": "slurm-node", "Value": "gpu-1"} in instance["Tags"]
    assert ec2.describe_fleets(FleetIds=[fleet["FleetId"]])["Fleets"][0]["Type"] == "instant"
    with pytest.raises(ClientError) as excinfo:
        ec2.delete_placement_group(GroupName="gpu-pg")
    assert error_code(excinfo) == "InvalidPlacementGroup.InUse"


def test_a_launch_whose_answer_is_lost_is_retried_with_its_client_token_and_launches_once(
    endpoint: str, ec2: Any, network: dict[str, Any], efa_template: str
) -> None:
    # The first answer of each launch is lost after the work is done; boto3 retries the 500
    # with the same (generated) ClientToken, as EC2's idempotency expects of a client.
    for action in ("CreateFleet", "RunInstances"):
        control(endpoint, "POST", "/faults",
                {"service": "ec2", "action": action, "code": "InternalError", "count": 1, "lost_answer": True})
    fleet = ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 2, "DefaultTargetCapacityType": "on-demand"},
        LaunchTemplateConfigs=[
            {"LaunchTemplateSpecification": {"LaunchTemplateName": efa_template}, "Overrides": _overrides(network)}
        ],
    )
    (launched,) = fleet["Instances"]
    ran = ec2.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1, SubnetId=network["subnets"]["us-east-1a"])
    assert control(endpoint, "GET", "/calls")["calls"]["ec2:CreateFleet"] == 2
    assert control(endpoint, "GET", "/calls")["calls"]["ec2:RunInstances"] == 2
    running = sorted(i["InstanceId"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"])
    assert running == sorted([*launched["InstanceIds"], ran["Instances"][0]["InstanceId"]])

    # The same token with other parameters is refused; a token is at most 64 characters.
    ec2.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1, ClientToken="resume-1")
    with pytest.raises(ClientError) as excinfo:
        ec2.run_instances(ImageId="ami-12345678", MinCount=2, MaxCount=2, ClientToken="resume-1")
    assert error_code(excinfo) == "IdempotentParameterMismatch"
    with pytest.raises(ClientError) as excinfo:
        ec2.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1, ClientToken="x" * 65)
    assert error_code(excinfo) == "InvalidParameterValue"


def test_instant_fleet_with_no_capacity_anywhere(
    endpoint: str, ec2: Any, network: dict[str, Any], efa_template: str
) -> None:
    control(
        endpoint,
        "POST",
        "/faults",
        {
            "service": "ec2",
            "action": "CreateFleet",
            "code": "InsufficientInstanceCapacity",
            "match": {"InstanceType": "p5.48xlarge"},
        },
    )
    fleet = ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "spot"},
        LaunchTemplateConfigs=[
            {"LaunchTemplateSpecification": {"LaunchTemplateName": efa_template}, "Overrides": _overrides(network)}
        ],
    )
    assert fleet.get("Instances", []) == []
    assert [e["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"] for e in fleet["Errors"]] == [
        network["subnets"][zone] for zone in ("us-east-1a", "us-east-1b", "us-east-1c")
    ]
    assert {e["Lifecycle"] for e in fleet["Errors"]} == {"spot"}


def test_run_instances_capacity_fault(endpoint: str, network: dict[str, Any]) -> None:
    ec2 = client(endpoint, "ec2", NO_RETRIES)
    control(
        endpoint,
        "POST",
        "/faults",
        {
            "service": "ec2",
            "action": "RunInstances",
            "code": "InsufficientInstanceCapacity",
            "match": {"SubnetId": network["subnets"]["us-east-1a"]},
            "count": 1,
        },
    )
    with pytest.raises(ClientError) as excinfo:
        ec2.run_instances(
            ImageId="ami-12345678",
            InstanceType="hpc7a.96xlarge",
            MinCount=1,
            MaxCount=1,
            SubnetId=network["subnets"]["us-east-1a"],
        )
    assert error_code(excinfo) == "InsufficientInstanceCapacity"
    assert "us-east-1a" in excinfo.value.response["Error"]["Message"]
    other_zone = ec2.run_instances(
        ImageId="ami-12345678", MinCount=1, MaxCount=1, SubnetId=network["subnets"]["us-east-1b"]
    )
    assert other_zone["Instances"][0]["Placement"]["AvailabilityZone"] == "us-east-1b"


def test_capacity_reservations_and_blocks_describe_cancel_and_validate(ec2: Any) -> None:
    reservation = ec2.create_capacity_reservation(
        InstanceType="p5.48xlarge", InstancePlatform="Linux/UNIX", AvailabilityZone="us-east-1a", InstanceCount=2,
        InstanceMatchCriteria="targeted",
        TagSpecifications=[{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}],
    )["CapacityReservation"]
    assert reservation["State"] == "active" and reservation["AvailableInstanceCount"] == 2
    assert reservation["ReservationType"] == "default" and reservation["Tags"] == [{"Key": "team", "Value": "ml"}]
    with pytest.raises(ClientError) as err:
        ec2.create_capacity_reservation(
            InstanceType="p5.48xlarge", InstancePlatform="Linux/UNIX", AvailabilityZone="mars-1a", InstanceCount=1
        )
    assert err.value.response["Error"]["Code"] == "InvalidParameterValue"
    (offering,) = ec2.describe_capacity_block_offerings(
        InstanceType="p5.48xlarge", InstanceCount=4, CapacityDurationHours=24,
        StartDateRange=datetime.datetime(2099, 1, 1, tzinfo=datetime.timezone.utc),
    )["CapacityBlockOfferings"]
    assert offering["InstanceCount"] == 4 and offering["StartDate"].year == 2099
    block = ec2.purchase_capacity_block(
        CapacityBlockOfferingId=offering["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX"
    )["CapacityReservation"]
    assert block["ReservationType"] == "capacity-block" and block["State"] == "scheduled"
    assert block["AvailableInstanceCount"] == 0
    listed = ec2.describe_capacity_reservations(Filters=[{"Name": "reservation-type", "Values": ["capacity-block"]}])
    assert [r["CapacityReservationId"] for r in listed["CapacityReservations"]] == [block["CapacityReservationId"]]
    with pytest.raises(ClientError) as err:
        ec2.cancel_capacity_reservation(CapacityReservationId=block["CapacityReservationId"])
    assert err.value.response["Error"]["Code"] == "InvalidParameterValue"
    ec2.cancel_capacity_reservation(CapacityReservationId=reservation["CapacityReservationId"])
    (cancelled,) = ec2.describe_capacity_reservations(
        CapacityReservationIds=[reservation["CapacityReservationId"]]
    )["CapacityReservations"]
    assert cancelled["State"] == "cancelled"
    with pytest.raises(ClientError) as err:
        ec2.describe_capacity_reservations(CapacityReservationIds=["cr-0123456789abcdef0"])
    assert err.value.response["Error"]["Code"] == "InvalidCapacityReservationId.NotFound"


def test_spot_fleet_instances_are_spot(ec2: Any, network: dict[str, Any]) -> None:
    ec2.create_launch_template(
        LaunchTemplateName="spot-tpl", LaunchTemplateData={"ImageId": "ami-12345678", "InstanceType": "c7i.large"}
    )
    fleet = ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[{
            "LaunchTemplateSpecification": {"LaunchTemplateName": "spot-tpl", "Version": "$Default"},
            "Overrides": [{"SubnetId": network["subnets"]["us-east-1a"]}],
        }],
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "spot"},
    )
    (launched,) = fleet["Instances"]
    assert launched["Lifecycle"] == "spot"
    (instance,) = ec2.describe_instances(InstanceIds=launched["InstanceIds"])["Reservations"][0]["Instances"]
    assert instance["InstanceLifecycle"] == "spot"


def test_launches_past_ec2s_launch_rate_are_refused_until_the_bucket_refills(
    endpoint: str, ec2: Any, network: dict[str, Any]
) -> None:
    control(endpoint, "POST", "/config", {"launch_bucket_size": 2, "launch_refill_per_s": 0.5})
    try:
        subnet = network["subnets"]["us-east-1a"]
        ec2_once = client(endpoint, "ec2", NO_RETRIES)
        ec2_once.run_instances(ImageId="ami-12345678", MinCount=2, MaxCount=2, SubnetId=subnet)
        with pytest.raises(ClientError) as err:
            ec2_once.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1, SubnetId=subnet)
        assert error_code(err) == "RequestLimitExceeded"
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        time.sleep(2.1)
        ec2_once.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1, SubnetId=subnet)
    finally:
        control(endpoint, "POST", "/config", {"launch_bucket_size": 1000, "launch_refill_per_s": 2})
    assert "launch_bucket_size must be a non-negative number of instances" in control(
        endpoint, "POST", "/config", {"launch_bucket_size": -1}, expect=400
    )["error"]


def test_a_capacity_fault_rule_is_a_pool_of_that_many_instances(endpoint: str) -> None:
    bad = {"service": "ec2", "action": "RunInstances", "code": "InsufficientInstanceCapacity", "capacity": 2,
           "match": {"AvailabilityZone": "us-east-1a"}}
    assert "'capacity' needs action CreateFleet" in control(endpoint, "POST", "/faults", bad, expect=400)["error"]
    bad.update(action="CreateFleet", capacity=-1)
    assert "non-negative integer" in control(endpoint, "POST", "/faults", bad, expect=400)["error"]
    bad.update(capacity=2)
    control(endpoint, "POST", "/faults", bad)
    (described,) = control(endpoint, "GET", "/faults")["faults"]
    assert described["capacity"] == 2


def test_launch_template_version_from_source(ec2: Any) -> None:
    ec2.create_launch_template(
        LaunchTemplateName="base-tpl", LaunchTemplateData={"ImageId": "ami-12345678", "InstanceType": "c7i.large"}
    )
    ec2.create_launch_template_version(
        LaunchTemplateName="base-tpl", SourceVersion="1", LaunchTemplateData={"ImageId": "ami-87654321"}
    )
    latest = ec2.describe_launch_template_versions(LaunchTemplateName="base-tpl", Versions=["$Latest"])[
        "LaunchTemplateVersions"
    ][0]
    assert latest["LaunchTemplateData"] == {"ImageId": "ami-87654321", "InstanceType": "c7i.large"}


def test_deleting_a_missing_launch_template_is_not_found(ec2: Any) -> None:
    with pytest.raises(ClientError) as err:
        ec2.delete_launch_template(LaunchTemplateName="no-such-template")
    assert err.value.response["Error"]["Code"] == "InvalidLaunchTemplateName.NotFoundException"
    with pytest.raises(ClientError) as err:
        ec2.delete_launch_template(LaunchTemplateId="lt-0123456789abcdef0")
    assert err.value.response["Error"]["Code"] == "InvalidLaunchTemplateId.NotFound"


def test_calls_report_the_seconds_spent_answering_them(endpoint: str) -> None:
    fsx = client(endpoint, "fsx", NO_RETRIES)
    control(endpoint, "POST", "/calls/reset")
    fsx.describe_file_systems()
    fsx.describe_file_systems()
    report = control(endpoint, "GET", "/calls")
    assert report["calls"] == {"fsx:DescribeFileSystems": 2}
    assert set(report["seconds"]) == {"fsx:DescribeFileSystems"}
    assert 0 < report["seconds"]["fsx:DescribeFileSystems"] < 10
    control(endpoint, "POST", "/calls/reset")
    assert control(endpoint, "GET", "/calls") == {"calls": {}, "seconds": {}, "peak_in_flight": {}, "busy_s": 0.0}


def test_launches_in_flight_together_share_one_launch_bucket(
    endpoint: str, network: dict[str, Any]
) -> None:
    """Two launches answered at once (each held half a second) cannot both spend a bucket that
    holds one of them: one is refused, and the report shows both were in flight together."""
    control(endpoint, "POST", "/config", {"launch_bucket_size": 3, "launch_refill_per_s": 0})
    control(endpoint, "POST", "/faults", [{"service": "ec2", "action": "RunInstances", "latency_ms": 500}])
    control(endpoint, "POST", "/calls/reset")
    subnet = network["subnets"]["us-east-1a"]

    def launch() -> str:
        try:
            client(endpoint, "ec2", NO_RETRIES).run_instances(
                ImageId="ami-12345678", MinCount=2, MaxCount=2, SubnetId=subnet
            )
            return "launched"
        except ClientError as err:
            return str(err.response["Error"]["Code"])

    try:
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = sorted(pool.map(lambda _: launch(), range(2)))
        elapsed = time.monotonic() - started
    finally:
        control(endpoint, "POST", "/config", {"launch_bucket_size": 1000, "launch_refill_per_s": 2})
    assert answers == ["RequestLimitExceeded", "launched"]
    report = control(endpoint, "GET", "/calls")
    assert report["peak_in_flight"] == {"ec2:RunInstances": 2}
    # Both were held half a second at once: busy counts the overlap once, so it fits in the
    # time the two calls took together (a sum of both would not).
    assert 0.5 <= report["busy_s"] <= elapsed, (report, elapsed)


def test_a_secret_scheduled_for_deletion_keeps_its_name_until_restored(endpoint: str) -> None:
    sm = client(endpoint, "secretsmanager")
    sm.create_secret(Name="hpcforge/reserved/munge-key", SecretString="one")
    sm.delete_secret(SecretId="hpcforge/reserved/munge-key", RecoveryWindowInDays=7)
    with pytest.raises(ClientError) as create:
        sm.create_secret(Name="hpcforge/reserved/munge-key", SecretString="two")
    assert error_code(create) == "InvalidRequestException"
    assert "scheduled for deletion" in str(create.value)
    with pytest.raises(ClientError) as put:
        sm.put_secret_value(SecretId="hpcforge/reserved/munge-key", SecretString="two")
    assert error_code(put) == "InvalidRequestException"
    sm.restore_secret(SecretId="hpcforge/reserved/munge-key")
    sm.put_secret_value(SecretId="hpcforge/reserved/munge-key", SecretString="three")
    assert sm.get_secret_value(SecretId="hpcforge/reserved/munge-key")["SecretString"] == "three"


def test_ec2_vcpu_quotas_are_served_and_set_per_region(endpoint: str) -> None:
    quotas = client(endpoint, "service-quotas")
    p = quotas.get_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]
    assert p["QuotaName"] == "Running On-Demand P instances" and p["Value"] == 1536.0
    for code, name in [("L-2C3B7624", "Running On-Demand Trn instances"), ("L-E3A00192", "All X Spot Instance Requests")]:
        assert quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["QuotaName"] == name
    control(endpoint, "POST", "/quotas", {"region": REGION, "quotas": {"L-417A185B": 192}})
    assert quotas.get_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]["Value"] == 192.0
    assert quotas.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]["Value"] == 1536.0
    west = client(endpoint, "service-quotas", region="us-west-2")
    assert west.get_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]["Value"] == 1536.0
    with pytest.raises(ClientError) as unknown:
        quotas.get_service_quota(ServiceCode="ec2", QuotaCode="L-00000000")
    assert error_code(unknown) == "NoSuchResourceException"
    bad = control(endpoint, "POST", "/quotas", {"quotas": {"L-417A185B": -1}}, expect=400)
    assert "non-negative" in bad["error"]


# --- EC2's events on EventBridge -------------------------------------------------------------------


def test_instance_state_changes_reach_an_interruption_queue_through_its_rules(endpoint: str, ec2: Any) -> None:
    sqs, events = client(endpoint, "sqs"), client(endpoint, "events")
    interruptions = event_queue(sqs, events, "interruptions", INTERRUPTION_RULES)
    everything = event_queue(sqs, events, "everything", ALL_EC2_EVENTS)
    (instance_id,) = [i["InstanceId"] for i in ec2.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1)["Instances"]]
    ec2.stop_instances(InstanceIds=[instance_id])
    ec2.stop_instances(InstanceIds=[instance_id])  # already stopped: no change, no event
    ec2.start_instances(InstanceIds=[instance_id])
    ec2.terminate_instances(InstanceIds=[instance_id])

    seen = drain_events(sqs, everything)
    assert instance_states(seen, instance_id) == [
        "pending", "running", "stopping", "stopped", "pending", "running", "shutting-down", "terminated"
    ], seen
    # The interruption queue's rules filter on the state: none of pending and running.
    received = drain_events(sqs, interruptions)
    assert instance_states(received, instance_id) == ["stopping", "stopped", "shutting-down", "terminated"], received
    terminated = received[-1]
    assert terminated["source"] == "aws.ec2" and terminated["detail-type"] == "EC2 Instance State-change Notification"
    assert terminated["detail"] == {"instance-id": instance_id, "state": "terminated"}
    assert terminated["resources"] == [f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{instance_id}"]
    assert (terminated["account"], terminated["region"]) == (ACCOUNT, REGION)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", terminated["time"]), terminated


def test_state_changes_go_to_the_instances_own_region_and_never_fail_the_ec2_call(endpoint: str) -> None:
    sqs, events = client(endpoint, "sqs"), client(endpoint, "events")
    west = client(endpoint, "ec2", region="us-west-2")
    queue = event_queue(sqs, events, "east-only", INTERRUPTION_RULES)
    gone = event_queue(sqs, events, "deleted-target", INTERRUPTION_RULES)
    sqs.delete_queue(QueueUrl=gone)  # its rules stay, pointing nowhere
    (instance_id,) = [i["InstanceId"] for i in west.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1)["Instances"]]
    west.terminate_instances(InstanceIds=[instance_id])
    assert drain_events(sqs, queue) == []

    ec2 = client(endpoint, "ec2")
    (east,) = [i["InstanceId"] for i in ec2.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1)["Instances"]]
    (ended,) = ec2.terminate_instances(InstanceIds=[east])["TerminatingInstances"]
    assert ended["InstanceId"] == east
    assert ec2.describe_instances(InstanceIds=[east])["Reservations"][0]["Instances"][0]["State"]["Name"] == "terminated"
