"""Tests of the EBS direct APIs (ebs.py): a real ./serve process driven with boto3."""

from __future__ import annotations

import re
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from harness import (
    ACCOUNT,
    BLOCK_SIZE,
    NO_RETRIES,
    REGION,
    block,
    checksum,
    client,
    control,
    error_code,
    linear_checksum,
    put_block,
    wait_snapshot,
    write_snapshot,
)

# Sends what botocore's own validation would refuse, to see the service's answer.
UNCHECKED = Config(parameter_validation=False, retries={"total_max_attempts": 1})


@pytest.fixture
def ebs(endpoint: str) -> Any:
    return client(endpoint, "ebs", NO_RETRIES)


def failure(excinfo: pytest.ExceptionInfo[ClientError]) -> tuple[int, str, str | None]:
    """(HTTP status, x-amzn-ErrorType, Reason) of an EBS error."""
    response = excinfo.value.response
    headers = response["ResponseMetadata"]["HTTPHeaders"]
    return response["ResponseMetadata"]["HTTPStatusCode"], headers["x-amzn-errortype"], response.get("Reason")


def test_write_a_snapshot_and_read_it_back(ebs: Any, ec2: Any) -> None:
    started = ebs.start_snapshot(
        VolumeSize=2, Description="root volume", Tags=[{"Key": "Name", "Value": "hpc-image"}], Timeout=60
    )
    assert started["ResponseMetadata"]["HTTPStatusCode"] == 201
    snapshot_id = started["SnapshotId"]
    assert re.fullmatch(r"snap-[0-9a-f]{17}", snapshot_id)
    assert started["OwnerId"] == ACCOUNT and started["Status"] == "pending"
    assert started["VolumeSize"] == 2 and started["BlockSize"] == BLOCK_SIZE
    assert started["Tags"] == [{"Key": "Name", "Value": "hpc-image"}] and started["Description"] == "root volume"
    assert started["SseType"] == "none" and "KmsKeyArn" not in started

    in_ec2 = ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"][0]
    assert in_ec2["State"] == "pending" and in_ec2["Progress"] == "0%"
    assert in_ec2["VolumeSize"] == 2 and in_ec2["VolumeId"] == "vol-ffffffff" and in_ec2["Encrypted"] is False
    assert in_ec2["Description"] == "root volume" and in_ec2["Tags"] == [{"Key": "Name", "Value": "hpc-image"}]

    blocks = {0: block(1), 7: bytes(BLOCK_SIZE), 4095: block(0xAB)}
    for index, data in blocks.items():
        answer = put_block(ebs, snapshot_id, index, data, Progress=40)
        assert answer["ResponseMetadata"]["HTTPStatusCode"] == 201
        assert answer["Checksum"] == checksum(data) and answer["ChecksumAlgorithm"] == "SHA256"
    assert ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"][0]["Progress"] == "40%"

    completed = ebs.complete_snapshot(
        SnapshotId=snapshot_id,
        ChangedBlocksCount=3,
        Checksum=linear_checksum(blocks),
        ChecksumAlgorithm="SHA256",
        ChecksumAggregationMethod="LINEAR",
    )
    assert completed["ResponseMetadata"]["HTTPStatusCode"] == 202 and completed["Status"] == "pending"
    with pytest.raises(ClientError) as excinfo:  # only completed snapshots can be read
        ebs.list_snapshot_blocks(SnapshotId=snapshot_id)
    assert failure(excinfo) == (400, "ValidationException", "INVALID_SNAPSHOT_ID")
    assert wait_snapshot(ec2, snapshot_id, "completed")["Progress"] == "100%"

    listed = ebs.list_snapshot_blocks(SnapshotId=snapshot_id)
    assert [b["BlockIndex"] for b in listed["Blocks"]] == [0, 7, 4095]
    assert listed["VolumeSize"] == 2 and listed["BlockSize"] == BLOCK_SIZE and "NextToken" not in listed
    for entry in listed["Blocks"]:
        index, token = entry["BlockIndex"], entry["BlockToken"]
        read = ebs.get_snapshot_block(SnapshotId=snapshot_id, BlockIndex=index, BlockToken=token)
        data = blocks[index]
        assert read["BlockData"].read() == data
        assert read["DataLength"] == BLOCK_SIZE and read["Checksum"] == checksum(data)
        assert read["ChecksumAlgorithm"] == "SHA256"


