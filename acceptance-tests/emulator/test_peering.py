"""VPC peering across regions, routes through it, and EFS mount targets as a remote node sees
them: the calls the product makes, against the real ./serve process (conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from harness import client, control, error_code

HOME, REMOTE = "us-east-1", "us-west-2"


@pytest.fixture
def west(endpoint: str) -> Any:
    return client(endpoint, "ec2", region=REMOTE)


@pytest.fixture
def vpcs(ec2: Any, west: Any) -> dict[str, str]:
    """A home VPC in us-east-1 and a remote one in us-west-2, with a subnet each."""
    home = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    remote = west.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    return {
        "home": home,
        "remote": remote,
        "home_subnet": ec2.create_subnet(VpcId=home, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"],
        "remote_subnet": west.create_subnet(VpcId=remote, CidrBlock="10.1.1.0/24")["Subnet"]["SubnetId"],
    }


def request_peering(ec2: Any, vpcs: dict[str, str], cluster: str = "research") -> str:
    tags = [{"ResourceType": "vpc-peering-connection", "Tags": [{"Key": "hpcforge:cluster", "Value": cluster}]}]
    created = ec2.create_vpc_peering_connection(
        VpcId=vpcs["home"], PeerVpcId=vpcs["remote"], PeerRegion=REMOTE, TagSpecifications=tags
    )["VpcPeeringConnection"]
    assert created["Status"]["Code"] == "initiating-request"
    assert created["AccepterVpcInfo"]["Region"] == REMOTE and created["RequesterVpcInfo"]["Region"] == HOME
    assert created["Tags"] == tags[0]["Tags"]
    return created["VpcPeeringConnectionId"]


def main_table(ec2: Any, vpc: str) -> str:
    return ec2.describe_route_tables(
        Filters=[{"Name": "vpc-id", "Values": [vpc]}, {"Name": "association.main", "Values": ["true"]}]
    )["RouteTables"][0]["RouteTableId"]


def routes(ec2: Any, table: str) -> dict[str, dict[str, Any]]:
    found = ec2.describe_route_tables(RouteTableIds=[table])["RouteTables"][0]["Routes"]
    return {route["DestinationCidrBlock"]: route for route in found}


def status(ec2: Any, connection: str) -> str:
    return ec2.describe_vpc_peering_connections(VpcPeeringConnectionIds=[connection])["VpcPeeringConnections"][0][
        "Status"
    ]["Code"]


def test_a_cross_region_peering_is_described_in_both_regions_and_accepted_in_the_peer_region(
    ec2: Any, west: Any, vpcs: dict[str, str]
) -> None:
    connection = request_peering(ec2, vpcs)
    assert status(ec2, connection) == status(west, connection) == "pending-acceptance"

    with pytest.raises(ClientError) as wrong_region:
        ec2.accept_vpc_peering_connection(VpcPeeringConnectionId=connection)
    assert error_code(wrong_region) == "OperationNotPermitted"
    assert f"must be accepted in region {REMOTE}" in str(wrong_region.value)

    accepted = west.accept_vpc_peering_connection(VpcPeeringConnectionId=connection)["VpcPeeringConnection"]
    assert accepted["Status"]["Code"] == "active"
    assert status(ec2, connection) == "active"
    with pytest.raises(ClientError) as twice:
        west.accept_vpc_peering_connection(VpcPeeringConnectionId=connection)
    assert error_code(twice) == "InvalidStateTransition"


def test_peerings_are_found_by_their_vpcs_status_and_tags_in_both_regions(
    ec2: Any, west: Any, vpcs: dict[str, str]
) -> None:
    ours = request_peering(ec2, vpcs)
    other_vpc = ec2.create_vpc(CidrBlock="10.2.0.0/16")["Vpc"]["VpcId"]
    theirs = ec2.create_vpc_peering_connection(VpcId=other_vpc, PeerVpcId=vpcs["home"])["VpcPeeringConnection"][
        "VpcPeeringConnectionId"
    ]

    def found(api: Any, **filters: str) -> list[str]:
        wanted = [{"Name": name.replace("_", "-").replace("--", "."), "Values": [value]} for name, value in filters.items()]
        return sorted(c["VpcPeeringConnectionId"] for c in api.describe_vpc_peering_connections(Filters=wanted)[
            "VpcPeeringConnections"
        ])

    for api in (ec2, west):
        assert found(api, requester_vpc_info__vpc_id=vpcs["home"], accepter_vpc_info__vpc_id=vpcs["remote"]) == [ours]
        assert found(api, **{"tag:hpcforge:cluster": "research", "status_code": "pending-acceptance"}) == [ours]
        assert found(api, **{"tag:hpcforge:cluster": "teaching"}) == []
        assert found(api, status_code="active") == []
    assert found(ec2, accepter_vpc_info__vpc_id=vpcs["home"]) == [theirs]
    assert found(ec2, requester_vpc_info__cidr_block="10.*") == sorted([ours, theirs])
    assert found(west, accepter_vpc_info__vpc_id=vpcs["home"]) == []  # a same-region peering of us-east-1

    with pytest.raises(ClientError) as unknown:
        ec2.describe_vpc_peering_connections(VpcPeeringConnectionIds=["pcx-0123456789abcdef0"])
    assert error_code(unknown) == "InvalidVpcPeeringConnectionID.NotFound"
    with pytest.raises(ClientError) as bad_filter:
        ec2.describe_vpc_peering_connections(Filters=[{"Name": "colour", "Values": ["blue"]}])
    assert error_code(bad_filter) == "InvalidParameterValue"


def test_routes_target_only_live_peerings_of_their_own_vpc_and_show_blackhole_until_active(
    ec2: Any, west: Any, vpcs: dict[str, str]
) -> None:
    connection = request_peering(ec2, vpcs)
    home_table, remote_table = main_table(ec2, vpcs["home"]), main_table(west, vpcs["remote"])
    # EC2 takes a route to a pending connection; it is a blackhole until the connection is active.
    ec2.create_route(RouteTableId=home_table, DestinationCidrBlock="10.1.0.0/16", VpcPeeringConnectionId=connection)
    assert routes(ec2, home_table)["10.1.0.0/16"]["State"] == "blackhole"
    west.accept_vpc_peering_connection(VpcPeeringConnectionId=connection)
    west.create_route(RouteTableId=remote_table, DestinationCidrBlock="10.0.0.0/16", VpcPeeringConnectionId=connection)
    for api, table, peer in ((ec2, home_table, "10.1.0.0/16"), (west, remote_table, "10.0.0.0/16")):
        route = routes(api, table)[peer]
        assert route["VpcPeeringConnectionId"] == connection and route["State"] == "active", route
    by_target = ec2.describe_route_tables(Filters=[{"Name": "route.vpc-peering-connection-id", "Values": [connection]}])
    assert [t["RouteTableId"] for t in by_target["RouteTables"]] == [home_table]

    # A table of a VPC the connection does not join, and an unknown connection, are refused.
    stranger = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    with pytest.raises(ClientError) as elsewhere:
        ec2.create_route(RouteTableId=main_table(ec2, stranger), DestinationCidrBlock="10.1.0.0/16",
                         VpcPeeringConnectionId=connection)
    assert error_code(elsewhere) == "InvalidParameterValue"
    assert "belong to different networks" in str(elsewhere.value)
    with pytest.raises(ClientError) as unknown:
        ec2.create_route(RouteTableId=home_table, DestinationCidrBlock="10.5.0.0/16",
                         VpcPeeringConnectionId="pcx-0123456789abcdef0")
    assert error_code(unknown) == "InvalidVpcPeeringConnectionID.NotFound"

    # ReplaceRoute and DeleteRoute work on peering routes too.
    ec2.create_route(RouteTableId=home_table, DestinationCidrBlock="10.1.1.0/24", VpcPeeringConnectionId=connection)
    gateway = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=gateway, VpcId=vpcs["home"])
    ec2.replace_route(RouteTableId=home_table, DestinationCidrBlock="10.1.1.0/24", GatewayId=gateway)
    replaced = routes(ec2, home_table)["10.1.1.0/24"]
    assert replaced.get("GatewayId") == gateway and "VpcPeeringConnectionId" not in replaced, replaced
    ec2.replace_route(RouteTableId=home_table, DestinationCidrBlock="10.1.1.0/24", VpcPeeringConnectionId=connection)
    assert routes(ec2, home_table)["10.1.1.0/24"]["VpcPeeringConnectionId"] == connection
    ec2.delete_route(RouteTableId=home_table, DestinationCidrBlock="10.1.1.0/24")
    assert "10.1.1.0/24" not in routes(ec2, home_table)

    # Deleted from the peer region: deleted on both sides, its routes blackholes, new routes refused.
    west.delete_vpc_peering_connection(VpcPeeringConnectionId=connection)
    assert status(ec2, connection) == status(west, connection) == "deleted"
    assert routes(ec2, home_table)["10.1.0.0/16"]["State"] == "blackhole"
    with pytest.raises(ClientError) as gone:
        ec2.create_route(RouteTableId=home_table, DestinationCidrBlock="10.1.2.0/24", VpcPeeringConnectionId=connection)
    assert error_code(gone) == "InvalidVpcPeeringConnectionID.NotFound"
    with pytest.raises(ClientError) as again:
        ec2.delete_vpc_peering_connection(VpcPeeringConnectionId=connection)
    assert error_code(again) == "InvalidStateTransition"
    assert "from deleted to deleting" in str(again.value)


def test_a_pending_peering_is_deleted_by_its_requester_and_a_rejected_one_cannot_be(
    ec2: Any, west: Any, vpcs: dict[str, str]
) -> None:
    pending = request_peering(ec2, vpcs)
    assert ec2.delete_vpc_peering_connection(VpcPeeringConnectionId=pending)["Return"] is True
    assert status(west, pending) == "deleted"

    rejected = request_peering(ec2, vpcs)
    west.reject_vpc_peering_connection(VpcPeeringConnectionId=rejected)
    with pytest.raises(ClientError) as excinfo:
        ec2.delete_vpc_peering_connection(VpcPeeringConnectionId=rejected)
    assert error_code(excinfo) == "InvalidStateTransition"
    assert f"Invalid state transition for {rejected}, attempted to transition from rejected to deleting" in str(
        excinfo.value
    )


def test_a_remote_node_finds_the_home_efs_mount_targets_ip_and_the_call_is_named_for_iam(
    endpoint: str, ec2: Any, vpcs: dict[str, str]
) -> None:
    efs = client(endpoint, "efs")
    fs_id = efs.create_file_system(CreationToken="home", Encrypted=True)["FileSystemId"]
    group = ec2.create_security_group(GroupName="nfs", Description="nfs", VpcId=vpcs["home"])["GroupId"]
    target = efs.create_mount_target(FileSystemId=fs_id, SubnetId=vpcs["home_subnet"], SecurityGroups=[group])
    control(endpoint, "POST", "/calls/reset")

    (described,) = efs.describe_mount_targets(FileSystemId=fs_id)["MountTargets"]
    assert described["IpAddress"] == target["IpAddress"]
    assert described["IpAddress"].startswith("10.0.1.") and described["SubnetId"] == vpcs["home_subnet"]
    # Boot mode authorizes instance calls by this name (iam_enforce): the IAM action of the call.
    assert control(endpoint, "GET", "/calls")["calls"] == {"elasticfilesystem:DescribeMountTargets": 1}
