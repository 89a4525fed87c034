"""Parts of the machines that need no booting: what a guest's root says about its systemd, the
events of a spot interruption."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws
from moto.ec2.models import ec2_backends

import machines
from harness import (
    ACCOUNT,
    ALL_EC2_EVENTS,
    INTERRUPTION_RULES,
    REGION,
    drain_events,
    event_queue,
    events_until,
    instance_states,
    wait_for,
)


def _root(tmp_path: Path, where: str, library: str) -> str:
    directory = tmp_path / where
    directory.mkdir(parents=True)
    (directory / library).write_bytes(b"")
    return str(tmp_path)


def test_a_guest_whose_systemd_dropped_cgroup_v1_gets_the_unified_hierarchy(tmp_path: Path) -> None:
    forky = _root(tmp_path / "forky", "usr/lib/x86_64-linux-gnu/systemd", "libsystemd-shared-262.so")
    assert machines.guest_systemd_version(forky) == 262
    assert machines.needs_unified_cgroups(forky)
    trixie = _root(tmp_path / "trixie", "usr/lib/x86_64-linux-gnu/systemd", "libsystemd-shared-257.so")
    assert machines.guest_systemd_version(trixie) == 257
    assert not machines.needs_unified_cgroups(trixie)
    fedora = _root(tmp_path / "fedora", "usr/lib64/systemd", "libsystemd-shared-258.3-1.fc43.so")
    assert machines.guest_systemd_version(fedora) == 258
    assert machines.needs_unified_cgroups(fedora)


def test_a_root_without_systemd_keeps_nspawns_choice(tmp_path: Path) -> None:
    assert machines.guest_systemd_version(str(tmp_path)) is None
    assert not machines.needs_unified_cgroups(str(tmp_path))


@mock_aws
def test_a_spot_interruption_warns_on_eventbridge_then_the_machine_shuts_down(tmp_path: Path) -> None:
    sqs, events = boto3.client("sqs", region_name=REGION), boto3.client("events", region_name=REGION)
    interruptions = event_queue(sqs, events, "interruptions", INTERRUPTION_RULES)
    everything = event_queue(sqs, events, "everything", ALL_EC2_EVENTS)
    ec2 = boto3.client("ec2", region_name=REGION)
    (launched,) = ec2.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1,
                                    InstanceMarketOptions={"MarketType": "spot"})["Instances"]
    instance = ec2_backends[ACCOUNT][REGION].get_instance(launched["InstanceId"])
    # A machine that has not booted (no process): at the end of the delay it is shutting down.
    manager = machines.MachineManager(str(tmp_path), 1, app=None)
    manager.machines[instance.id] = machines.Machine(
        instance=instance, account=ACCOUNT, region=REGION, index=0, directory=os.path.join(str(tmp_path), instance.id),
        vpc=None, mac="", address="",  # type: ignore[arg-type]
    )

    notice = manager.interrupt(instance.id, 0.3)
    assert notice["action"] == "terminate"
    (warning,) = drain_events(sqs, interruptions)
    assert warning["detail-type"] == "EC2 Spot Instance Interruption Warning"
    assert warning["detail"] == {"instance-id": instance.id, "instance-action": "terminate"}
    assert warning["resources"] == [f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{instance.id}"]

    shutting_down = wait_for(lambda: drain_events(sqs, interruptions), lambda found: found != [])
    assert instance_states(shutting_down, instance.id) == ["shutting-down"], shutting_down
    # The machine's states, each once (moto's own launch made none: no API hooks here). Each rule's
    # queue gets the event in turn: the second may not have it yet when the first does.
    delivered = events_until(sqs, everything, lambda found: found != [])
    assert instance_states(delivered, instance.id) == ["shutting-down"], delivered
    machines._set_state(instance, "shutting-down")  # no change: no event
    assert drain_events(sqs, everything) == []