def test_client_token_makes_start_snapshot_idempotent(ebs: Any, ec2: Any) -> None:
    first = ebs.start_snapshot(VolumeSize=1, ClientToken="build-42", Description="x")
    again = ebs.start_snapshot(VolumeSize=1, ClientToken="build-42", Description="x")
    assert again["SnapshotId"] == first["SnapshotId"]
    with pytest.raises(ClientError) as excinfo:
        ebs.start_snapshot(VolumeSize=2, ClientToken="build-42", Description="x")
    assert failure(excinfo)[:2] == (409, "ConflictException")
    owned = ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]
    assert [s["SnapshotId"] for s in owned] == [first["SnapshotId"]]


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        ({"VolumeSize": 0}, "INVALID_VOLUME_SIZE"),
        ({"VolumeSize": 65537}, "INVALID_VOLUME_SIZE"),
        ({"VolumeSize": 1, "Timeout": 5}, "INVALID_PARAMETER_VALUE"),
        ({"VolumeSize": 1, "Tags": [{"Key": "aws:reserved", "Value": "x"}]}, "INVALID_TAG"),
        ({"VolumeSize": 1, "KmsKeyArn": "arn:aws:kms:us-east-1:123456789012:key/k"}, "INVALID_PARAMETER_VALUE"),
        ({"VolumeSize": 1, "Encrypted": True, "KmsKeyArn": "not-an-arn"}, "INVALID_CUSTOMER_KEY"),
        ({"VolumeSize": 1, "ParentSnapshotId": "snap-0123456789abcdef0", "Encrypted": True},
         "INVALID_PARAMETER_VALUE"),
    ],
)
def test_start_snapshot_validation(endpoint: str, request_: dict[str, Any], reason: str) -> None:
    ebs = client(endpoint, "ebs", UNCHECKED)
    with pytest.raises(ClientError) as excinfo:
        ebs.start_snapshot(**request_)
    assert failure(excinfo) == (400, "ValidationException", reason)


def test_volume_size_message(endpoint: str) -> None:
    with pytest.raises(ClientError) as excinfo:
        client(endpoint, "ebs", UNCHECKED).start_snapshot(VolumeSize=99999999999)
    assert excinfo.value.response["Error"]["Message"] == "Invalid volume size: 99999999999"


