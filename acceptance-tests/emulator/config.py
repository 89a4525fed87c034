"""Run-time settings of the emulator, shared by the control API and the service handlers."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass
class Settings:
    fsx_create_delay_s: float = 1.0
    fsx_update_delay_s: float = 1.0
    fsx_delete_delay_s: float = 1.0
    # EC2 snapshots: pending -> completed after CompleteSnapshot (EBS direct), CreateImage, CopyImage.
    snapshot_delay_s: float = 1.0
    # EC2 images: pending -> available after RegisterImage, CreateImage, CopyImage.
    image_delay_s: float = 1.0
    # EC2's launch rate (RunInstances and instant CreateFleet, per account and region): a bucket
    # of this many instances, refilled at this many per second; past it, RequestLimitExceeded.
    launch_bucket_size: float = 1000.0
    launch_refill_per_s: float = 2.0
    seed: int = 0


class EmulatorConfig:
    """Thread-safe holder of the current :class:`Settings`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._settings = Settings()

    def snapshot(self) -> Settings:
        with self._lock:
            return Settings(**asdict(self._settings))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self.snapshot())

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Validates and applies ``changes``; raises ValueError naming the bad key."""
        known = {f.name: f.type for f in fields(Settings)}
        validated: dict[str, Any] = {}
        for key, value in changes.items():
            if key not in known:
                raise ValueError(f"unknown config key {key!r}; known keys: {', '.join(sorted(known))}")
            if key == "seed":
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError("seed must be an integer")
                validated[key] = value
            else:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                    unit = "seconds" if key.endswith("_s") else "instances" if key.endswith("size") else "instances a second"
                    raise ValueError(f"{key} must be a non-negative number of {unit}")
                validated[key] = float(value)
        with self._lock:
            for key, value in validated.items():
                setattr(self._settings, key, value)
            return asdict(self._settings)


CONFIG = EmulatorConfig()
