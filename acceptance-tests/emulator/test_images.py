"""Tests of the EC2 image and snapshot actions (ec2_images.py) and of the calls image builders make."""

from __future__ import annotations

import re
from typing import Any

import pytest
from botocore.exceptions import ClientError

from harness import (
    ACCOUNT,
    NO_RETRIES,
    REGION,
    block,
    client,
    control,
    error_code,
    wait_for,
    wait_snapshot,
    write_snapshot,
)

OTHER_REGION = "us-west-2"


@pytest.fixture
def ec2(endpoint: str) -> Any:
    return client(endpoint, "ec2", NO_RETRIES)


@pytest.fixture
def ebs(endpoint: str) -> Any:
    return client(endpoint, "ebs", NO_RETRIES)


def register(ec2: Any, snapshot_id: str, name: str = "hpc-node-2026.12.02", **extra: Any) -> str:
    """RegisterImage as the image builder calls it."""
    request: dict[str, Any] = {
        "Name": name,
        "Description": "hpcforge compute node",
        "Architecture": "x86_64",
        "BootMode": "uefi",
        "EnaSupport": True,
        "SriovNetSupport": "simple",
        "RootDeviceName": "/dev/xvda",
        "VirtualizationType": "hvm",
        "BlockDeviceMappings": [
            {
                "DeviceName": "/dev/xvda",
                "Ebs": {"SnapshotId": snapshot_id, "VolumeType": "gp3", "DeleteOnTermination": True},
            }
        ],
        "TagSpecifications": [{"ResourceType": "image", "Tags": [{"Key": "hpcforge:image", "Value": "hpc-node"}]}],
        **extra,
    }
    return ec2.register_image(**request)["ImageId"]


def wait_image(ec2: Any, image_id: str, state: str = "available") -> dict[str, Any]:
    return wait_for(lambda: ec2.describe_images(ImageIds=[image_id])["Images"][0], lambda i: i["State"] == state)


def test_register_image_from_a_written_snapshot(ebs: Any, ec2: Any) -> None:
    snapshot_id = write_snapshot(ebs, ec2, {0: block(1)}, volume_size=4)
    image_id = register(ec2, snapshot_id)
    assert re.fullmatch(r"ami-[0-9a-f]{17}", image_id)

    image = ec2.describe_images(ImageIds=[image_id])["Images"][0]
    assert image["State"] == "pending"
    assert image["Name"] == "hpc-node-2026.12.02" and image["Description"] == "hpcforge compute node"
    assert image["OwnerId"] == ACCOUNT and image["Public"] is False
    assert image["Architecture"] == "x86_64" and image["VirtualizationType"] == "hvm"
    assert image["BootMode"] == "uefi" and image["EnaSupport"] is True and image["SriovNetSupport"] == "simple"
    assert image["RootDeviceName"] == "/dev/xvda" and image["RootDeviceType"] == "ebs"
    assert image["ImageType"] == "machine" and image["PlatformDetails"] == "Linux/UNIX"
    assert image["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {
                "SnapshotId": snapshot_id,
                "VolumeSize": 4,
                "VolumeType": "gp3",
                "Iops": 3000,
                "Throughput": 125,
                "DeleteOnTermination": True,
                "Encrypted": False,
            },
        }
    ]
    assert image["Tags"] == [{"Key": "hpcforge:image", "Value": "hpc-node"}]
    wait_image(ec2, image_id)

    def found(**request: Any) -> list[str]:
        return [i["ImageId"] for i in ec2.describe_images(**request)["Images"]]

    assert found(Owners=["self"]) == [image_id]
    assert found(Owners=["self"], Filters=[{"Name": "name", "Values": ["hpc-node-*"]}]) == [image_id]
    assert found(Owners=["self"], Filters=[{"Name": "tag:hpcforge:image", "Values": ["hpc-node"]}]) == [image_id]
    assert found(Owners=["self"], Filters=[{"Name": "tag:hpcforge:image", "Values": ["other"]}]) == []
    assert found(Filters=[{"Name": "block-device-mapping.snapshot-id", "Values": [snapshot_id]}]) == [image_id]

    # Instances launch from it.
    reservation = ec2.run_instances(ImageId=image_id, MinCount=1, MaxCount=1, InstanceType="c5.large")
    assert reservation["Instances"][0]["ImageId"] == image_id


