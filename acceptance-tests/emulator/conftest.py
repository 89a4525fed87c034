"""Fixtures of the emulator's tests: one real ./serve process per session, a clean state per test."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from harness import DELAY, HERE, TEST_CONFIG, client, control, read_line


@pytest.fixture(scope="session")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port_file = tmp_path_factory.mktemp("emulator") / "port"
    process = subprocess.Popen(
        [str(HERE / "serve"), "--port", "0", "--port-file", str(port_file), "--fsx-create-delay", str(DELAY)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = read_line(process, timeout=30)
    match = re.fullmatch(r"emulator listening on http://127\.0\.0\.1:(\d+)\n", line)
    assert match, (
        f"unexpected first line {line!r}; stderr: {process.stderr.read() if process.poll() is not None else ''}"
    )
    assert port_file.read_text().strip() == match.group(1)
    yield f"http://127.0.0.1:{match.group(1)}"
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0, process.stderr.read()


@pytest.fixture(autouse=True)
def clean_state(endpoint: str) -> None:
    assert control(endpoint, "POST", "/reset") == {"status": "reset"}
    control(endpoint, "POST", "/config", TEST_CONFIG)


@pytest.fixture
def ec2(endpoint: str) -> Any:
    return client(endpoint, "ec2")
