"""Boot mode: what crosses between VPCs. Peering connections as links between VPC namespaces,
and EFS mount targets at their own addresses.

An ``active`` peering connection between two VPCs that both have a namespace (any account or
region) is a veth pair ``pcx<N>`` between the two namespaces, with a kernel route for each of
the other VPC's IPv4 CIDRs through it; the link's own addresses are link-local
(169.254.240.0/20). The kernel route only makes a path possible: which packets may take it is
decided by the route tables, as iptables rules of each side (``firewall.route_chain``). A
connection that is deleted or no longer active, or one of whose namespaces goes, loses its link
within a round of the reconciler; VPCs whose CIDRs overlap are never linked.

Each live EFS mount target's address sits on ``lo`` of its VPC's namespace, behind its security
groups (``firewall.MountTarget``): a TCP connection to port 2049 there is refused (nothing
listens), which is what proves the path to a client. The mount helper (``machines``) learns
which file system an address belongs to from ``<shares>/.mount-targets/<vpc-id>``: the mount
targets of that VPC and of the VPCs actively peered with it (their CIDRs do not overlap, so an
address names one mount target).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

import firewall
import netns
import vpcnet

log = logging.getLogger("emulator.boot")

LINK_ADDRESSES = ipaddress.ip_network("169.254.240.0/20")
MOUNT_TARGETS_DIR = ".mount-targets"
VpcKey = tuple[str, str, str]  # account, region, VPC id


# --- what moto says ----------------------------------------------------------------------------


def _key(vpc: Any) -> VpcKey:
    return (vpc.owner_id, vpc.region, vpc.id)


def _cidrs(vpc: Any) -> tuple[ipaddress.IPv4Network, ...]:
    found = [c.get("cidr_block") for c in vpc.get_cidr_block_association_set(ipv6=False)] or [vpc.cidr_block]
    return tuple(ipaddress.ip_network(c) for c in found if c)


@dataclass(frozen=True)
class Connection:
    """An active peering connection: its id and each side's VPC key and IPv4 CIDRs."""

    connection_id: str
    sides: tuple[VpcKey, VpcKey]
    cidrs: tuple[tuple[ipaddress.IPv4Network, ...], tuple[ipaddress.IPv4Network, ...]]

    def overlaps(self) -> bool:
        return any(a.overlaps(b) for a in self.cidrs[0] for b in self.cidrs[1])


def active_connections(keys: list[VpcKey]) -> dict[str, Connection]:
    """The active peering connections that touch any of these VPCs (moto keeps a cross-region
    connection in both regions' backends, as one object)."""
    from moto.ec2.models import ec2_backends

    found: dict[str, Connection] = {}
    for account, region in {(k[0], k[1]) for k in keys}:
        for connection in list(ec2_backends[account][region].vpc_pcxs.values()):
            if connection._status.code == "active":
                found[connection.id] = Connection(
                    connection.id, (_key(connection.vpc), _key(connection.peer_vpc)),
                    (_cidrs(connection.vpc), _cidrs(connection.peer_vpc)),
                )
    return found


def subnet_routes(vpc: vpcnet.Vpc) -> tuple[firewall.SubnetRoutes, ...]:
    """Each subnet of the VPC with the IPv4 routes of its route table (explicit, else main)."""
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[vpc.account][vpc.region]
    tables = [t for t in list(backend.route_tables.values()) if t.vpc_id == vpc.vpc_id]
    main = next((t for t in tables if t.main_association_id is not None), None)
    explicit = {subnet_id: t for t in tables for subnet_id in list(t._associations.values())}
    out = []
    for subnet in backend.describe_subnets(filters={"vpc-id": [vpc.vpc_id]}):
        table = explicit.get(subnet.id, main)
        routes = [] if table is None else [(r.destination_cidr_block, _target(r)) for r in table.routes
                                          if r.destination_cidr_block]
        out.append(firewall.SubnetRoutes(subnet.cidr_block, tuple(routes)))
    return tuple(out)