def test_register_image_defaults(ebs: Any, ec2: Any) -> None:
    snapshot_id = write_snapshot(ebs, ec2, {}, volume_size=2)
    image_id = ec2.register_image(
        Name="plain",
        RootDeviceName="/dev/sda1",
        BlockDeviceMappings=[{"DeviceName": "/dev/sda1", "Ebs": {"SnapshotId": snapshot_id}}],
    )["ImageId"]
    image = ec2.describe_images(ImageIds=[image_id])["Images"][0]
    assert image["Architecture"] == "i386" and image["VirtualizationType"] == "paravirtual"
    assert image["BlockDeviceMappings"][0]["Ebs"] == {
        "SnapshotId": snapshot_id,
        "VolumeSize": 2,
        "VolumeType": "gp2",
        "DeleteOnTermination": True,
        "Encrypted": False,
    }


def test_register_image_refusals(ebs: Any, ec2: Any) -> None:
    pending = ebs.start_snapshot(VolumeSize=1)["SnapshotId"]
    with pytest.raises(ClientError) as excinfo:
        register(ec2, pending)
    assert error_code(excinfo) == "IncorrectState"
    with pytest.raises(ClientError) as excinfo:
        register(ec2, "snap-0123456789abcdef0")
    assert error_code(excinfo) == "InvalidSnapshot.NotFound"
    assert "snap-0123456789abcdef0" in excinfo.value.response["Error"]["Message"]

    ebs.complete_snapshot(SnapshotId=pending, ChangedBlocksCount=0)
    wait_snapshot(ec2, pending, "completed")
    image_id = register(ec2, pending)
    with pytest.raises(ClientError) as excinfo:
        register(ec2, pending)
    assert error_code(excinfo) == "InvalidAMIName.Duplicate"
    message = excinfo.value.response["Error"]["Message"]
    assert message == f"AMI name hpc-node-2026.12.02 is already in use by AMI {image_id}"

    refusals = [
        ({"Name": "bad|name"}, "InvalidAMIName.Malformed"),
        ({"Architecture": "sparc"}, "InvalidParameterValue"),
        ({"BootMode": "bios"}, "InvalidParameterValue"),
        # RegisterImage tags only the image; snapshots are tagged with CreateTags or at StartSnapshot.
        ({"TagSpecifications": [{"ResourceType": "snapshot", "Tags": [{"Key": "k", "Value": "v"}]}]},
         "InvalidParameterValue"),
        ({"BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"SnapshotId": pending, "VolumeSize": 0}}]},
         "InvalidBlockDeviceMapping"),
        ({"RootDeviceName": "/dev/sda1"}, "InvalidBlockDeviceMapping"),
    ]
    for change, code in refusals:
        with pytest.raises(ClientError) as excinfo:
            register(ec2, pending, **{"Name": "another-name", **change})
        assert error_code(excinfo) == code, change


def test_register_image_fault(endpoint: str, ebs: Any, ec2: Any) -> None:
    snapshot_id = write_snapshot(ebs, ec2, {0: block(1)})
    control(endpoint, "POST", "/calls/reset")
    control(
        endpoint,
        "POST",
        "/faults",
        {"service": "ec2", "action": "RegisterImage", "code": "InvalidParameterValue", "count": 1},
    )
    with pytest.raises(ClientError) as excinfo:
        register(ec2, snapshot_id)
    assert error_code(excinfo) == "InvalidParameterValue"
    assert ec2.describe_images(Owners=["self"])["Images"] == []
    register(ec2, snapshot_id)
    assert control(endpoint, "GET", "/calls")["calls"]["ec2:RegisterImage"] == 2


def test_copy_image_to_another_region(endpoint: str, ebs: Any, ec2: Any) -> None:
    blocks = {0: block(7), 9: block(8)}
    snapshot_id = write_snapshot(ebs, ec2, blocks, volume_size=2, Tags=[{"Key": "stage", "Value": "root"}])
    image_id = register(ec2, snapshot_id)
    west = client(endpoint, "ec2", NO_RETRIES, region=OTHER_REGION)
    request = {
        "SourceRegion": REGION,
        "SourceImageId": image_id,
        "Name": "hpc-node-2026.12.02",
        "Description": "copied",
        "CopyImageTags": True,
        "ClientToken": "copy-hpc-node-1",
        "TagSpecifications": [{"ResourceType": "snapshot", "Tags": [{"Key": "copied", "Value": "yes"}]}],
    }
    with pytest.raises(ClientError) as excinfo:  # the source is still pending
        west.copy_image(**request)
    assert error_code(excinfo) == "IncorrectState"
    wait_image(ec2, image_id)

    # Room to see the copy pending after four calls, on a host busy with booted tests beside
    # (0.3 s was once too short there).
    control(endpoint, "POST", "/config", {"image_delay_s": 5.0, "snapshot_delay_s": 5.0})
    copy_id = west.copy_image(**request)["ImageId"]
    assert west.copy_image(**request)["ImageId"] == copy_id  # same token: same copy
    with pytest.raises(ClientError) as excinfo:
        west.copy_image(**{**request, "Description": "other"})
    assert error_code(excinfo) == "IdempotentParameterMismatch"
    with pytest.raises(ClientError) as excinfo:  # a new token makes a new copy, whose name is taken
        west.copy_image(**{**request, "ClientToken": "copy-hpc-node-2"})
    assert error_code(excinfo) == "InvalidAMIName.Duplicate"

    copy = west.describe_images(ImageIds=[copy_id])["Images"][0]
    assert copy["State"] == "pending" and copy["Description"] == "copied"
    assert copy["SourceImageId"] == image_id and copy["SourceImageRegion"] == REGION
    assert copy["Architecture"] == "x86_64" and copy["BootMode"] == "uefi" and copy["EnaSupport"] is True
    assert copy["Tags"] == [{"Key": "hpcforge:image", "Value": "hpc-node"}]
    copied_snapshot = copy["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    assert copied_snapshot != snapshot_id and copy["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 2
    in_west = west.describe_snapshots(SnapshotIds=[copied_snapshot])["Snapshots"][0]
    assert in_west["State"] == "pending" and in_west["VolumeSize"] == 2
    assert in_west["Tags"] == [{"Key": "copied", "Value": "yes"}]
    wait_image(west, copy_id)
    assert west.describe_snapshots(SnapshotIds=[copied_snapshot])["Snapshots"][0]["State"] == "completed"
    assert [i["ImageId"] for i in ec2.describe_images(Owners=["self"])["Images"]] == [image_id]

    # The copy's blocks are the source's.
    west_ebs = client(endpoint, "ebs", NO_RETRIES, region=OTHER_REGION)
    listed = west_ebs.list_snapshot_blocks(SnapshotId=copied_snapshot)["Blocks"]
    assert [b["BlockIndex"] for b in listed] == [0, 9]
    read = west_ebs.get_snapshot_block(SnapshotId=copied_snapshot, BlockIndex=9, BlockToken=listed[1]["BlockToken"])
    assert read["BlockData"].read() == blocks[9]

    with pytest.raises(ClientError) as excinfo:
        west.copy_image(SourceRegion=REGION, SourceImageId="ami-0123456789abcdef0", Name="missing")
    assert error_code(excinfo) == "InvalidAMIID.NotFound"


def test_launch_and_create_volume_permissions(ebs: Any, ec2: Any) -> None:
    snapshot_id = write_snapshot(ebs, ec2, {0: block(1)})
    image_id = register(ec2, snapshot_id)
    ec2.modify_image_attribute(ImageId=image_id, LaunchPermission={"Add": [{"UserId": "111122223333"}]})
    permissions = ec2.describe_image_attribute(ImageId=image_id, Attribute="launchPermission")["LaunchPermissions"]
    assert permissions == [{"UserId": "111122223333"}]
    assert ec2.describe_image_attribute(ImageId=image_id, Attribute="bootMode")["BootMode"] == {"Value": "uefi"}
    described = ec2.describe_image_attribute(ImageId=image_id, Attribute="description")
    assert described["Description"] == {"Value": "hpcforge compute node"}
    with pytest.raises(ClientError) as excinfo:
        ec2.describe_image_attribute(ImageId="ami-0123456789abcdef0", Attribute="launchPermission")
    assert error_code(excinfo) == "InvalidAMIID.NotFound"

    ec2.modify_snapshot_attribute(
        SnapshotId=snapshot_id,
        Attribute="createVolumePermission",
        CreateVolumePermission={"Add": [{"UserId": "111122223333"}]},
    )
    ec2.modify_snapshot_attribute(
        SnapshotId=snapshot_id, Attribute="createVolumePermission", OperationType="add", UserIds=["444455556666"]
    )
    shared = ec2.describe_snapshot_attribute(SnapshotId=snapshot_id, Attribute="createVolumePermission")
    assert shared["CreateVolumePermissions"] == [{"UserId": "111122223333"}, {"UserId": "444455556666"}]
    ec2.modify_snapshot_attribute(
        SnapshotId=snapshot_id,
        Attribute="createVolumePermission",
        CreateVolumePermission={"Remove": [{"UserId": "444455556666"}]},
    )
    shared = ec2.describe_snapshot_attribute(SnapshotId=snapshot_id, Attribute="createVolumePermission")
    assert shared["CreateVolumePermissions"] == [{"UserId": "111122223333"}]
    with pytest.raises(ClientError) as excinfo:
        ec2.modify_snapshot_attribute(
            SnapshotId=snapshot_id, Attribute="createVolumePermission", OperationType="add", UserIds=["nobody"]
        )
    assert error_code(excinfo) == "InvalidParameterValue"


def test_snapshot_in_use_until_the_image_is_deregistered(ebs: Any, ec2: Any) -> None:
    snapshot_id = write_snapshot(ebs, ec2, {0: block(1)})
    image_id = register(ec2, snapshot_id)
    with pytest.raises(ClientError) as excinfo:
        ec2.delete_snapshot(SnapshotId=snapshot_id)
    assert error_code(excinfo) == "InvalidSnapshot.InUse"
    assert excinfo.value.response["Error"]["Message"] == f"The snapshot {snapshot_id} is currently in use by {image_id}"
    ec2.deregister_image(ImageId=image_id)
    assert ec2.describe_images(Owners=["self"])["Images"] == []
    ec2.delete_snapshot(SnapshotId=snapshot_id)
    with pytest.raises(ClientError) as excinfo:
        ec2.delete_snapshot(SnapshotId=snapshot_id)
    assert error_code(excinfo) == "InvalidSnapshot.NotFound"

    other = write_snapshot(ebs, ec2, {0: block(2)})
    image_id = register(ec2, other, name="second")
    result = ec2.deregister_image(ImageId=image_id, DeleteAssociatedSnapshots=True)
    assert result["DeleteSnapshotResults"] == [{"SnapshotId": other, "ReturnCode": "success"}]
    assert ec2.describe_snapshots(Filters=[{"Name": "snapshot-id", "Values": [other]}])["Snapshots"] == []


def test_amazon_ebs_builder_calls(ec2: Any) -> None:
    """What a builder that boots an instance and images it does: all of it answered by moto or us."""
    key = ec2.create_key_pair(KeyName="builder-key")
    assert key["KeyName"] == "builder-key" and "BEGIN" in key["KeyMaterial"]
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.0.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="builder-ssh", Description="ssh in", VpcId=vpc)["GroupId"]
    ec2.authorize_security_group_ingress(
        GroupId=group,
        IpPermissions=[{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "10.0.0.0/8"}]}],
    )
    rules = ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"][0]["IpPermissions"]
    assert [(r["FromPort"], r["IpRanges"][0]["CidrIp"]) for r in rules] == [(22, "10.0.0.0/8")]

    base = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    instance = ec2.run_instances(
        ImageId=base,
        MinCount=1,
        MaxCount=1,
        InstanceType="c5.large",
        KeyName="builder-key",
        SubnetId=subnet,
        SecurityGroupIds=[group],
    )["Instances"][0]["InstanceId"]
    ec2.stop_instances(InstanceIds=[instance])
    state = ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state == "stopped"

    image_id = ec2.create_image(
        InstanceId=instance,
        Name="built-from-instance",
        Description="amazon-ebs style",
        TagSpecifications=[
            {"ResourceType": "image", "Tags": [{"Key": "built-by", "Value": "hpc-image"}]},
            {"ResourceType": "snapshot", "Tags": [{"Key": "built-by", "Value": "hpc-image"}]},
        ],
    )["ImageId"]
    image = ec2.describe_images(ImageIds=[image_id])["Images"][0]
    assert image["State"] == "pending" and image["SourceInstanceId"] == instance
    assert image["Tags"] == [{"Key": "built-by", "Value": "hpc-image"}]
    (mapping,) = image["BlockDeviceMappings"]
    snapshot = ec2.describe_snapshots(SnapshotIds=[mapping["Ebs"]["SnapshotId"]])["Snapshots"][0]
    assert snapshot["Tags"] == [{"Key": "built-by", "Value": "hpc-image"}]
    assert snapshot["Description"] == f"Created by CreateImage({instance}) for {image_id}"
    wait_image(ec2, image_id)
    with pytest.raises(ClientError) as excinfo:
        ec2.create_image(InstanceId=instance, Name="built-from-instance")
    assert error_code(excinfo) == "InvalidAMIName.Duplicate"

    ec2.terminate_instances(InstanceIds=[instance])
    state = ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state == "terminated"
    ec2.delete_key_pair(KeyName="builder-key")
    assert ec2.describe_key_pairs()["KeyPairs"] == []
    ec2.delete_security_group(GroupId=group)