def test_unknown_parent_is_not_found(ebs: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        ebs.start_snapshot(VolumeSize=1, ParentSnapshotId="snap-0123456789abcdef0")
    assert failure(excinfo) == (404, "ResourceNotFoundException", "SNAPSHOT_NOT_FOUND")
    assert excinfo.value.response["Error"]["Message"] == "The snapshot 'snap-0123456789abcdef0' does not exist."


def test_encrypted_snapshot_uses_the_default_key(ebs: Any, ec2: Any) -> None:
    started = ebs.start_snapshot(VolumeSize=1, Encrypted=True)
    assert re.fullmatch(rf"arn:aws:kms:{REGION}:{ACCOUNT}:key/.+", started["KmsKeyArn"])
    assert started["SseType"] == "sse-kms"
    in_ec2 = ec2.describe_snapshots(SnapshotIds=[started["SnapshotId"]])["Snapshots"][0]
    assert in_ec2["Encrypted"] is True and in_ec2["KmsKeyId"] == started["KmsKeyArn"]


def test_put_snapshot_block_validation(endpoint: str, ebs: Any) -> None:
    snapshot_id = ebs.start_snapshot(VolumeSize=1)["SnapshotId"]
    data = block(9)
    cases = [
        ({"Checksum": checksum(block(8))}, "INVALID_PARAMETER_VALUE"),  # checksum of other data
        ({"BlockIndex": 2048}, "INVALID_BLOCK"),  # a 1 GiB volume has blocks 0..2047
        ({"BlockData": data[:4096], "DataLength": 4096, "Checksum": checksum(data[:4096])}, "INVALID_PARAMETER_VALUE"),
        ({"DataLength": BLOCK_SIZE - 1}, "INVALID_PARAMETER_VALUE"),  # says less than it sends
        ({"ChecksumAlgorithm": "MD5"}, "INVALID_PARAMETER_VALUE"),
    ]
    unchecked = client(endpoint, "ebs", UNCHECKED)
    for change, reason in cases:
        request = {
            "SnapshotId": snapshot_id,
            "BlockIndex": 0,
            "BlockData": data,
            "DataLength": BLOCK_SIZE,
            "Checksum": checksum(data),
            "ChecksumAlgorithm": "SHA256",
            **change,
        }
        with pytest.raises(ClientError) as excinfo:
            unchecked.put_snapshot_block(**request)
        assert failure(excinfo) == (400, "ValidationException", reason), change

    with pytest.raises(ClientError) as excinfo:
        put_block(ebs, "snap-0123456789abcdef0", 0, data)
    assert failure(excinfo) == (404, "ResourceNotFoundException", "SNAPSHOT_NOT_FOUND")

    put_block(ebs, snapshot_id, 5, data)
    put_block(ebs, snapshot_id, 5, block(10))  # rewriting a block is allowed; it still counts once
    ebs.complete_snapshot(SnapshotId=snapshot_id, ChangedBlocksCount=1)
    with pytest.raises(ClientError) as excinfo:  # sealed: no more writes
        put_block(ebs, snapshot_id, 6, data)
    assert failure(excinfo) == (400, "ValidationException", "INVALID_SNAPSHOT_ID")


def test_checksum_mismatch_message(ebs: Any) -> None:
    snapshot_id = ebs.start_snapshot(VolumeSize=1)["SnapshotId"]
    with pytest.raises(ClientError) as excinfo:
        ebs.put_snapshot_block(
            SnapshotId=snapshot_id,
            BlockIndex=0,
            BlockData=block(1),
            DataLength=BLOCK_SIZE,
            Checksum=checksum(block(2)),
            ChecksumAlgorithm="SHA256",
        )
    assert excinfo.value.response["Error"]["Message"].startswith("Checksum mismatch")


def test_complete_snapshot_checks_count_and_checksum(ebs: Any, ec2: Any) -> None:
    snapshot_id = ebs.start_snapshot(VolumeSize=1)["SnapshotId"]
    blocks = {3: block(3), 1: block(1)}
    for index, data in blocks.items():
        put_block(ebs, snapshot_id, index, data)

    with pytest.raises(ClientError) as excinfo:
        ebs.complete_snapshot(SnapshotId=snapshot_id, ChangedBlocksCount=3)
    assert failure(excinfo)[:2] == (400, "ValidationException")
    in_index_order = linear_checksum(blocks)
    written_order = linear_checksum({0: blocks[3], 1: blocks[1]})  # the digests in the wrong order
    with pytest.raises(ClientError) as excinfo:
        ebs.complete_snapshot(
            SnapshotId=snapshot_id,
            ChangedBlocksCount=2,
            Checksum=written_order,
            ChecksumAlgorithm="SHA256",
            ChecksumAggregationMethod="LINEAR",
        )
    assert failure(excinfo)[:2] == (400, "ValidationException")
    assert ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"][0]["State"] == "pending"

    done = ebs.complete_snapshot(
        SnapshotId=snapshot_id,
        ChangedBlocksCount=2,
        Checksum=in_index_order,
        ChecksumAlgorithm="SHA256",
        ChecksumAggregationMethod="LINEAR",
    )
    assert done["Status"] == "pending"
    wait_snapshot(ec2, snapshot_id, "completed")
    assert ebs.complete_snapshot(SnapshotId=snapshot_id, ChangedBlocksCount=2)["Status"] == "completed"


def test_complete_without_delay_is_completed_at_once(endpoint: str, ebs: Any, ec2: Any) -> None:
    control(endpoint, "POST", "/config", {"snapshot_delay_s": 0})
    snapshot_id = ebs.start_snapshot(VolumeSize=1)["SnapshotId"]
    assert ebs.complete_snapshot(SnapshotId=snapshot_id, ChangedBlocksCount=0)["Status"] == "completed"
    assert ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"][0]["State"] == "completed"


def test_child_snapshot_inherits_parent_blocks(ebs: Any, ec2: Any) -> None:
    parent = write_snapshot(ebs, ec2, {0: block(1), 1: block(2)})
    with pytest.raises(ClientError) as excinfo:  # a child cannot be smaller than its parent
        ebs.start_snapshot(VolumeSize=1, ParentSnapshotId=write_snapshot(ebs, ec2, {}, volume_size=2))
    assert failure(excinfo) == (400, "ValidationException", "INVALID_VOLUME_SIZE")

    child = write_snapshot(ebs, ec2, {1: block(3), 2: block(4)}, ParentSnapshotId=parent)
    listed = ebs.list_snapshot_blocks(SnapshotId=child)["Blocks"]
    assert [b["BlockIndex"] for b in listed] == [0, 1, 2]
    tokens = {b["BlockIndex"]: b["BlockToken"] for b in listed}
    assert ebs.get_snapshot_block(SnapshotId=child, BlockIndex=0, BlockToken=tokens[0])["BlockData"].read() == block(1)
    assert ebs.get_snapshot_block(SnapshotId=child, BlockIndex=1, BlockToken=tokens[1])["BlockData"].read() == block(3)

    changed = ebs.list_changed_blocks(FirstSnapshotId=parent, SecondSnapshotId=child)["ChangedBlocks"]
    assert [c["BlockIndex"] for c in changed] == [1, 2]
    assert "FirstBlockToken" in changed[0] and "FirstBlockToken" not in changed[1]
    assert all("SecondBlockToken" in c for c in changed)


def test_list_snapshot_blocks_pages(ebs: Any, ec2: Any) -> None:
    zero = bytes(BLOCK_SIZE)
    snapshot_id = write_snapshot(ebs, ec2, {index: zero for index in range(0, 2 * 105, 2)})
    first = ebs.list_snapshot_blocks(SnapshotId=snapshot_id, MaxResults=100)
    assert len(first["Blocks"]) == 100 and first["Blocks"][-1]["BlockIndex"] == 198
    second = ebs.list_snapshot_blocks(SnapshotId=snapshot_id, MaxResults=100, NextToken=first["NextToken"])
    assert [b["BlockIndex"] for b in second["Blocks"]] == [200, 202, 204, 206, 208] and "NextToken" not in second
    from_index = ebs.list_snapshot_blocks(SnapshotId=snapshot_id, StartingBlockIndex=203)["Blocks"]
    assert [b["BlockIndex"] for b in from_index] == [204, 206, 208]
    with pytest.raises(ClientError) as excinfo:
        ebs.list_snapshot_blocks(SnapshotId=snapshot_id, NextToken="bm90LWEtdG9rZW4=")
    assert failure(excinfo) == (400, "ValidationException", "INVALID_PAGE_TOKEN")


def test_get_snapshot_block_needs_the_listed_token(ebs: Any, ec2: Any) -> None:
    snapshot_id = write_snapshot(ebs, ec2, {0: block(1)})
    with pytest.raises(ClientError) as excinfo:
        ebs.get_snapshot_block(SnapshotId=snapshot_id, BlockIndex=0, BlockToken="AAAA")
    assert failure(excinfo) == (400, "ValidationException", "INVALID_BLOCK_TOKEN")


def test_deleted_snapshot_is_gone(ebs: Any, ec2: Any) -> None:
    snapshot_id = write_snapshot(ebs, ec2, {0: block(1)})
    ec2.delete_snapshot(SnapshotId=snapshot_id)
    with pytest.raises(ClientError) as excinfo:
        ebs.list_snapshot_blocks(SnapshotId=snapshot_id)
    assert failure(excinfo)[:2] == (404, "ResourceNotFoundException")


def test_calls_are_counted_by_operation(endpoint: str, ebs: Any, ec2: Any) -> None:
    control(endpoint, "POST", "/calls/reset")
    snapshot_id = write_snapshot(ebs, ec2, {i: block(i) for i in range(3)})
    listed = ebs.list_snapshot_blocks(SnapshotId=snapshot_id)["Blocks"]
    ebs.get_snapshot_block(SnapshotId=snapshot_id, BlockIndex=0, BlockToken=listed[0]["BlockToken"])
    ebs.list_changed_blocks(SecondSnapshotId=snapshot_id)
    calls = control(endpoint, "GET", "/calls")["calls"]
    assert {k: v for k, v in calls.items() if k.startswith("ebs:")} == {
        "ebs:StartSnapshot": 1,
        "ebs:PutSnapshotBlock": 3,
        "ebs:CompleteSnapshot": 1,
        "ebs:ListSnapshotBlocks": 1,
        "ebs:GetSnapshotBlock": 1,
        "ebs:ListChangedBlocks": 1,
    }


def test_injected_fault_answers_a_block_upload(endpoint: str, ebs: Any) -> None:
    snapshot_id = ebs.start_snapshot(VolumeSize=1)["SnapshotId"]
    control(
        endpoint,
        "POST",
        "/faults",
        {
            "service": "ebs",
            "action": "PutSnapshotBlock",
            "code": "ResourceNotFoundException",
            "http_status": 404,
            "count": 1,
        },
    )
    # The 512 KiB body is read before the error is sent, so the client sees the error, not a reset.
    with pytest.raises(ClientError) as excinfo:
        put_block(ebs, snapshot_id, 0, block(1))
    assert failure(excinfo)[:2] == (404, "ResourceNotFoundException")
    put_block(ebs, snapshot_id, 0, block(1))


def test_sdk_retries_through_throttled_block_uploads(endpoint: str) -> None:
    ebs = client(endpoint, "ebs", Config(retries={"mode": "standard", "total_max_attempts": 10}))
    snapshot_id = ebs.start_snapshot(VolumeSize=1)["SnapshotId"]
    control(endpoint, "POST", "/calls/reset")
    control(
        endpoint,
        "POST",
        "/faults",
        {"service": "ebs", "action": "PutSnapshotBlock", "code": "ThrottlingException", "ratio": 0.2},
    )
    blocks = {index: block(index) for index in range(10)}
    for index, data in blocks.items():
        put_block(ebs, snapshot_id, index, data)
    fired = control(endpoint, "GET", "/faults")["faults"][0]["fired"]
    assert fired > 0
    assert control(endpoint, "GET", "/calls")["calls"]["ebs:PutSnapshotBlock"] == 10 + fired
    control(endpoint, "DELETE", "/faults")
    done = ebs.complete_snapshot(
        SnapshotId=snapshot_id,
        ChangedBlocksCount=10,
        Checksum=linear_checksum(blocks),
        ChecksumAlgorithm="SHA256",
        ChecksumAggregationMethod="LINEAR",
    )
    assert done["Status"] in ("pending", "completed")


def test_block_store_budget_is_a_server_option() -> None:
    import emulator

    assert emulator.parse_args(["--port", "0", "--block-store-mib", "2048"]).block_store_mib == 2048
    assert emulator.parse_args(["--port", "0"]).block_store_mib is None
    with pytest.raises(SystemExit):
        emulator.parse_args(["--port", "0", "--block-store-mib", "0"])