def _target(route: Any) -> str:
    if route.vpc_pcx is not None:
        return route.vpc_pcx.id
    if route.local:
        return "local"
    return route.gateway_id or route.nat_gateway_id or route.transit_gateway_id or route.network_interface_id or "other"


@dataclass(frozen=True)
class EfsTarget:
    """A live EFS mount target: where it is, what it serves and its security groups."""

    vpc: VpcKey
    address: str
    file_system_id: str
    group_ids: tuple[str, ...]


def efs_targets() -> list[EfsTarget]:
    """Every available EFS mount target of any account and region."""
    from moto.ec2.models import ec2_backends
    from moto.efs.models import efs_backends

    found = []
    for account in list(efs_backends.keys()):
        for region in list(efs_backends[account].keys()):
            for target in list(efs_backends[account][region].mount_targets_by_id.values()):
                if target.life_cycle_state != "available":
                    continue
                groups = list(target.security_groups or [])
                try:
                    eni = ec2_backends[account][region].get_network_interface(target.network_interface_id)
                    groups = [g.id for g in eni.group_set] or groups
                except Exception:  # noqa: BLE001 - an interface gone since: the target's own list
                    pass
                found.append(EfsTarget((account, region, target.vpc_id), target.ip_address,
                                       target.file_system_id, tuple(groups)))
    return found


def ingress_rules(vpc: VpcKey, group_ids: tuple[str, ...]) -> list[Any]:
    """The ingress rules of these groups (moto's objects)."""
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[vpc[0]][vpc[1]]
    rules = []
    for group_id in group_ids:
        group = backend.get_security_group_from_id(group_id)
        if group is not None:
            rules += group.ingress_rules
    return rules


# --- links between namespaces ------------------------------------------------------------------


@dataclass
class Link:
    """One connection's veth pair: ``name`` in both namespaces, ``addresses`` on each end."""

    connection: Connection
    name: str
    ends: tuple[vpcnet.Vpc, vpcnet.Vpc]
    addresses: tuple[str, str]


