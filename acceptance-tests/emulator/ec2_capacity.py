"""On-Demand Capacity Reservations and Capacity Blocks for ML, which moto does not have.

:class:`CapacityActions` is mixed into the emulator's EC2 handler and answers:

- CreateCapacityReservation / DescribeCapacityReservations / CancelCapacityReservation:
  a reservation is a count of one instance type in one Availability Zone, ``open`` or
  ``targeted``, ``active`` from its creation until cancelled or past an ``EndDate``.
- DescribeCapacityBlockOfferings / PurchaseCapacityBlock: an offering is the requested type
  and count for ``CapacityDurationHours`` starting at the start of ``StartDateRange`` (or
  now) in the region's first zone; the purchased block is a reservation of type
  ``capacity-block`` that is ``scheduled`` before its start, ``active`` inside its window
  and ``expired`` after it.

Launches count against a reservation when the launch template targets it by id
(``CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId``), as
EC2 does: :func:`admit` says how many of a request the reservation takes, or why none.
Past its available count the pool fails with ``ReservationCapacityExceeded``; a block
outside its window (or a reservation not ``active``) with ``InsufficientInstanceCapacity``;
a type or zone other than the reservation's with ``InvalidParameterCombination``; a block
launched without the ``capacity-block`` market on both the template and the fleet (or a
reservation with it) likewise.
Instances launched into a reservation hold it until they stop or terminate.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass, field
from typing import Any

from moto.core.base_backend import BackendDict, BaseBackend
from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError

from faults import FaultError

MATCH_CRITERIA = ("open", "targeted")
HOLDING_STATES = ("pending", "running")


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _parse_time(raw: Any) -> datetime.datetime | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, datetime.datetime):
        return raw if raw.tzinfo else raw.replace(tzinfo=datetime.timezone.utc)
    text = str(raw).replace("Z", "+00:00")
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError as err:
        raise EC2ClientError("InvalidParameterValue", f"Invalid date {raw!r}") from err
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)


@dataclass
class Reservation:
    id: str
    arn: str
    owner: str
    instance_type: str
    zone: str
    count: int
    platform: str
    match: str
    kind: str  # "default" or "capacity-block"
    created: datetime.datetime
    start: datetime.datetime
    end: datetime.datetime | None
    tags: dict[str, str] = field(default_factory=dict)
    cancelled: bool = False
    holders: set[str] = field(default_factory=set)

    def state(self, now: datetime.datetime) -> str:
        if self.cancelled:
            return "cancelled"
        if now < self.start:
            return "scheduled"
        if self.end is not None and now >= self.end:
            return "expired"
        return "active"

    def used(self, backend: Any) -> int:
        live = 0
        for instance_id in list(self.holders):
            try:
                instance = backend.get_instance(instance_id)
            except Exception:  # noqa: BLE001 -- moto forgets terminated instances eventually
                self.holders.discard(instance_id)
                continue
            if instance.state in HOLDING_STATES:
                live += 1
        return live

    def render(self, backend: Any, now: datetime.datetime) -> dict[str, Any]:
        state = self.state(now)
        available = max(self.count - self.used(backend), 0) if state == "active" else 0
        rendered: dict[str, Any] = {
            "CapacityReservationId": self.id,
            "OwnerId": self.owner,
            "CapacityReservationArn": self.arn,
            "InstanceType": self.instance_type,
            "InstancePlatform": self.platform,
            "AvailabilityZone": self.zone,
            "Tenancy": "default",
            "TotalInstanceCount": self.count,
            "AvailableInstanceCount": available,
            "EbsOptimized": False,
            "EphemeralStorage": False,
            "State": state,
            "StartDate": self.start,
            "EndDateType": "limited" if self.end is not None else "unlimited",
            "InstanceMatchCriteria": self.match,
            "CreateDate": self.created,
            "ReservationType": self.kind,
            "Tags": [{"Key": k, "Value": v} for k, v in self.tags.items()],
        }
        if self.end is not None:
            rendered["EndDate"] = self.end
        return rendered


@dataclass
class Offering:
    id: str
    instance_type: str
    zone: str
    count: int
    start: datetime.datetime
    hours: int

    @property
    def end(self) -> datetime.datetime:
        return self.start + datetime.timedelta(hours=self.hours)

    def render(self) -> dict[str, Any]:
        return {
            "CapacityBlockOfferingId": self.id,
            "InstanceType": self.instance_type,
            "AvailabilityZone": self.zone,
            "InstanceCount": self.count,
            "StartDate": self.start,
            "EndDate": self.end,
            "CapacityBlockDurationHours": self.hours,
            "UpfrontFee": "0.00",
            "CurrencyCode": "USD",
            "Tenancy": "default",
        }


class CapacityBackend(BaseBackend):
    """Reservations and block offerings of one account in one region (reset with moto)."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.reservations: dict[str, Reservation] = {}
        self.offerings: dict[str, Offering] = {}

    def get(self, reservation_id: str) -> Reservation:
        if reservation_id not in self.reservations:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{reservation_id}' does not exist",
            )
        return self.reservations[reservation_id]

    def add(self, **kwargs: Any) -> Reservation:
        reservation_id = f"cr-{uuid.uuid4().hex[:17]}"
        reservation = Reservation(
            id=reservation_id,
            arn=f"arn:aws:ec2:{self.region_name}:{self.account_id}:capacity-reservation/{reservation_id}",
            owner=self.account_id,
            created=_now(),
            **kwargs,
        )
        self.reservations[reservation_id] = reservation
        return reservation


