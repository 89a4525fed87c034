"""EC2 gaps filled on top of moto: placement groups, instant fleets, launch faults.

``install`` routes moto's EC2 endpoint to :class:`EmulatorEC2Response`, a subclass of
moto's EC2 handler that adds or replaces these actions:

- CreatePlacementGroup / DescribePlacementGroups / DeletePlacementGroup (moto has none).
- CreateFleet of type ``instant``: tries every launch template override as a capacity
  pool in priority order, reports pools that fault rules fail (InsufficientInstanceCapacity
  ...) in the 200 response's ``Errors`` list, launches the target from the first pool left,
  and keeps the launch template's network interfaces (EFA), instance profile and
  placement group on the instances.
- Launch templates that target a capacity reservation or Capacity Block launch into it, up
  to what it has available and only inside its window: see ``ec2_capacity``.
- RunInstances: fault rules with ``match`` fail it as a whole, as EC2 does.
- RunInstances and CreateFleet honour ``ClientToken``: a repeated token answers the first call's
  answer without launching again (another call's parameters: ``IdempotentParameterMismatch``).
- EC2's launch rate: RunInstances and instant fleets take the instances they launch from a
  token bucket per account and region (``launch_bucket_size``, refilled at
  ``launch_refill_per_s``: 1,000 and 2 a second, as EC2's); a call asking for more than the
  bucket holds fails whole with ``RequestLimitExceeded`` (503).
- CreateLaunchTemplateVersion with SourceVersion: the new version inherits the source data.
- Image and snapshot actions (RegisterImage, CreateImage, CopyImage, DeregisterImage,
  DeleteSnapshot, snapshot and image attributes): see ``ec2_images``.
- VPC peering connections (filters, deletion rules) and routes through them (checks, blackhole
  state): see ``ec2_peering``.
"""

from __future__ import annotations

import copy
import datetime
import json
import math
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import moto.ec2.urls
from moto.core.base_backend import BackendDict, BaseBackend
from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.responses import EC2Response

import ec2_peering
from config import CONFIG
from ec2_capacity import CapacityActions, admit
from ec2_images import ImageActions
from faults import FAULTS, PROTOCOL_EC2, FaultError, Outcome, render_error

PLACEMENT_STRATEGIES = ("cluster", "spread", "partition")
SPREAD_LEVELS = ("host", "rack")
MAX_PARTITIONS = 7


@dataclass
class PlacementGroup:
    name: str
    group_id: str
    strategy: str
    arn: str
    tags: dict[str, str]
    partition_count: int | None = None
    spread_level: str | None = None

    def render(self) -> dict[str, Any]:
        rendered: dict[str, Any] = {
            "GroupName": self.name,
            "State": "available",
            "Strategy": self.strategy,
            "GroupId": self.group_id,
            "Tags": [{"Key": k, "Value": v} for k, v in self.tags.items()],
            "GroupArn": self.arn,
        }
        if self.partition_count is not None:
            rendered["PartitionCount"] = self.partition_count
        if self.spread_level is not None:
            rendered["SpreadLevel"] = self.spread_level
        return rendered

    def matches(self, filters: dict[str, Any]) -> bool:
        values = {
            "group-name": self.name,
            "group-arn": self.arn,
            "strategy": self.strategy,
            "state": "available",
            "spread-level": self.spread_level,
        }
        for name, wanted in filters.items():
            if name.startswith("tag:"):
                actual = self.tags.get(name[len("tag:") :])
            elif name == "tag-key":
                if not set(wanted) & set(self.tags):
                    return False
                continue
            elif name in values:
                actual = values[name]
            else:
                raise EC2ClientError("InvalidParameterValue", f"The filter '{name}' is invalid")
            if actual not in wanted:
                return False
        return True


