"""Shared pieces of the emulator's tests: constants, the control API client, boto3 clients, waiting."""

from __future__ import annotations

import json
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
    "seed": 7,
}
NO_RETRIES = Config(retries={"total_max_attempts": 1})


def read_line(process: Popen[str], timeout: float) -> str:
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return lines[0] if lines else ""


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
