"""Shared pieces of the emulator's tests: constants, the control API client, boto3 clients, waiting."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from subprocess import Popen
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

HERE = Path(__file__).resolve().parent
REGION = "us-east-1"
ACCOUNT = "123456789012"
DELAY = 0.3
TEST_CONFIG = {
    "fsx_create_delay_s": DELAY,
    "fsx_update_delay_s": DELAY,
    "fsx_delete_delay_s": DELAY,
    "snapshot_delay_s": DELAY,
    "image_delay_s": DELAY,
    "seed": 7,
}
NO_RETRIES = Config(retries={"total_max_attempts": 1})


def read_line(process: Popen[str], timeout: float) -> str:
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return lines[0] if lines else ""


def start_emulator(port_file: Path, *options: str) -> tuple[Popen[str], str]:
    """Starts ``./serve`` with ``options`` on a free port written to ``port_file``, its stderr in
    ``emulator.err`` beside it; returns the process and its endpoint. Every emulator test starts
    its emulator here (the Rust tests through ``acceptance_tests::Emulator``)."""
    errors = port_file.parent / "emulator.err"
    process = subprocess.Popen(
        [str(HERE / "serve"), "--port", "0", "--port-file", str(port_file), *options],
        stdout=subprocess.PIPE, stderr=open(errors, "w", encoding="utf-8"), text=True,
    )
    line = read_line(process, timeout=60)
    found = re.fullmatch(r"emulator listening on (http://127\.0\.0\.1:(\d+))\n", line)
    assert found, f"the emulator did not start: {line!r}; {errors.read_text()}"
    assert port_file.read_text().strip() == found.group(2)
    return process, found.group(1)


def stop_emulator(process: Popen[str], timeout: float = 120) -> int:
    """SIGTERM, as a user's Ctrl-C or the demo's teardown; returns the exit code."""
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=timeout)


def control(endpoint: str, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{endpoint}/_emulator{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(request) as response:
            status, payload = response.status, response.read()
    except urllib.error.HTTPError as err:
        status, payload = err.code, err.read()
    assert status == expect, payload
    return json.loads(payload)


def client(
    endpoint: str, service: str, config: Config | None = None, region: str = REGION, **credentials: str
) -> Any:
    credentials = credentials or {"aws_access_key_id": "AKIAIOSFODNN7EXAMPLE", "aws_secret_access_key": "secret"}
    return boto3.client(service, endpoint_url=endpoint, region_name=region, config=config, **credentials)


def wait_for(read: Callable[[], Any], done: Callable[[Any], bool], timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value):
            return value
        assert time.monotonic() < deadline, f"timed out; last value: {value}"
        time.sleep(0.05)


def error_code(excinfo: pytest.ExceptionInfo[ClientError]) -> str:
    return excinfo.value.response["Error"]["Code"]


# --- EBS direct APIs -------------------------------------------------------------------------------

BLOCK_SIZE = 524288


def block(fill: int) -> bytes:
    """A 512 KiB block of one repeated byte."""
    return bytes([fill]) * BLOCK_SIZE


def checksum(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def linear_checksum(blocks: dict[int, bytes]) -> str:
    """The LINEAR aggregate: SHA-256 of the blocks' raw SHA-256 digests in block index order."""
    digests = b"".join(hashlib.sha256(blocks[index]).digest() for index in sorted(blocks))
    return base64.b64encode(hashlib.sha256(digests).digest()).decode()


def put_block(ebs: Any, snapshot_id: str, index: int, data: bytes, **extra: Any) -> dict[str, Any]:
    return ebs.put_snapshot_block(
        SnapshotId=snapshot_id,
        BlockIndex=index,
        BlockData=data,
        DataLength=len(data),
        Checksum=checksum(data),
        ChecksumAlgorithm="SHA256",
        **extra,
    )


def write_snapshot(ebs: Any, ec2: Any, blocks: dict[int, bytes], volume_size: int = 1, **start: Any) -> str:
    """Writes a whole snapshot with the EBS direct APIs and waits until EC2 says it is completed."""
    snapshot_id = ebs.start_snapshot(VolumeSize=volume_size, **start)["SnapshotId"]
    for index, data in blocks.items():
        put_block(ebs, snapshot_id, index, data)
    ebs.complete_snapshot(
        SnapshotId=snapshot_id,
        ChangedBlocksCount=len(blocks),
        Checksum=linear_checksum(blocks),
        ChecksumAlgorithm="SHA256",
        ChecksumAggregationMethod="LINEAR",
    )
    wait_snapshot(ec2, snapshot_id, "completed")
    return snapshot_id


def wait_snapshot(ec2: Any, snapshot_id: str, state: str) -> dict[str, Any]:
    return wait_for(
        lambda: ec2.describe_snapshots(SnapshotIds=[snapshot_id])["Snapshots"][0],
        lambda snapshot: snapshot["State"] == state,
    )


# --- EC2's events on EventBridge ------------------------------------------------------------------

# The rules the product makes for a partition's interruption queue (as Karpenter's).
INTERRUPTION_RULES = {
    "spot": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "state": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Instance State-change Notification"],
        "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]},
    },
}
ALL_EC2_EVENTS = {"ec2": {"source": ["aws.ec2"]}}


def event_queue(sqs: Any, events: Any, name: str, rules: dict[str, Any]) -> str:
    """A queue fed by rules on the default event bus (rule name suffix -> event pattern); its URL."""
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for suffix, pattern in rules.items():
        events.put_rule(Name=f"{name}-{suffix}", EventPattern=json.dumps(pattern))
        events.put_targets(Rule=f"{name}-{suffix}", Targets=[{"Id": "queue", "Arn": arn}])
    return url


def drain_events(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Receives and deletes what the queue holds: the EventBridge events, oldest first."""
    received: list[dict[str, Any]] = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return received
        received += [json.loads(m["Body"]) for m in messages]
        sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
        )


def events_until(sqs: Any, url: str, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 10.0) -> list[dict[str, Any]]:
    """Drains the queue until what it held so far is `done` (or the timeout passes): EventBridge
    delivers an event to each matching rule's target in turn, so one queue may have it before
    another does."""
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        received += drain_events(sqs, url)
        if done(received) or time.monotonic() >= deadline:
            return received
        time.sleep(0.1)


def instance_states(events: list[dict[str, Any]], instance_id: str) -> list[str]:
    """The states of one instance's state-change notifications, in order."""
    return [
        e["detail"]["state"] for e in events
        if e["detail-type"] == "EC2 Instance State-change Notification" and e["detail"]["instance-id"] == instance_id
    ]