capacity_backends = BackendDict(CapacityBackend, "ec2")


def target_of(template_data: dict[str, Any]) -> str | None:
    """The reservation id a launch template targets, if any."""
    spec = template_data.get("CapacityReservationSpecification") or {}
    return (spec.get("CapacityReservationTarget") or {}).get("CapacityReservationId")


def admit(
    backend: Any, capacity: CapacityBackend, template_data: dict[str, Any], instance_type: str, zone: str,
    market: str, count: int,
) -> tuple[int, Reservation | None, FaultError | None]:
    """How many of ``count`` may launch, into which reservation, and the error for the rest."""
    template_market = (template_data.get("InstanceMarketOptions") or {}).get("MarketType")
    target = target_of(template_data)
    if target is None:
        if "capacity-block" in (market, template_market):
            return 0, None, FaultError(
                "InvalidParameterCombination", "The capacity-block market needs a targeted Capacity Block.", 400
            )
        return count, None, None
    try:
        reservation = capacity.get(target)
    except EC2ClientError as err:
        return 0, None, FaultError(err.code, err.message, 400)
    if reservation.kind == "capacity-block" and (market, template_market) != ("capacity-block", "capacity-block"):
        return 0, reservation, FaultError(
            "InvalidParameterCombination",
            f"Capacity Block {target} takes launches with the capacity-block market type on the launch template "
            f"and as the fleet's DefaultTargetCapacityType (got {template_market or 'none'} and {market}).",
            400,
        )
    if reservation.kind != "capacity-block" and "capacity-block" in (market, template_market):
        return 0, reservation, FaultError(
            "InvalidParameterCombination",
            f"Capacity reservation {target} is not a Capacity Block: launch it on-demand.",
            400,
        )
    if reservation.instance_type != instance_type or reservation.zone != zone:
        return 0, reservation, FaultError(
            "InvalidParameterCombination",
            f"Capacity reservation {target} is for {reservation.instance_type} in {reservation.zone}, "
            f"not {instance_type} in {zone}.",
            400,
        )
    state = reservation.state(_now())
    if state != "active":
        return 0, reservation, FaultError(
            "InsufficientInstanceCapacity",
            f"Capacity reservation {target} is {state}"
            + (f" (starts {reservation.start.isoformat()})." if state == "scheduled" else "."),
            500,
        )
    available = max(reservation.count - reservation.used(backend), 0)
    granted = min(count, available)
    if granted < count:
        return granted, reservation, FaultError(
            "ReservationCapacityExceeded",
            f"Capacity reservation {target} has {available} of {reservation.count} instances available; "
            f"{count} were requested.",
            400,
        )
    return granted, reservation, None


