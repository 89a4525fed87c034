"""Security groups as packet filters (pure: no root, no namespaces)."""

from __future__ import annotations

from types import SimpleNamespace

from firewall import Interface, Permission, permissions, vpc_rules


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
