"""VPC peering connections and the routes through them, where moto falls short of EC2.

moto keeps a peering connection (cross-region ones in both regions' backends, as one object)
and lets a route target it; :class:`PeeringActions`, mixed into the emulator's EC2 handler,
adds what EC2 does beyond that:

- DescribeVpcPeeringConnections honours its filters (``requester-vpc-info.*``,
  ``accepter-vpc-info.*`` with ``vpc-id``, ``cidr-block``, ``owner-id``; ``status-code``,
  ``status-message``, ``vpc-peering-connection-id``, ``tag:<key>``, ``tag-key``; values with
  ``*`` and ``?`` wildcards) and answers ``InvalidVpcPeeringConnectionID.NotFound`` for an
  unknown id (moto ignored the filters and left unknown ids out).
- DeleteVpcPeeringConnection from either side of an ``active`` connection, or of a
  ``pending-acceptance`` one; from any other state ``InvalidStateTransition`` (``Invalid state
  transition for pcx-…, attempted to transition from rejected to deleting``), as EC2 answers.
- CreateRoute / ReplaceRoute with ``VpcPeeringConnectionId``: the connection must be one of
  the route table's VPC (``InvalidParameterValue``: ``route table rtb-… and network gateway
  pcx-… belong to different networks``) and live: ``pending-acceptance`` or ``active``; a
  deleted, rejected, failed or expired one is ``InvalidVpcPeeringConnectionID.NotFound``. A
  route to a connection that is not ``active`` shows ``State`` ``blackhole`` and carries
  nothing, as EC2 documents ("You can add a route for a VPC peering connection that's in the
  pending-acceptance state. However, the route has a state of blackhole").
- Unknown connection ids answer EC2's code ``InvalidVpcPeeringConnectionID.NotFound``
  (moto's was spelled ``InvalidVpcPeeringConnectionId.NotFound``, which SDK waiters and
  Terraform do not recognise).

Boot mode routes packets by these connections and routes: see ``peering``.
"""

from __future__ import annotations

import re
from typing import Any

from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models.route_tables import Route
from moto.ec2.models.vpc_peering_connections import VPCPeeringConnection, VPCPeeringConnectionBackend

LIVE_STATES = ("pending-acceptance", "active")  # routable, and deletable


def not_found(connection_id: str) -> EC2ClientError:
    """EC2's answer for a connection that does not exist (or no longer carries routes)."""
    return EC2ClientError(
        "InvalidVpcPeeringConnectionID.NotFound", f"The vpcPeeringConnection ID '{connection_id}' does not exist"
    )


def state_of(connection: VPCPeeringConnection) -> str:
    """The connection's status code: pending-acceptance, active, deleted, rejected ..."""
    return connection._status.code


def _vpc_info(vpc: Any, prefix: str) -> dict[str, list[str]]:
    """The ``<prefix>.*`` filters' values of one side of a connection."""
    cidrs = [c["cidr_block"] for c in vpc.get_cidr_block_association_set(ipv6=False)] or [vpc.cidr_block]
    return {f"{prefix}.vpc-id": [vpc.id], f"{prefix}.cidr-block": cidrs, f"{prefix}.owner-id": [vpc.owner_id]}


def filter_values(connection: VPCPeeringConnection, name: str) -> list[str]:
    """The values filter ``name`` sees on a connection; InvalidParameterValue for an unknown filter."""
    tags = {tag["key"]: tag["value"] for tag in connection.get_tags()}
    if name.startswith("tag:"):
        key = name[len("tag:"):]
        return [tags[key]] if key in tags else []
    values = {
        **_vpc_info(connection.vpc, "requester-vpc-info"),
        **_vpc_info(connection.peer_vpc, "accepter-vpc-info"),
        "status-code": [state_of(connection)],
        "status-message": [connection._status.message],
        "vpc-peering-connection-id": [connection.id],
        "tag-key": list(tags),
    }
    if name not in values:
        raise EC2ClientError("InvalidParameterValue", f"The filter '{name}' is invalid")
    return values[name]


