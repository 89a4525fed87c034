"""Security groups and VPC routes as packet filters: the iptables rules of a VPC's namespace.

EC2 evaluates security groups statefully at each network interface: inbound traffic is
admitted when any ingress rule of any group of the interface allows it, outbound when any
egress rule does, and replies of admitted connections always pass. Traffic to the link-local
services (IMDS, DNS, the AWS endpoint) is not filtered, as on EC2.

Routing through a VPC peering connection is not stateful: a packet (a reply too) leaves the VPC
through the connection only when the route table of its source's subnet sends its destination
there, the longest matching prefix winning. EFS mount targets answer at their own addresses in
the namespace, behind their security groups.

``vpc_rules`` is pure (permissions and routes in, iptables-restore text out), so it is unit
tested without root.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

PEERING_LINKS = "pcx+"  # the peering links' names in a VPC's namespace: pcx<N> (``peering``)
HOST_LINK = "h0"  # the host's link into a VPC's namespace (``vpcnet.HOST_SIDE``)


@dataclass(frozen=True)
class Permission:
    """One security group rule: protocol, ports and one source or destination."""

    protocol: str  # "-1", "tcp", "udp", "icmp" or a number
    from_port: int | None
    to_port: int | None
    peers: tuple[str, ...]  # CIDRs; a referenced group is expanded to its members' addresses


def permissions(rules: Iterable[Any], members: dict[str, list[str]]) -> list[Permission]:
    """moto SecurityGroupRule objects as permissions; ``members`` maps a group id to addresses."""
    out = []
    for rule in rules:
        peers: list[str] = []
        if rule.ip_range.get("CidrIp"):
            peers.append(rule.ip_range["CidrIp"])
        group = (rule.source_group or {}).get("GroupId")
        if group:
            peers += [f"{address}/32" for address in members.get(group, [])]
        if not peers:
            continue
        out.append(Permission(rule.ip_protocol or "-1", rule.from_port, rule.to_port, tuple(sorted(set(peers)))))
    return out


def _match(permission: Permission) -> str:
    protocol = permission.protocol
    if protocol in ("-1", "all"):
        return ""
    parts = [f"-p {protocol}"]
    if protocol in ("tcp", "udp", "6", "17") and permission.from_port is not None:
        low, high = permission.from_port, permission.to_port
        if not (low in (-1, 0) and high in (-1, 65535)):
            parts.append(f"-m {'tcp' if protocol in ('tcp', '6') else 'udp'} --dport {low}:{high}")
    if protocol in ("icmp", "1") and permission.from_port not in (None, -1):
        code = "" if permission.to_port in (None, -1) else f"/{permission.to_port}"
        parts.append(f"-m icmp --icmp-type {permission.from_port}{code}")
    return " ".join(parts)


@dataclass(frozen=True)
class Interface:
    """One booted instance's link in its VPC's namespace and its groups' permissions."""

    link: str
    ingress: tuple[Permission, ...]
    egress: tuple[Permission, ...]


@dataclass(frozen=True)
class SubnetRoutes:
    """A subnet of the VPC and the IPv4 routes of its route table (the explicitly associated
    one, else the VPC's main table): (destination CIDR, target id: ``local``, ``pcx-…``, ...)."""

    cidr: str
    routes: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class PeeringLink:
    """The link of an active VPC peering connection in this VPC's namespace."""

    link: str
    connection_id: str


@dataclass(frozen=True)
class MountTarget:
    """An EFS mount target of this VPC: its address and its groups' ingress permissions."""

    address: str
    ingress: tuple[Permission, ...]