class PlacementGroupBackend(BaseBackend):
    """Placement groups of one account in one region (reset together with moto)."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.groups: dict[str, PlacementGroup] = {}

    def get(self, name: str) -> PlacementGroup:
        if name not in self.groups:
            raise EC2ClientError("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")
        return self.groups[name]


placement_group_backends = BackendDict(PlacementGroupBackend, "ec2")


class LaunchBucket(BaseBackend):
    """EC2's instance launch rate of one account in one region: a token bucket of
    ``launch_bucket_size`` instances refilled at ``launch_refill_per_s`` (reset with moto)."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.tokens: float | None = None
        self.at = time.monotonic()

    def _refill(self) -> float:
        settings = CONFIG.snapshot()
        now = time.monotonic()
        if self.tokens is None:
            self.tokens = settings.launch_bucket_size
        self.tokens = min(settings.launch_bucket_size, self.tokens + (now - self.at) * settings.launch_refill_per_s)
        self.at = now
        return self.tokens

    def has(self, count: int) -> bool:
        """Whether a launch of ``count`` instances fits the bucket now."""
        return count <= self._refill()

    def spend(self, count: int) -> None:
        """Takes what a launch launched (a pool without capacity launches nothing)."""
        self.tokens = self._refill() - count


launch_buckets = BackendDict(LaunchBucket, "ec2")