class CapacityActions:
    """EC2 actions for capacity reservations and blocks; mixed into the EC2 handler."""

    @property
    def capacity(self) -> CapacityBackend:
        return capacity_backends[self.current_account][self.region]  # type: ignore[attr-defined]

    def _reservation_tags(self) -> dict[str, str]:
        return self._parse_tag_specification().get("capacity-reservation", {})  # type: ignore[attr-defined]

    def create_capacity_reservation(self) -> ActionResult:
        get = self._get_param  # type: ignore[attr-defined]
        instance_type, zone = get("InstanceType"), get("AvailabilityZone")
        count = self._get_int_param("InstanceCount")  # type: ignore[attr-defined]
        if not instance_type or not zone or count is None:
            raise EC2ClientError("MissingParameter", "InstanceType, AvailabilityZone and InstanceCount are required")
        if count < 1:
            raise EC2ClientError("InvalidParameterValue", "InstanceCount must be at least 1")
        zones = {z.name for z in self.ec2_backend.describe_availability_zones()}  # type: ignore[attr-defined]
        if zone not in zones:
            raise EC2ClientError("InvalidParameterValue", f"Invalid availability zone: [{zone}]")
        match = get("InstanceMatchCriteria") or "open"
        if match not in MATCH_CRITERIA:
            raise EC2ClientError("InvalidParameterValue", f"InstanceMatchCriteria must be one of {MATCH_CRITERIA}")
        end = _parse_time(get("EndDate")) if get("EndDateType") == "limited" else None
        self.error_on_dryrun()  # type: ignore[attr-defined]
        reservation = self.capacity.add(
            instance_type=instance_type, zone=zone, count=count, platform=get("InstancePlatform") or "Linux/UNIX",
            match=match, kind="default", start=_now(), end=end, tags=self._reservation_tags(),
        )
        return ActionResult({"CapacityReservation": reservation.render(self.ec2_backend, _now())})  # type: ignore[attr-defined]

    def describe_capacity_reservations(self) -> ActionResult:
        self.error_on_dryrun()  # type: ignore[attr-defined]
        ids = self._get_param("CapacityReservationIds", [])  # type: ignore[attr-defined]
        chosen = [self.capacity.get(i) for i in ids] if ids else list(self.capacity.reservations.values())
        now = _now()
        rendered = [r.render(self.ec2_backend, now) for r in chosen]  # type: ignore[attr-defined]
        for name, wanted in self._filters_from_querystring().items():  # type: ignore[attr-defined]
            key = {"instance-type": "InstanceType", "availability-zone": "AvailabilityZone", "state": "State",
                   "reservation-type": "ReservationType"}.get(name)
            if name.startswith("tag:"):
                tag = name[len("tag:"):]
                rendered = [r for r in rendered if any(t["Key"] == tag and t["Value"] in wanted for t in r["Tags"])]
            elif key is None:
                raise EC2ClientError("InvalidParameterValue", f"The filter '{name}' is invalid")
            else:
                rendered = [r for r in rendered if r[key] in wanted]
        return ActionResult({"CapacityReservations": rendered})

    def cancel_capacity_reservation(self) -> ActionResult:
        reservation = self.capacity.get(self._get_param("CapacityReservationId"))  # type: ignore[attr-defined]
        self.error_on_dryrun()  # type: ignore[attr-defined]
        if reservation.kind == "capacity-block":
            raise EC2ClientError("InvalidParameterValue", "A Capacity Block cannot be cancelled.")
        reservation.cancelled = True
        return ActionResult({"Return": True})

    def describe_capacity_block_offerings(self) -> ActionResult:
        get = self._get_param  # type: ignore[attr-defined]
        instance_type = get("InstanceType")
        count = self._get_int_param("InstanceCount") or 1  # type: ignore[attr-defined]
        hours = self._get_int_param("CapacityDurationHours")  # type: ignore[attr-defined]
        if not instance_type or hours is None:
            raise EC2ClientError("MissingParameter", "InstanceType and CapacityDurationHours are required")
        if not 1 <= hours <= 24 * 182:
            raise EC2ClientError("InvalidParameterValue", "CapacityDurationHours must be 1..4368")
        self.error_on_dryrun()  # type: ignore[attr-defined]
        start = max(_parse_time(get("StartDateRange")) or _now(), _now())
        zone = sorted(z.name for z in self.ec2_backend.describe_availability_zones())[0]  # type: ignore[attr-defined]
        offering = Offering(
            id=f"cb-{uuid.uuid4().hex[:17]}", instance_type=instance_type, zone=zone, count=count, start=start,
            hours=hours,
        )
        self.capacity.offerings[offering.id] = offering
        return ActionResult({"CapacityBlockOfferings": [offering.render()]})

    def purchase_capacity_block(self) -> ActionResult:
        offering_id = self._get_param("CapacityBlockOfferingId")  # type: ignore[attr-defined]
        offering = self.capacity.offerings.get(offering_id)
        if offering is None:
            raise EC2ClientError(
                "InvalidCapacityBlockOfferingId.NotFound", f"The capacity block offering '{offering_id}' does not exist"
            )
        self.error_on_dryrun()  # type: ignore[attr-defined]
        del self.capacity.offerings[offering_id]
        reservation = self.capacity.add(
            instance_type=offering.instance_type, zone=offering.zone, count=offering.count,
            platform=self._get_param("InstancePlatform") or "Linux/UNIX",  # type: ignore[attr-defined]
            match="targeted", kind="capacity-block", start=offering.start, end=offering.end,
            tags=self._reservation_tags(),
        )
        return ActionResult({"CapacityReservation": reservation.render(self.ec2_backend, _now())})  # type: ignore[attr-defined]
