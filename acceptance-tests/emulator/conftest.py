"""Fixtures of the emulator's tests: one real ./serve process per session, a clean state per test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness import DELAY, TEST_CONFIG, client, control, start_emulator, stop_emulator


@pytest.fixture(scope="session")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port_file = tmp_path_factory.mktemp("emulator") / "port"
    process, url = start_emulator(port_file, "--fsx-create-delay", str(DELAY))
    yield url
    assert stop_emulator(process, timeout=10) == 0, (port_file.parent / "emulator.err").read_text()


@pytest.fixture(autouse=True)
def clean_state(endpoint: str) -> None:
    assert control(endpoint, "POST", "/reset") == {"status": "reset"}
    control(endpoint, "POST", "/config", TEST_CONFIG)


@pytest.fixture
def ec2(endpoint: str) -> Any:
    return client(endpoint, "ec2")
