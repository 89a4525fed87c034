"""Security groups and VPC routes as packet filters (pure: no root, no namespaces)."""

from __future__ import annotations

import ipaddress
from types import SimpleNamespace

from firewall import Interface, MountTarget, PeeringLink, Permission, SubnetRoutes, permissions, route_chain, vpc_rules


def rule(protocol: str, low: int | None, high: int | None, cidr: str | None = None, group: str | None = None) -> object:
    return SimpleNamespace(
        ip_protocol=protocol, from_port=low, to_port=high,
        ip_range={"CidrIp": cidr} if cidr else {}, source_group={"GroupId": group} if group else {},
    )


def test_a_group_reference_becomes_its_members_addresses_and_an_empty_group_admits_nothing() -> None:
    members = {"sg-client": ["10.0.1.4", "10.0.1.9"]}
    found = permissions([rule("tcp", 8080, 8080, group="sg-client"), rule("tcp", 22, 22, group="sg-empty")], members)
    assert found == [Permission("tcp", 8080, 8080, ("10.0.1.4/32", "10.0.1.9/32"))]


def test_ingress_accepts_only_what_a_rule_allows_and_egress_returns_to_the_ingress_check() -> None:
    server = Interface(
        link="e1",
        ingress=(Permission("tcp", 22, 22, ("10.0.0.0/16",)), Permission("-1", None, None, ("10.0.1.4/32",))),
        egress=(Permission("-1", None, None, ("0.0.0.0/0",)),),
    )
    text = vpc_rules([server])
    lines = text.splitlines()
    assert "-A FORWARD -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT" in lines
    assert "-A in-e1 -s 10.0.0.0/16 -p tcp -m tcp --dport 22:22 -j ACCEPT" in lines
    assert "-A in-e1 -s 10.0.1.4/32 -j ACCEPT" in lines
    assert lines.index("-A in-e1 -s 10.0.1.4/32 -j ACCEPT") < lines.index("-A in-e1 -j DROP")
    assert "-A out-e1 -d 0.0.0.0/0 -j RETURN" in lines and "-A out-e1 -j DROP" in lines
    # Every egress jump comes before any ingress jump: a packet passes both checks.
    assert lines.index("-A FORWARD -i e1 -j out-e1") < lines.index("-A FORWARD -o e1 -j in-e1")
    assert text.startswith("*filter\n") and text.endswith("COMMIT\n")


def test_all_ports_of_a_protocol_need_no_port_match_and_icmp_types_do() -> None:
    text = vpc_rules([Interface("e2", (Permission("udp", 0, 65535, ("10.0.0.0/16",)),
                                       Permission("icmp", 8, -1, ("10.0.0.0/16",))), ())])
    assert "-A in-e2 -s 10.0.0.0/16 -p udp -j ACCEPT" in text
    assert "-A in-e2 -s 10.0.0.0/16 -p icmp -m icmp --icmp-type 8 -j ACCEPT" in text
    assert "-A out-e2 -j DROP" in text  # no egress rule: nothing leaves


# --- routes through VPC peering connections ------------------------------------------------------

HOME = SubnetRoutes("10.0.1.0/24", (("10.0.0.0/16", "local"), ("10.1.0.0/16", "pcx-west"), ("10.1.9.0/24", "igw-1")))
MAIN = SubnetRoutes("10.0.2.0/24", (("10.0.0.0/16", "local"), ("0.0.0.0/0", "igw-1")))
WEST = PeeringLink("pcx0", "pcx-west")


def leaves(lines: list[str], source: str, destination: str) -> bool:
    """Walks a route chain as iptables does (first match wins): True when the packet may leave."""
    for line in lines:
        words = line.split()
        given = dict(zip(words[2::2], words[3::2]))
        if "-s" in given and ipaddress.ip_address(source) not in ipaddress.ip_network(given["-s"]):
            continue
        if "-d" in given and ipaddress.ip_address(destination) not in ipaddress.ip_network(given["-d"]):
            continue
        return given["-j"] == "RETURN"
    raise AssertionError("a route chain ends with a verdict for every packet")


def test_a_packet_leaves_through_a_peering_only_where_its_subnets_longest_matching_route_targets_it() -> None:
    chain = route_chain(WEST, [HOME, MAIN])
    assert leaves(chain, "10.0.1.5", "10.1.2.3")
    assert not leaves(chain, "10.0.1.5", "10.1.9.3")  # a more specific route to something else wins
    assert not leaves(chain, "10.0.2.5", "10.1.2.3")  # the main table has no route to the peer
    assert not leaves(chain, "10.0.255.254", "10.1.2.3")  # not from a subnet (the host's address)
    other = route_chain(PeeringLink("pcx1", "pcx-other"), [HOME])
    assert not leaves(other, "10.0.1.5", "10.1.2.3")  # the route names another connection


def test_the_route_check_comes_before_conntrack_so_replies_need_their_own_route() -> None:
    server = Interface("e1", (Permission("-1", None, None, ("10.1.0.0/16",)),), ())
    lines = vpc_rules([server], [HOME], [WEST]).splitlines()
    established = lines.index("-A FORWARD -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT")
    assert lines.index("-A FORWARD -o pcx+ -j peering") < established
    assert "-A OUTPUT -o pcx+ -j peering" in lines  # what the namespace itself answers (mount targets)
    assert lines.index("-A peering -o pcx0 -j route-pcx0") < lines.index("-A peering -j DROP")
    # Not to the host, not from the host, not on to another peering, nothing of the namespace's own.
    assert "-A FORWARD -i pcx+ -o h0 -j DROP" in lines and "-A FORWARD -i h0 -o pcx+ -j DROP" in lines
    assert "-A INPUT -i pcx+ -j DROP" in lines
    # Security groups keep working on peer addresses.
    assert "-A in-e1 -s 10.1.0.0/16 -j ACCEPT" in lines


def test_a_link_made_since_the_rules_passes_nothing() -> None:
    lines = vpc_rules([], [HOME]).splitlines()
    assert "-A FORWARD -o pcx+ -j peering" in lines and lines[-2:] == ["-A peering -j DROP", "COMMIT"]


def test_a_mount_target_admits_what_its_groups_allow_after_the_senders_egress() -> None:
    client = Interface("e3", (), (Permission("-1", None, None, ("0.0.0.0/0",)),))
    nfs = MountTarget("10.0.1.37", (Permission("tcp", 2049, 2049, ("10.1.0.0/16",)),))
    lines = vpc_rules([client], [HOME], [WEST], [nfs]).splitlines()
    assert lines.index("-A INPUT -d 10.0.1.37/32 -j mt-10.0.1.37") < lines.index("-A INPUT -i pcx+ -j DROP")
    chain = [line for line in lines if line.startswith("-A mt-10.0.1.37 ")]
    assert chain == [
        "-A mt-10.0.1.37 -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
        "-A mt-10.0.1.37 -i e3 -j out-e3",
        "-A mt-10.0.1.37 -s 10.1.0.0/16 -p tcp -m tcp --dport 2049:2049 -j ACCEPT",
        "-A mt-10.0.1.37 -j DROP",
    ]