class ClientTokens(BaseBackend):
    """The launches of one account and region by client token. EC2 answers a RunInstances or
    CreateFleet that repeats a token (a retry after a lost answer) with the first call's answer
    instead of launching again, and refuses the token with other parameters (EC2 API reference,
    "Ensuring idempotency"); moto ignored the token and launched twice."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.answers: dict[str, tuple[str, Any]] = {}
        self.lock = threading.Lock()


client_tokens = BackendDict(ClientTokens, "ec2")
TOKEN_MISMATCH = FaultError(
    "IdempotentParameterMismatch",
    "The client token you have provided is associated with a resource that is already deleted or "
    "with a request whose parameters differ. Use a different client token.",
    400,
)
TOKEN_TOO_LONG = FaultError(
    "InvalidParameterValue", "The value of ClientToken is longer than 64 characters.", 400
)
# One launch at a time past the faults: a bucket's check and spend, and the capacity and
# reservations a launch takes, are one step as in EC2, whatever calls are in flight together.
LAUNCHING = threading.Lock()
RATE_EXCEEDED = FaultError("RequestLimitExceeded", "Request limit exceeded.", 503)


@dataclass
class CapacityPool:
    """One launch template override: where and what the fleet may launch."""

    spec: dict[str, Any]
    overrides: dict[str, Any]
    data: dict[str, Any]
    instance_type: str
    image_id: str
    subnet_id: str | None
    availability_zone: str
    placement_group: str | None
    weight: float
    priority: float

    def described(self) -> dict[str, Any]:
        described: dict[str, Any] = {"LaunchTemplateSpecification": self.spec}
        if self.overrides:
            described["Overrides"] = self.overrides
        return described

    def fault_attributes(self, market: str) -> dict[str, str]:
        return {
            "AvailabilityZone": self.availability_zone,
            "InstanceType": self.instance_type,
            "SubnetId": self.subnet_id or "",
            "Lifecycle": market,
        }


class EmulatorEC2Response(CapacityActions, ImageActions, ec2_peering.PeeringActions, EC2Response):
    """moto's EC2 handler with the actions listed in the module docstring added or replaced."""

    @property
    def placement_groups(self) -> PlacementGroupBackend:
        return placement_group_backends[self.current_account][self.region]

    # --- placement groups -----------------------------------------------------------------------

    def create_placement_group(self) -> ActionResult:
        name = self._get_param("GroupName")
        strategy = self._get_param("Strategy")
        if not name:
            raise EC2ClientError("MissingParameter", "The request must contain the parameter groupName")
        if strategy not in PLACEMENT_STRATEGIES:
            raise EC2ClientError(
                "InvalidParameterValue",
                f"Value ({strategy}) for parameter strategy is invalid. "
                f"Valid values: {', '.join(PLACEMENT_STRATEGIES)}",
            )
        partition_count = self._get_int_param("PartitionCount")
        if partition_count is not None and (strategy != "partition" or not 1 <= partition_count <= MAX_PARTITIONS):
            raise EC2ClientError(
                "InvalidParameterValue", f"PartitionCount must be 1..{MAX_PARTITIONS} and needs the partition strategy"
            )
        spread_level = self._get_param("SpreadLevel")
        if spread_level is not None and (strategy != "spread" or spread_level not in SPREAD_LEVELS):
            raise EC2ClientError(
                "InvalidParameterValue", "SpreadLevel must be host or rack and needs the spread strategy"
            )
        self.error_on_dryrun()
        if name in self.placement_groups.groups:
            raise EC2ClientError("InvalidPlacementGroup.Duplicate", f"The Placement Group '{name}' already exists.")
        group_id = f"pg-{uuid.uuid4().hex[:17]}"
        group = PlacementGroup(
            name=name,
            group_id=group_id,
            strategy=strategy,
            arn=f"arn:aws:ec2:{self.region}:{self.current_account}:placement-group/{name}",
            tags=self._parse_tag_specification().get("placement-group", {}),
            partition_count=(partition_count or 2) if strategy == "partition" else None,
            spread_level=(spread_level or "rack") if strategy == "spread" else None,
        )
        self.placement_groups.groups[name] = group
        return ActionResult({"PlacementGroup": group.render()})

    def describe_placement_groups(self) -> ActionResult:
        self.error_on_dryrun()
        names = self._get_param("GroupNames", [])
        ids = self._get_param("GroupIds", [])
        groups = (
            [self.placement_groups.get(name) for name in names]
            if names
            else list(self.placement_groups.groups.values())
        )
        if ids:
            by_id = {group.group_id: group for group in groups}
            missing = [group_id for group_id in ids if group_id not in by_id]
            if missing:
                raise EC2ClientError(
                    "InvalidPlacementGroupId.NotFound", f"The Placement Group ID '{missing[0]}' is unknown."
                )
            groups = [by_id[group_id] for group_id in ids]
        filters = self._filters_from_querystring()
        return ActionResult({"PlacementGroups": [group.render() for group in groups if group.matches(filters)]})

    def delete_placement_group(self) -> ActionResult:
        name = self._get_param("GroupName")
        group = self.placement_groups.get(name)
        self.error_on_dryrun()
        in_use = any(
            instance.placement.group_name == group.name and instance.state != "terminated"
            for instance in self.ec2_backend.all_instances()
        )
        if in_use:
            raise EC2ClientError(
                "InvalidPlacementGroup.InUse", f"The placement group '{name}' is in use and may not be deleted."
            )
        del self.placement_groups.groups[name]
        return ActionResult({})

    # --- launches -------------------------------------------------------------------------------

    def run_instances(self) -> Any:
        return self._once_per_client_token(self._run_instances)

    def _run_instances(self) -> Any:
        error = _fault(FAULTS.evaluate("ec2", "RunInstances", self._run_instances_attributes()))
        if error is not None:
            return _error_response(error)
        count = self._get_int_param("MaxCount") or 1
        if self._dry_run():
            return super().run_instances()
        with LAUNCHING:
            if not self._launch_bucket.has(count):
                return _error_response(RATE_EXCEEDED)
            answer = super().run_instances()
            self._launch_bucket.spend(count)
        return answer

    @property
    def _launch_bucket(self) -> LaunchBucket:
        return launch_buckets[self.current_account][self.region]

    def _dry_run(self) -> bool:
        return str(self._get_param("DryRun", "false")).lower() == "true"

    def _run_instances_attributes(self) -> dict[str, str]:
        template_data: dict[str, Any] = {}
        template_arg = self._get_param("LaunchTemplate", {})
        if template_arg:
            template_data = self.ec2_backend._get_template_from_args(template_arg).data
        nics = self._get_param("NetworkInterfaces", []) or template_data.get("NetworkInterfaces", [])
        primary: dict[str, Any] = next((nic for nic in nics if int(nic.get("DeviceIndex", 0)) == 0), {})
        subnet_id = self._get_param("SubnetId") or primary.get("SubnetId")
        if subnet_id:
            zone = self.ec2_backend.get_subnet(subnet_id).availability_zone
        else:
            placement = template_data.get("Placement", {})
            zone = self._get_param("Placement.AvailabilityZone") or placement.get("AvailabilityZone")
        market = self._get_param("InstanceMarketOptions.MarketType") or template_data.get(
            "InstanceMarketOptions", {}
        ).get("MarketType")
        return {
            "InstanceType": self._get_param("InstanceType") or template_data.get("InstanceType") or "m1.small",
            "SubnetId": subnet_id or "",
            "AvailabilityZone": zone or f"{self.region}a",
            "Lifecycle": "spot" if market == "spot" else "on-demand",
        }

    def _once_per_client_token(self, launch: Any) -> Any:
        """``launch()``, or the answer of the earlier launch with this call's ClientToken."""
        token = self._get_param("ClientToken")
        if not token or self._dry_run():
            return launch()
        if len(token) > 64:
            return _error_response(TOKEN_TOO_LONG)
        asked = json.dumps(sorted((k, v) for k, v in self.querystring.items() if k != "ClientToken"))
        tokens = client_tokens[self.current_account][self.region]
        with tokens.lock:
            if token in tokens.answers:
                first_asked, answer = tokens.answers[token]
                return answer if first_asked == asked else _error_response(TOKEN_MISMATCH)
            answer = launch()
            if isinstance(answer, ActionResult):
                tokens.answers[token] = (asked, answer)
            return answer

    def create_fleet(self) -> Any:
        return self._once_per_client_token(self._create_fleet)

    def _create_fleet(self) -> Any:
        if self._get_param("Type") != "instant":
            return super().create_fleet()
        self.error_on_dryrun()
        configs = self._get_param("LaunchTemplateConfigs", [])
        pools = sorted(
            (pool for config in configs for pool in self._capacity_pools(config)), key=lambda pool: pool.priority
        )
        target = self._get_param("TargetCapacitySpecification", {})
        demand = _capacity_by_market(target)
        with LAUNCHING:
            if not self._launch_bucket.has(math.ceil(sum(demand.values()))):
                return _error_response(RATE_EXCEEDED)
            tag_spec = self._get_param("TagSpecifications", [])
            instance_tags = _tags_for(tag_spec, "instance")

            fleet = self.ec2_backend.create_fleet(
                on_demand_options=self._get_param("OnDemandOptions", {}),
                spot_options=self._get_param("SpotOptions", {}),
                # An empty shell: moto's own launch logic must not run; the fleet is filled in below.
                target_capacity_specification={"TotalTargetCapacity": 0},
                launch_template_configs=[],
                excess_capacity_termination_policy=None,
                replace_unhealthy_instances=False,
                terminate_instances_with_expiration=True,
                fleet_type="instant",
                valid_from=None,
                valid_until=None,
                tag_specifications=[spec for spec in tag_spec if spec.get("ResourceType") == "fleet"],
            )
            errors: list[dict[str, Any]] = []
            launched: list[dict[str, Any]] = []
            for market, capacity in demand.items():
                market_errors, market_launched = self._fulfil(fleet, pools, market, capacity, instance_tags)
                errors += market_errors
                launched += market_launched
            self._launch_bucket.spend(sum(len(group["InstanceIds"]) for group in launched))
        fleet.target_capacity = int(target.get("TotalTargetCapacity", 0))
        fleet.on_demand_target_capacity = int(demand["on-demand"])
        fleet.spot_target_capacity = int(demand["spot"])
        fleet.target_capacity_specification = target
        fleet.launch_template_configs = configs
        return ActionResult({"FleetId": fleet.id, "Errors": errors, "Instances": launched})

    def _fulfil(
        self, fleet: Any, pools: list[CapacityPool], market: str, capacity: float, tags: dict[str, str]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Walks the pools in order until ``capacity`` of ``market`` is launched; returns (errors, instances)."""
        errors: list[dict[str, Any]] = []
        launched: list[dict[str, Any]] = []
        remaining = capacity
        for pool in pools:
            if remaining <= 0:
                break
            wanted = math.ceil(remaining / pool.weight)
            count, error = self._pool_allowance(pool, market, wanted)
            if error is not None:
                errors.append(self._pool_failure(pool, market, error.code, error.message))
            if count == 0:
                continue
            count, reservation, refusal = admit(
                self.ec2_backend, self.capacity, pool.data, pool.instance_type, pool.availability_zone, market, count
            )
            if refusal is not None:
                errors.append(self._pool_failure(pool, market, refusal.code, refusal.message))
            if count == 0:
                continue
            try:
                instances = self._launch(pool, count, market, fleet.id, tags)
            except EC2ClientError as err:
                if err.code != "InsufficientInstanceCapacity":  # boot mode: past the machine budget
                    raise
                errors.append(self._pool_failure(pool, market, err.code, err.message))
                continue
            if reservation is not None:
                reservation.holders.update(instance.id for instance in instances)
            # moto's fleet keeps spot and on-demand instances alike here for Describe/DeleteFleets.
            fleet.on_demand_instances += [{"id": i.id, "instance": i, "launch_spec": None} for i in instances]
            fleet.fulfilled_capacity += count * pool.weight
            remaining -= count * pool.weight
            launched.append(
                {
                    "LaunchTemplateAndOverrides": pool.described(),
                    "Lifecycle": market,
                    "InstanceIds": [instance.id for instance in instances],
                    "InstanceType": pool.instance_type,
                }
            )
        return errors, launched

    @staticmethod
    def _pool_failure(pool: CapacityPool, market: str, code: str, message: str) -> dict[str, Any]:
        return {
            "LaunchTemplateAndOverrides": pool.described(),
            "Lifecycle": market,
            "ErrorCode": code,
            "ErrorMessage": message,
        }

    def _capacity_pools(self, config: dict[str, Any]) -> list[CapacityPool]:
        spec = config.get("LaunchTemplateSpecification", {})
        if spec.get("LaunchTemplateId"):
            template = self.ec2_backend.get_launch_template(spec["LaunchTemplateId"])
        else:
            template = self.ec2_backend.get_launch_template_by_name(spec.get("LaunchTemplateName"))
        version = template.get_version(spec.get("Version", "$Default"))
        data = version.data
        described_spec = {
            "LaunchTemplateId": template.id,
            "LaunchTemplateName": template.name,
            "Version": str(version.number),
        }
        primary_nic: dict[str, Any] = next(
            (n for n in data.get("NetworkInterfaces", []) if int(n.get("DeviceIndex", 0)) == 0), {}
        )
        pools = []
        for position, raw in enumerate(config.get("Overrides") or [{}]):
            overrides = _normalized_overrides(raw)
            subnet_id = overrides.get("SubnetId") or primary_nic.get("SubnetId")
            zone = overrides.get("AvailabilityZone") or data.get("Placement", {}).get("AvailabilityZone")
            if subnet_id:
                zone = self.ec2_backend.get_subnet(subnet_id).availability_zone
            pools.append(
                CapacityPool(
                    spec=described_spec,
                    overrides=overrides,
                    data=data,
                    instance_type=overrides.get("InstanceType") or data.get("InstanceType") or "m1.small",
                    image_id=overrides.get("ImageId") or data.get("ImageId"),
                    subnet_id=subnet_id,
                    availability_zone=zone or f"{self.region}a",
                    placement_group=(overrides.get("Placement") or data.get("Placement") or {}).get("GroupName"),
                    weight=overrides.get("WeightedCapacity") or 1.0,
                    # Overrides without a priority come after prioritized ones, in request order.
                    priority=overrides.get("Priority", math.inf) + position * 1e-9,
                )
            )
        return pools

    def _pool_allowance(self, pool: CapacityPool, market: str, wanted: int) -> tuple[int, FaultError | None]:
        """How many of ``wanted`` the pool may launch (fault rules), and the error for the rest."""
        if pool.placement_group and pool.placement_group not in self.placement_groups.groups:
            return 0, FaultError(
                "InvalidPlacementGroup.Unknown", f"The Placement Group '{pool.placement_group}' is unknown.", 400
            )
        granted, outcome = FAULTS.evaluate_launch("ec2", "CreateFleet", pool.fault_attributes(market), wanted)
        return granted, _fault(outcome)

    def _launch(self, pool: CapacityPool, count: int, market: str, fleet_id: str, tags: dict[str, str]) -> list[Any]:
        data = pool.data
        nics = copy.deepcopy(data.get("NetworkInterfaces", []))
        kwargs: dict[str, Any] = {
            "instance_type": pool.instance_type,
            "is_instance_type_default": False,
            "region_name": self.region,
            "key_name": pool.overrides.get("KeyName") or data.get("KeyName"),
            "launch_template": {"LaunchTemplateId": pool.spec["LaunchTemplateId"], "Version": pool.spec["Version"]},
            "fleet_id": fleet_id,
            "metadata_options": data.get("MetadataOptions", {}),
            "ebs_optimized": data.get("EbsOptimized", False),
            "tags": {"instance": tags},
        }
        if market == "spot":
            kwargs["instance_market_options"] = {"MarketType": "spot"}
        if nics:
            for nic in nics:
                if int(nic.get("DeviceIndex", 0)) == 0 and pool.subnet_id:
                    nic["SubnetId"] = pool.subnet_id
            kwargs["nics"] = nics
        else:
            kwargs["subnet_id"] = pool.subnet_id
            kwargs["placement"] = None if pool.subnet_id else pool.availability_zone
            kwargs["security_group_ids"] = data.get("SecurityGroupIds", [])
        reservation = self.ec2_backend.run_instances(
            pool.image_id, count, None, data.get("SecurityGroups", []), **kwargs
        )

        interface_types = {int(nic.get("DeviceIndex", 0)): nic.get("InterfaceType", "interface") for nic in nics}
        profile = pool.overrides.get("IamInstanceProfile") or data.get("IamInstanceProfile") or {}
        for instance in reservation.instances:
            if market == "spot":
                instance.instance_lifecycle = "spot"  # DescribeInstances' InstanceLifecycle
            for index, nic in instance.nics.items():
                nic.interface_type = interface_types.get(index, "interface")
            if pool.placement_group:
                instance.placement.group_name = pool.placement_group
            if profile:
                self.ec2_backend.associate_iam_instance_profile(
                    instance_id=instance.id,
                    iam_instance_profile_name=profile.get("Name"),
                    iam_instance_profile_arn=profile.get("Arn"),
                )
        return reservation.instances

    def get_console_output(self) -> Any:
        """Boot mode: the machine's own console (base64, as EC2 sends it); else moto's."""
        import boot

        instance_id = self._get_param("InstanceId")
        output = boot.console_output(instance_id) if boot.MANAGER else None
        if output is None:
            return super().get_console_output()
        self.ec2_backend.get_instance(instance_id)
        return ActionResult(
            {"InstanceId": instance_id, "Timestamp": datetime.datetime.now(datetime.timezone.utc), "Output": output}
        )

    # --- launch templates -----------------------------------------------------------------------

    def delete_launch_template(self) -> Any:
        """moto answers MissingParameter for a template that does not exist; EC2 says NotFound."""
        name, template_id = self._get_param("LaunchTemplateName"), self._get_param("LaunchTemplateId")
        backend = self.ec2_backend
        if name and name not in backend.launch_template_name_to_ids:
            return _error_response(FaultError(
                "InvalidLaunchTemplateName.NotFoundException",
                "At least one of the launch templates specified in the request does not exist.",
                400,
            ))
        if template_id and template_id not in backend.launch_templates:
            return _error_response(FaultError(
                "InvalidLaunchTemplateId.NotFound",
                f"The specified launch template, with template ID {template_id}, does not exist.",
                400,
            ))
        return super().delete_launch_template()

    def create_launch_template_version(self) -> ActionResult:
        source = self._get_param("SourceVersion")
        if source is None:
            return super().create_launch_template_version()
        name, template_id = self._get_param("LaunchTemplateName"), self._get_param("LaunchTemplateId")
        template = (
            self.ec2_backend.get_launch_template(template_id)
            if template_id
            else self.ec2_backend.get_launch_template_by_name(name)
        )
        data = copy.deepcopy(template.get_version(source).data)
        data.update(self._get_param("LaunchTemplateData", {}))
        self.error_on_dryrun()
        version = template.create_version(data, self._get_param("VersionDescription"))
        return ActionResult(
            {
                "LaunchTemplateVersion": {
                    "CreateTime": version.create_time,
                    "CreatedBy": f"arn:{self.partition}:iam::{self.current_account}:root",
                    "DefaultVersion": template.is_default(version),
                    "LaunchTemplateData": version.data,
                    "LaunchTemplateId": template.id,
                    "LaunchTemplateName": template.name,
                    "VersionDescription": version.description,
                    "VersionNumber": version.number,
                }
            }
        )


def _fault(outcome: Outcome) -> FaultError | None:
    """Serves the outcome's delay and returns its error, if any."""
    if outcome.latency_s:
        time.sleep(outcome.latency_s)
    return outcome.error


def _error_response(error: FaultError) -> tuple[str, dict[str, Any]]:
    status, headers, body = render_error(PROTOCOL_EC2, error)
    response_headers: dict[str, Any] = {k: v for k, v in headers if k != "Content-Length"}
    response_headers["status"] = status
    return body.decode("utf-8"), response_headers


def _normalized_overrides(raw: dict[str, Any]) -> dict[str, Any]:
    """Overrides as given, with the numeric members the query protocol sends as text made numbers."""
    overrides = dict(raw)
    for key in ("WeightedCapacity", "Priority"):
        if key in overrides:
            overrides[key] = float(overrides[key])
    return overrides


def _capacity_by_market(target: dict[str, Any]) -> dict[str, float]:
    total = float(target.get("TotalTargetCapacity", 0))
    on_demand = float(target.get("OnDemandTargetCapacity") or 0)
    spot = float(target.get("SpotTargetCapacity") or 0)
    remainder = max(total - on_demand - spot, 0.0)
    block = 0.0
    if target.get("DefaultTargetCapacityType") == "spot":
        spot += remainder
    elif target.get("DefaultTargetCapacityType") == "capacity-block":
        block = remainder
    else:
        on_demand += remainder
    return {"on-demand": on_demand, "spot": spot, "capacity-block": block}


def _tags_for(tag_specifications: list[dict[str, Any]], resource_type: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for spec in tag_specifications:
        if spec.get("ResourceType") == resource_type:
            tags.update({tag["Key"]: tag.get("Value", "") for tag in spec.get("Tags", [])})
    return tags


def install() -> None:
    """Routes moto's EC2 endpoint to :class:`EmulatorEC2Response`; call before serving."""
    moto.ec2.urls.url_paths["{0}/"] = EmulatorEC2Response.dispatch
    ec2_peering.install()