def _like(value: str, pattern: str) -> bool:
    """EC2's filter match: ``*`` any run of characters, ``?`` one character, the rest literal."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value) is not None


def matches(connection: VPCPeeringConnection, filters: dict[str, list[str]]) -> bool:
    """Every filter holds (one of its values matches one of the connection's)."""
    return all(
        any(_like(value, pattern) for value in filter_values(connection, name) for pattern in patterns)
        for name, patterns in filters.items()
    )


class PeeringActions:
    """EC2 actions for peering connections and routes through them; mixed into the EC2 handler."""

    def describe_vpc_peering_connections(self) -> ActionResult:
        self.error_on_dryrun()  # type: ignore[attr-defined]
        known = self.ec2_backend.vpc_pcxs  # type: ignore[attr-defined]
        ids = self._get_param("VpcPeeringConnectionIds", [])  # type: ignore[attr-defined]
        missing = [i for i in ids if i not in known]
        if missing:
            raise not_found(missing[0])
        chosen = [known[i] for i in ids] if ids else list(known.values())
        filters = self._filters_from_querystring()  # type: ignore[attr-defined]
        return ActionResult({"VpcPeeringConnections": [c for c in chosen if matches(c, filters)]})

    def delete_vpc_peering_connection(self) -> ActionResult:
        connection_id = self._get_param("VpcPeeringConnectionId")  # type: ignore[attr-defined]
        connection = self.ec2_backend.get_vpc_peering_connection(connection_id)  # type: ignore[attr-defined]
        if state_of(connection) not in LIVE_STATES:
            raise EC2ClientError(
                "InvalidStateTransition",
                f"Invalid state transition for {connection_id}, attempted to transition from "
                f"{state_of(connection)} to deleting",
            )
        return super().delete_vpc_peering_connection()  # type: ignore[misc]

    def create_route(self) -> ActionResult:
        self._check_peering_target()
        return super().create_route()  # type: ignore[misc]

    def replace_route(self) -> ActionResult:
        self._check_peering_target()
        return super().replace_route()  # type: ignore[misc]

    def _check_peering_target(self) -> None:
        """A route may target a live peering connection of its own table's VPC only."""
        connection_id = self._get_param("VpcPeeringConnectionId")  # type: ignore[attr-defined]
        if not connection_id:
            return
        table_id = self._get_param("RouteTableId")  # type: ignore[attr-defined]
        table = self.ec2_backend.get_route_table(table_id)  # type: ignore[attr-defined]
        connection = self.ec2_backend.get_vpc_peering_connection(connection_id)  # type: ignore[attr-defined]
        if state_of(connection) not in LIVE_STATES:
            raise not_found(connection_id)
        if table.vpc_id not in (connection.vpc.id, connection.peer_vpc.id):
            raise EC2ClientError(
                "InvalidParameterValue",
                f"route table {table_id} and network gateway {connection_id} belong to different networks",
            )


def _route_state(route: Route) -> str:
    """``blackhole`` while the route's peering connection is not active, as EC2 shows it."""
    connection = route.vpc_pcx
    return "blackhole" if connection is not None and state_of(connection) != "active" else "active"


def _get_vpc_peering_connection(self: Any, vpc_pcx_id: str) -> VPCPeeringConnection:
    if vpc_pcx_id not in self.vpc_pcxs:
        raise not_found(vpc_pcx_id)
    return self.vpc_pcxs[vpc_pcx_id]


def install() -> None:
    """Route states and EC2's not-found code in moto's models (the actions come with the handler)."""
    Route.state = property(_route_state)  # type: ignore[assignment, method-assign]
    VPCPeeringConnectionBackend.get_vpc_peering_connection = _get_vpc_peering_connection  # type: ignore[method-assign]
