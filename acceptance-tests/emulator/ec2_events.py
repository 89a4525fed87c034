"""EC2's events on EventBridge: instance state changes and spot interruption warnings.

As EC2 does, every state an instance passes through is put on the default event bus of the
instance's account and region: source ``aws.ec2``, detail-type ``EC2 Instance State-change
Notification``, detail ``{"instance-id": ..., "state": ...}``, the instance's ARN as resource.
moto's EventBridge delivers each to the targets (SQS queues ...) of the rules it matches, in
AWS's envelope (moto's lacks ``account``; :func:`install` adds it, for every event).

- API mode: moto changes a state at once; :func:`install` emits the states EC2 passes through:
  RunInstances (and CreateFleet, through the same backend call) and StartInstances
  ``pending`` then ``running``, StopInstances ``stopping`` then ``stopped``,
  TerminateInstances ``shutting-down`` then ``terminated``. Nothing when the state does not
  change (stopping a stopped instance).
- Boot mode: an instance's state follows its machine, and ``machines._set_state`` emits each
  change as it happens; the API hooks stay quiet (:data:`MACHINES_OWN_STATES`).
- A spot interruption (``MachineManager.interrupt``): ``EC2 Spot Instance Interruption
  Warning`` with ``{"instance-id": ..., "instance-action": "terminate"}`` when the notice
  appears on IMDS, the interruption's delay (two minutes on AWS) before the termination.

Emitting never fails the EC2 call: a region whose default bus has no rule costs nothing, and an
error on the way (a target queue deleted ...) is logged.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from moto.ec2.models.instances import Instance, InstanceBackend
from moto.events.utils import EventTemplateParser
from moto.utilities.utils import get_partition

log = logging.getLogger("emulator.events")

SOURCE = "aws.ec2"
STATE_CHANGE = "EC2 Instance State-change Notification"
SPOT_WARNING = "EC2 Spot Instance Interruption Warning"

# What an API call takes an instance through, on EC2.
LAUNCHED = ("pending", "running")
STOPPED = ("stopping", "stopped")
TERMINATED = ("shutting-down", "terminated")

# The envelope a target receives, as AWS's: moto's leaves out ``account``.
EVENT_ENVELOPE = (
    '{"version": "0", "id": "<id>", "detail-type": "<detail-type>", "source": "<source>", "account": "<account>", '
    '"time": <time>, "region": "<region>", "resources": <resources>, "detail": <detail>}'
)

# Boot mode sets this: the machines emit the states, the API hooks must not emit them again.
MACHINES_OWN_STATES = False


def state_changed(instance: Any, state: str) -> None:
    """Puts ``instance``'s new ``state`` on its region's default event bus."""
    _emit(instance, STATE_CHANGE, {"instance-id": instance.id, "state": state})


def states_passed(instance: Any, previous: str | None, states: tuple[str, ...]) -> None:
    """Emits ``states`` in order, unless the instance already was in the last of them."""
    if previous == states[-1]:
        return
    for state in states:
        state_changed(instance, state)


def interruption_warning(instance: Any) -> None:
    """The spot interruption warning EC2 sends when it will reclaim ``instance``."""
    _emit(instance, SPOT_WARNING, {"instance-id": instance.id, "instance-action": "terminate"})


def _emit(instance: Any, detail_type: str, detail: dict[str, str]) -> None:
    try:
        account, region = instance.ec2_backend.account_id, instance.ec2_backend.region_name
        backend = _events_backend(account, region)
        if backend is None:
            return
        arn = f"arn:{get_partition(region)}:ec2:{region}:{account}:instance/{instance.id}"
        backend.put_events([{
            "Source": SOURCE, "DetailType": detail_type, "Detail": json.dumps(detail), "Resources": [arn],
        }])
    except Exception as err:  # noqa: BLE001 - an event must never fail the EC2 call or the machine
        log.warning("EventBridge: %s of %s: a delivery failed: %s: %s", detail_type, getattr(instance, "id", instance),
                    type(err).__name__, err)


def _events_backend(account: str, region: str) -> Any | None:
    """The region's EventBridge, if its default bus has a rule (read without creating it: moto
    makes a backend on first access, and most regions never see an EventBridge call)."""
    from moto.events.models import events_backends

    regions = dict.get(events_backends, account)
    backend = dict.get(regions, region) if regions is not None else None
    if backend is None:
        return None
    bus = backend.event_buses.get("default")
    return backend if bus is not None and bus.rules else None


# --- moto hooks --------------------------------------------------------------------------------


def install() -> None:
    """Emits the state changes moto makes for the EC2 API (API mode) and gives every event its
    account; call before serving."""
    EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE = EVENT_ENVELOPE
    original_run = InstanceBackend.run_instances
    original_start, original_stop, original_terminate = Instance.start, Instance.stop, Instance.terminate

    def run_instances(self: Any, *args: Any, **kwargs: Any) -> Any:
        reservation = original_run(self, *args, **kwargs)
        if not MACHINES_OWN_STATES:
            for instance in reservation.instances:
                states_passed(instance, None, LAUNCHED)
        return reservation

    def hooked(original: Any, states: tuple[str, ...]) -> Any:
        def change(self: Any) -> Any:
            previous = original(self)
            if not MACHINES_OWN_STATES:
                states_passed(self, getattr(previous, "name", None), states)
            return previous

        return change

    InstanceBackend.run_instances = run_instances  # type: ignore[method-assign]
    Instance.start = hooked(original_start, LAUNCHED)  # type: ignore[method-assign]
    Instance.stop = hooked(original_stop, STOPPED)  # type: ignore[method-assign]
    Instance.terminate = hooked(original_terminate, TERMINATED)  # type: ignore[method-assign]