class Peerings:
    """The links of one emulator run's active peering connections, and its mount targets'
    addresses; kept by the reconciler (``reconcile``), dropped with a namespace (``forget``)."""

    def __init__(self, shares_dir: str) -> None:
        self.links: dict[str, Link] = {}
        self.placed: dict[str, set[str]] = {}  # VPC namespace -> mount target addresses on its lo
        self.maps_dir = os.path.join(shares_dir, MOUNT_TARGETS_DIR)
        self._written: dict[str, str] = {}
        self._counter = 0
        self._warned: set[str] = set()
        self._closed = False
        self._lock = threading.Lock()

    def reconcile(self, vpcs: dict[VpcKey, vpcnet.Vpc], targets: list[EfsTarget]) -> None:
        """Links for exactly the active connections between live namespaces; addresses for
        exactly the live mount targets; each VPC's map of reachable mount targets."""
        with self._lock:
            if self._closed:
                return
            wanted = {cid: c for cid, c in active_connections(list(vpcs)).items()
                      if all(side in vpcs for side in c.sides) and self._linkable(c)}
            for cid, link in list(self.links.items()):
                # Gone, inactive, a namespace made anew, or a CIDR added since: made again below.
                if cid not in wanted or link.connection != wanted[cid] or any(
                    end is not vpcs[side] for end, side in zip(link.ends, wanted[cid].sides)
                ):
                    self._unlink(link)
            for cid, connection in wanted.items():
                if cid not in self.links:
                    self._link(connection, (vpcs[connection.sides[0]], vpcs[connection.sides[1]]))
            self._place(vpcs, targets)
            self._write_maps(vpcs, wanted, targets)

    def links_of(self, vpc: vpcnet.Vpc) -> list[firewall.PeeringLink]:
        with self._lock:
            return [firewall.PeeringLink(link.name, cid) for cid, link in sorted(self.links.items())
                    if any(end is vpc for end in link.ends)]

    def forget(self, vpc: vpcnet.Vpc) -> None:
        """A VPC's namespace is going: its links go with it (the other end too)."""
        with self._lock:
            for link in [link for link in self.links.values() if any(end is vpc for end in link.ends)]:
                self._unlink(link)
            self.placed.pop(vpc.ns, None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for link in list(self.links.values()):
                self._unlink(link)

    def _linkable(self, connection: Connection) -> bool:
        if not connection.overlaps():
            return True
        if connection.connection_id not in self._warned:
            self._warned.add(connection.connection_id)
            log.warning("peering %s joins VPCs whose CIDRs overlap: not linked", connection.connection_id)
        return False

    def _link(self, connection: Connection, ends: tuple[vpcnet.Vpc, vpcnet.Vpc]) -> None:
        index = self._counter % (LINK_ADDRESSES.num_addresses // 2)
        self._counter += 1
        first = LINK_ADDRESSES.network_address + 2 * index
        link = Link(connection, f"pcx{index}", ends, (str(first), str(first + 1)))
        a, b = ends
        netns.ip("link", "del", link.name, ns=a.ns, check=False)
        netns.ip("link", "del", link.name, ns=b.ns, check=False)
        netns.ip("link", "add", link.name, "type", "veth", "peer", "name", link.name, "netns", b.ns, ns=a.ns)
        self.links[connection.connection_id] = link
        try:
            for end, (own, other), far in ((a, link.addresses, connection.cidrs[1]),
                                           (b, link.addresses[::-1], connection.cidrs[0])):
                netns.ip("addr", "add", own, "peer", other, "dev", link.name, ns=end.ns)
                netns.ip("link", "set", link.name, "up", ns=end.ns)
                for cidr in far:
                    netns.ip("route", "replace", str(cidr), "via", other, "dev", link.name, ns=end.ns)
        except netns.NetError:
            self._unlink(link)  # whole or not at all: the next round tries again
            raise
        log.info("peering %s: %s <-> %s linked as %s", connection.connection_id, a.vpc_id, b.vpc_id, link.name)

    def _unlink(self, link: Link) -> None:
        """Deleting one end of a veth pair deletes both, and the routes through them."""
        self.links.pop(link.connection.connection_id, None)
        for end in link.ends:
            if os.path.exists(os.path.join(netns.NETNS_DIR, end.ns)):
                netns.ip("link", "del", link.name, ns=end.ns, check=False)
        log.info("peering %s: unlinked", link.connection.connection_id)

    def _place(self, vpcs: dict[VpcKey, vpcnet.Vpc], targets: list[EfsTarget]) -> None:
        for gone in set(self.placed) - {vpc.ns for vpc in vpcs.values()}:
            del self.placed[gone]
        for key, vpc in vpcs.items():
            wanted = {t.address for t in targets if t.vpc == key}
            placed = self.placed.setdefault(vpc.ns, set())
            for address in sorted(placed - wanted):
                netns.ip("addr", "del", f"{address}/32", "dev", "lo", ns=vpc.ns, check=False)
                placed.discard(address)
            for address in sorted(wanted - placed):
                netns.ip("addr", "replace", f"{address}/32", "dev", "lo", ns=vpc.ns)
                placed.add(address)

    def _write_maps(self, vpcs: dict[VpcKey, vpcnet.Vpc], connections: dict[str, Connection],
                    targets: list[EfsTarget]) -> None:
        os.makedirs(self.maps_dir, exist_ok=True)
        texts = {}
        for key in vpcs:
            peers = {side for c in connections.values() if key in c.sides for side in c.sides}
            reachable = sorted((t.address, t.file_system_id) for t in targets if t.vpc == key or t.vpc in peers)
            texts[key[2]] = "".join(f"{address} {fs_id}\n" for address, fs_id in reachable)
        for vpc_id in set(self._written) - set(texts):
            _remove(os.path.join(self.maps_dir, vpc_id))
            del self._written[vpc_id]
        for vpc_id, text in texts.items():
            if self._written.get(vpc_id) != text:
                _write(os.path.join(self.maps_dir, vpc_id), text)
                self._written[vpc_id] = text


def _write(path: str, text: str) -> None:
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
