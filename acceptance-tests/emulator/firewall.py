"""Security groups as packet filters: the iptables rules one booted instance gets.

EC2 evaluates security groups statefully at each network interface: inbound traffic is
admitted when any ingress rule of any group of the interface allows it, outbound when any
egress rule does, and replies of admitted connections always pass. Traffic to the link-local
services (IMDS, DNS, the AWS endpoint) is not filtered, as on EC2.

``vpc_rules`` is pure (permissions in, iptables-restore text out), so it is unit tested
without root.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

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


def vpc_rules(interfaces: list[Interface]) -> str:
    """iptables-restore input (filter table) for a VPC's namespace.

    Every instance's traffic is routed through the VPC's namespace, where the instance cannot
    change the rules: a packet leaves instance A only if one of A's egress permissions allows
    it (chain ``out-A`` returns) and reaches instance B only if one of B's ingress permissions
    does (chain ``in-B`` accepts). Replies of admitted connections pass; the link-local
    services and DHCP are addressed to the namespace itself (INPUT), which filters nothing.
    """
    lines = ["*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]"]
    for interface in interfaces:
        lines += [f":out-{interface.link} - [0:0]", f":in-{interface.link} - [0:0]"]
    lines.append("-A FORWARD -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT")
    lines += [f"-A FORWARD -i {i.link} -j out-{i.link}" for i in interfaces]
    lines += [f"-A FORWARD -o {i.link} -j in-{i.link}" for i in interfaces]
    for interface in interfaces:
        lines += _chain(f"out-{interface.link}", "-d", interface.egress, "RETURN")
        lines += _chain(f"in-{interface.link}", "-s", interface.ingress, "ACCEPT")
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def _chain(name: str, direction: str, permissions_: tuple[Permission, ...], verdict: str) -> list[str]:
    lines = []
    for permission in permissions_:
        match = _match(permission)
        for peer in permission.peers:
            lines.append(" ".join(p for p in (f"-A {name}", f"{direction} {peer}", match, f"-j {verdict}") if p))
    lines.append(f"-A {name} -j DROP")
    return lines