def vpc_rules(
    interfaces: Sequence[Interface],
    subnets: Sequence[SubnetRoutes] = (),
    peerings: Sequence[PeeringLink] = (),
    mount_targets: Sequence[MountTarget] = (),
) -> str:
    """iptables-restore input (filter table) for a VPC's namespace.

    Every instance's traffic is routed through the VPC's namespace, where the instance cannot
    change the rules: a packet leaves instance A only if one of A's egress permissions allows
    it (chain ``out-A`` returns) and reaches instance B only if one of B's ingress permissions
    does (chain ``in-B`` accepts). Replies of admitted connections pass; the link-local
    services and DHCP are addressed to the namespace itself (INPUT), which filters nothing
    but the mount targets.

    A packet leaving through a peering link, forwarded or answered by a mount target, first
    passes that link's route chain (``route-<link>``), before any conntrack verdict, so that
    replies need their own route; a link these rules do not know yet passes nothing. From a
    peering only instances and mount targets are reached: not the host, not another peering
    (peering is not transitive).
    """
    lines = ["*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]", ":peering - [0:0]"]
    for interface in interfaces:
        lines += [f":out-{interface.link} - [0:0]", f":in-{interface.link} - [0:0]"]
    lines += [f":route-{peering.link} - [0:0]" for peering in peerings]
    lines += [f":mt-{target.address} - [0:0]" for target in mount_targets]
    lines += [
        f"-A FORWARD -i {HOST_LINK} -o {PEERING_LINKS} -j DROP",
        f"-A FORWARD -i {PEERING_LINKS} -o {HOST_LINK} -j DROP",
        f"-A FORWARD -o {PEERING_LINKS} -j peering",
        f"-A OUTPUT -o {PEERING_LINKS} -j peering",
        "-A FORWARD -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
    ]
    lines += [f"-A FORWARD -i {i.link} -j out-{i.link}" for i in interfaces]
    lines += [f"-A FORWARD -o {i.link} -j in-{i.link}" for i in interfaces]
    lines += [f"-A INPUT -d {target.address}/32 -j mt-{target.address}" for target in mount_targets]
    lines.append(f"-A INPUT -i {PEERING_LINKS} -j DROP")
    for peering in peerings:
        lines += [f"-A peering -o {peering.link} -j route-{peering.link}", f"-A peering -o {peering.link} -j RETURN"]
    lines.append("-A peering -j DROP")  # a link made since these rules: nothing passes yet
    for interface in interfaces:
        lines += _chain(f"out-{interface.link}", "-d", interface.egress, "RETURN")
        lines += _chain(f"in-{interface.link}", "-s", interface.ingress, "ACCEPT")
    for peering in peerings:
        lines += route_chain(peering, subnets)
    for target in mount_targets:
        lines += _mount_target_chain(target, interfaces)
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def route_chain(peering: PeeringLink, subnets: Sequence[SubnetRoutes]) -> list[str]:
    """What may leave through a peering link: per subnet, its routes from the most specific to
    the least; the first whose destination holds the packet's decides (longest prefix match):
    through if it targets this connection, dropped otherwise. Sources in no subnet are dropped."""
    name = f"route-{peering.link}"
    lines = []
    for subnet in subnets:
        ranked = sorted(subnet.routes, key=lambda route: -ipaddress.ip_network(route[0], strict=False).prefixlen)
        for destination, target in ranked:
            verdict = "RETURN" if target == peering.connection_id else "DROP"
            lines.append(f"-A {name} -s {subnet.cidr} -d {destination} -j {verdict}")
    lines.append(f"-A {name} -j DROP")
    return lines


def _mount_target_chain(target: MountTarget, interfaces: Sequence[Interface]) -> list[str]:
    """A mount target admits what its groups' ingress rules allow, after the sending instance's
    egress rules when it is an instance of this VPC (packets from a peering were checked there)."""
    name = f"mt-{target.address}"
    lines = [f"-A {name} -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT"]
    lines += [f"-A {name} -i {i.link} -j out-{i.link}" for i in interfaces]
    return lines + _chain(name, "-s", target.ingress, "ACCEPT")


def _chain(name: str, direction: str, permissions_: tuple[Permission, ...], verdict: str) -> list[str]:
    lines = []
    for permission in permissions_:
        match = _match(permission)
        for peer in permission.peers:
            lines.append(" ".join(p for p in (f"-A {name}", f"{direction} {peer}", match, f"-j {verdict}") if p))
    lines.append(f"-A {name} -j DROP")
    return lines
