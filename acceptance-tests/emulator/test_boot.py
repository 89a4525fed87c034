"""Boot mode: instances are machines booted from the image hpc-image baked and published.

Everything goes through the EC2, IAM, EFS and SSM APIs and SSH; the control API is only read
(machines, IMDS request log) or used to inject faults. Needs root, systemd-container,
dnsmasq-base, iptables, openssh-client and the bake's tools (.ci/run installs them).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

import netns
from boot_harness import (
    Vpc,
    bake_image,
    machines,
    publish_image,
    require_boot_prerequisites,
    start_booting_emulator,
)
from harness import (
    ALL_EC2_EVENTS,
    INTERRUPTION_RULES,
    client,
    control,
    error_code,
    event_queue,
    events_until,
    instance_states,
    stop_emulator,
)

BUDGET = 5
USER_DATA = """#!/bin/bash
echo "user data ran on $(hostname)" > /var/tmp/user-data-ran
echo "HPCEMU-TEST: user data ran"
"""


@pytest.fixture(scope="module")
def boot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    require_boot_prerequisites()
    disk = bake_image()
    work = tmp_path_factory.mktemp("boot")
    boot_dir = work / "state"
    process, endpoint = start_booting_emulator(work / "port", BUDGET, boot_dir)
    try:
        image_id = publish_image(endpoint, disk, work)
        yield {"endpoint": endpoint, "image_id": image_id, "work": work, "boot_dir": boot_dir, "process": process}
    finally:
        code = stop_emulator(process)
    assert code == 0, (work / "emulator.err").read_text()
    prefix = f"hpcemu-{process.pid}-"
    assert netns.names(prefix) == [], "namespaces left after the emulator stopped"
    mounts = open("/proc/self/mountinfo", encoding="utf-8").read()
    assert str(boot_dir) not in mounts, "mounts left after the emulator stopped"


@pytest.fixture
def vpc(boot: dict[str, Any], tmp_path: Path) -> Iterator[Vpc]:
    network = Vpc(boot["endpoint"], "10.77.0.0/16", tmp_path)
    yield network
    ids = [
        i["InstanceId"]
        for r in network.ec2.describe_instances()["Reservations"]
        for i in r["Instances"]
        if i["State"]["Name"] not in ("terminated",)
    ]
    if ids:
        network.ec2.terminate_instances(InstanceIds=ids)
        for instance_id in ids:
            network.wait_state(instance_id, "terminated", timeout=60)


def test_run_instances_boots_the_image_runs_user_data_and_serves_imdsv2_ssh_and_console(
    boot: dict[str, Any], vpc: Vpc
) -> None:
    group = vpc.group("ssh", [vpc.ssh_from_vpc()])
    tags = [{"ResourceType": "instance", "Tags": [{"Key": "team", "Value": "physics"}]}]
    (instance_id,) = vpc.launch(
        [group], USER_DATA, metadata_tags=True, image_id=boot["image_id"], TagSpecifications=tags
    )
    assert vpc.describe(instance_id)["State"]["Name"] in ("pending", "running")
    address = vpc.wait_state(instance_id, "running")["PrivateIpAddress"]
    vpc.wait_ssh(address)

    status = vpc.ssh(address, "cloud-init status --wait --long", timeout=120, check=False).stdout
    assert "status: done" in status and "DataSourceEc2" in status, status
    assert "user data ran" in vpc.ssh(address, "cat /var/tmp/user-data-ran").stdout
    state = vpc.ssh(address, "systemctl is-system-running --wait; systemctl --failed --no-legend", timeout=120, check=False)
    assert state.stdout.split()[:1] == ["running"], state.stdout
    short = f"ip-{address.replace('.', '-')}"
    assert vpc.ssh(address, "hostname").stdout.strip() == short
    assert vpc.ssh(address, f"getent hosts {short}.ec2.internal").stdout.split()[0] == address

    imds = "http://169.254.169.254/latest"
    token = vpc.ssh(address, f"curl -sf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' {imds}/api/token").stdout
    read = vpc.ssh(address, f"curl -sf -H 'X-aws-ec2-metadata-token: {token}' {imds}/meta-data/instance-id").stdout
    assert read == instance_id
    v1 = vpc.ssh(address, f"curl -s -o /dev/null -w '%{{http_code}}' {imds}/meta-data/instance-id").stdout
    assert v1 == "401"
    # Instance metadata tags are on: the instance reads its own tags.
    tag = vpc.ssh(address, f"curl -sf -H 'X-aws-ec2-metadata-token: {token}' {imds}/meta-data/tags/instance/team")
    assert tag.stdout == "physics", tag

    wait = time.monotonic() + 30
    while "HPCEMU-TEST: user data ran" not in vpc.console(instance_id):
        assert time.monotonic() < wait, vpc.console(instance_id)[-2000:]
        time.sleep(1)

    machine = machines(boot["endpoint"])[instance_id]
    vpc.ec2.terminate_instances(InstanceIds=[instance_id])
    assert vpc.describe(instance_id)["State"]["Name"] in ("shutting-down", "terminated")
    vpc.wait_state(instance_id, "terminated")
    assert machine["Namespace"] not in netns.names("hpcemu-")
    machine_dir = boot["boot_dir"] / f"run-{boot['process'].pid}" / "machines" / instance_id
    assert str(machine_dir) not in open("/proc/self/mountinfo", encoding="utf-8").read()


def test_instances_reach_each_other_only_where_their_security_groups_allow(boot: dict[str, Any], vpc: Vpc) -> None:
    client_group = vpc.group("client", [vpc.ssh_from_vpc()])
    server_group = vpc.group(
        "server",
        [
            vpc.ssh_from_vpc(),
            {"IpProtocol": "tcp", "FromPort": 8080, "ToPort": 8080, "UserIdGroupPairs": [{"GroupId": client_group}]},
        ],
    )
    serve = "#!/bin/bash\ncd /tmp && for p in 8080 9090; do nohup python3 -m http.server $p >/dev/null 2>&1 & done\n"
    (client_id,) = vpc.launch([client_group], image_id=boot["image_id"])
    (server_id,) = vpc.launch([server_group], serve, image_id=boot["image_id"])
    client_ip = vpc.wait_state(client_id, "running")["PrivateIpAddress"]
    server_ip = vpc.wait_state(server_id, "running")["PrivateIpAddress"]
    vpc.wait_ssh(client_ip)
    vpc.wait_ssh(server_ip)
    vpc.ssh(server_ip, "cloud-init status --wait", timeout=120)
    vpc.ssh(server_ip, "for i in $(seq 30); do ss -ltn | grep -q :9090 && exit 0; sleep 1; done; exit 1")

    def probe(port: int) -> str:
        return vpc.ssh(client_ip, f"curl -s -m 3 -o /dev/null -w '%{{http_code}}' http://{server_ip}:{port}/", check=False).stdout

    assert probe(8080) == "200"
    assert probe(9090) == "000"  # no rule admits 9090: dropped, as a security group drops it
    vpc.ec2.authorize_security_group_ingress(
        GroupId=server_group,
        IpPermissions=[{"IpProtocol": "tcp", "FromPort": 9090, "ToPort": 9090, "IpRanges": [{"CidrIp": f"{client_ip}/32"}]}],
    )
    deadline = time.monotonic() + 10
    while probe(9090) != "200":
        assert time.monotonic() < deadline, "the new rule was not applied within 10 s"
    # The host reaches the VPC from inside its CIDR, but only port 22 admits that address.
    host = subprocess.run(["curl", "-s", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}", f"http://{server_ip}:8080/"],
                          capture_output=True, text=True, check=False)
    assert host.stdout == "000"


def test_instance_credentials_are_authorized_against_the_instance_profile_role(boot: dict[str, Any], vpc: Vpc) -> None:
    iam = client(boot["endpoint"], "iam")
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                     "Action": "sts:AssumeRole"}]}
    iam.create_role(RoleName="boot-node", AssumeRolePolicyDocument=json.dumps(trust))
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"}]}
    iam.put_role_policy(RoleName="boot-node", PolicyName="describe", PolicyDocument=json.dumps(policy))
    iam.create_instance_profile(InstanceProfileName="boot-node")
    iam.add_role_to_instance_profile(InstanceProfileName="boot-node", RoleName="boot-node")
    client(boot["endpoint"], "ssm").put_parameter(Name="/boot-test/value", Value="hello", Type="String")

    group = vpc.group("ssh", [vpc.ssh_from_vpc()])
    (instance_id,) = vpc.launch([group], image_id=boot["image_id"], IamInstanceProfile={"Name": "boot-node"})
    address = vpc.wait_state(instance_id, "running")["PrivateIpAddress"]
    vpc.wait_ssh(address)

    # hpc-node is the AWS SDK client in the image: its sweep reads SSM (denied) ...
    sweep = vpc.ssh(address, "sudo hpc-node sweep --cluster boot-test 2>&1", check=False)
    assert "AccessDenied" in sweep.stdout and "ssm:GetParametersByPath" in sweep.stdout, sweep.stdout
    # ... until the role allows it.
    allow = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ssm:GetParametersByPath",
                                                     "Resource": "arn:aws:ssm:*:*:parameter/hpcforge/*"}]}
    iam.put_role_policy(RoleName="boot-node", PolicyName="ssm", PolicyDocument=json.dumps(allow))
    sweep = vpc.ssh(address, "sudo hpc-node sweep --cluster boot-test 2>&1", check=False)
    assert "ssm:GetParametersByPath" not in sweep.stdout, sweep.stdout

    log = control(boot["endpoint"], "GET", f"/instances/{instance_id}/imds-log")["requests"]
    sdk = [r for r in log if "aws-sdk-rust" in r["user_agent"] and r["method"] == "GET"]
    assert sdk, log
    assert all(r["token"] and r["status"] == 200 for r in sdk), sdk


def test_files_on_efs_and_lustre_mounts_are_shared_between_instances(boot: dict[str, Any], vpc: Vpc) -> None:
    efs = client(boot["endpoint"], "efs")
    fs_id = efs.create_file_system(CreationToken="boot-test", Encrypted=True)["FileSystemId"]
    group = vpc.group("ssh", [vpc.ssh_from_vpc()])
    first, second = vpc.launch([group], image_id=boot["image_id"], count=2)
    name = f"{fs_id}.efs.us-east-1.amazonaws.com"
    addresses = [vpc.wait_state(i, "running")["PrivateIpAddress"] for i in (first, second)]
    for address in addresses:
        vpc.wait_ssh(address)
        vpc.ssh(address, f"sudo mkdir -p /mnt/efs && sudo mount -t nfs4 -o nfsvers=4.1 {name}:/ /mnt/efs")
    vpc.ssh(addresses[0], "echo shared-by-efs | sudo tee /mnt/efs/hello >/dev/null")
    assert vpc.ssh(addresses[1], "cat /mnt/efs/hello").stdout.strip() == "shared-by-efs"
    bad = vpc.ssh(addresses[1], "sudo mount -t nfs4 fs-0000000000000000.efs.us-east-1.amazonaws.com:/ /mnt", check=False)
    assert bad.returncode != 0 and "no such file system" in bad.stderr

    fsx = client(boot["endpoint"], "fsx")
    lustre = fsx.create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[vpc.subnet_id],
        LustreConfiguration={"DeploymentType": "SCRATCH_2"},
    )["FileSystem"]
    source = f"{lustre['DNSName']}@tcp:/{lustre['LustreConfiguration']['MountName']}"
    # As a user (and hpc_lustre_fs) does: mount once the file system is AVAILABLE. The emulator
    # makes its shared directory within a second of that.
    deadline = time.time() + 60
    while fsx.describe_file_systems(FileSystemIds=[lustre["FileSystemId"]])["FileSystems"][0]["Lifecycle"] != "AVAILABLE":
        assert time.time() < deadline, "the Lustre file system did not become AVAILABLE"
        time.sleep(0.5)
    time.sleep(1.5)
    for address in addresses:
        vpc.ssh(address, f"sudo mkdir -p /fsx && sudo mount -t lustre -o relatime,flock {source} /fsx")
    vpc.ssh(addresses[1], "echo on-lustre | sudo tee /fsx/data >/dev/null")
    assert vpc.ssh(addresses[0], "cat /fsx/data").stdout.strip() == "on-lustre"


def test_a_copied_image_boots_in_its_region(boot: dict[str, Any], tmp_path: Path) -> None:
    west = client(boot["endpoint"], "ec2", region="us-west-2")
    copied = west.copy_image(SourceImageId=boot["image_id"], SourceRegion="us-east-1", Name="hpcforge-boot-copy")["ImageId"]
    network = Vpc(boot["endpoint"], "10.81.0.0/16", tmp_path, region="us-west-2")
    group = network.group("ssh", [network.ssh_from_vpc()])
    (instance_id,) = network.launch([group], image_id=copied)
    try:
        address = network.wait_state(instance_id, "running")["PrivateIpAddress"]
        network.wait_ssh(address)
        imds = "http://169.254.169.254/latest"
        region = network.ssh(address, f"t=$(curl -sf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' {imds}/api/token); "
                                      f"curl -sf -H \"X-aws-ec2-metadata-token: $t\" {imds}/meta-data/placement/region").stdout
        assert region == "us-west-2"
        name = network.ssh(address, "hostname").stdout.strip()
        assert network.ssh(address, f"getent hosts {name}.us-west-2.compute.internal").stdout.split()[0] == address
    finally:
        network.ec2.terminate_instances(InstanceIds=[instance_id])
        network.wait_state(instance_id, "terminated")


def test_a_node_in_another_region_reaches_the_home_vpc_and_its_efs_only_through_an_active_peering_and_routes(
    boot: dict[str, Any], vpc: Vpc, tmp_path: Path
) -> None:
    """A us-west-2 compute node of a us-east-1 cluster, connected as the product connects it."""
    west = client(boot["endpoint"], "ec2", region="us-west-2")
    image = west.copy_image(SourceImageId=boot["image_id"], SourceRegion="us-east-1", Name="hpcforge-boot-peering")["ImageId"]
    remote = Vpc(boot["endpoint"], "10.83.0.0/16", tmp_path, region="us-west-2")
    home_group = vpc.group("head", [vpc.ssh_from_vpc()])
    remote_group = remote.group("compute", [remote.ssh_from_vpc()])
    efs = client(boot["endpoint"], "efs")
    fs_id = efs.create_file_system(CreationToken="peering-home", Encrypted=True)["FileSystemId"]
    nfs_group = vpc.group("nfs", [])
    target_ip = efs.create_mount_target(FileSystemId=fs_id, SubnetId=vpc.subnet_id, SecurityGroups=[nfs_group])["IpAddress"]
    (home_id,) = vpc.launch([home_group], image_id=boot["image_id"])
    (remote_id,) = remote.launch([remote_group], image_id=image)
    connection = None
    try:
        home_ip = vpc.wait_state(home_id, "running")["PrivateIpAddress"]
        remote_ip = remote.wait_state(remote_id, "running")["PrivateIpAddress"]
        vpc.wait_ssh(home_ip)
        remote.wait_ssh(remote_ip)
        reach_home = f"timeout 3 bash -c 'exec 3<>/dev/tcp/{home_ip}/22'"

        def mount_by_ip(directory: str) -> subprocess.CompletedProcess[str]:
            return remote.ssh(remote_ip, f"sudo mkdir -p {directory} && sudo mount -t nfs4 -o nfsvers=4.1 {target_ip}:/ {directory}",
                              check=False)

        def until(done: Any, what: str) -> None:
            deadline = time.monotonic() + 10
            while not done():
                assert time.monotonic() < deadline, f"{what} within 10 s"
                time.sleep(0.5)

        # Two VPCs, no peering: nothing gets across.
        assert remote.ssh(remote_ip, reach_home, check=False).returncode != 0
        unreachable = mount_by_ip("/mnt/home")
        assert unreachable.returncode != 0 and "mount target unreachable" in unreachable.stderr, unreachable.stderr

        # The product's peering: requested at home, accepted in the peer region, routed both ways
        # in every route table, the other VPC's CIDR admitted by one group per side.
        connection = vpc.ec2.create_vpc_peering_connection(
            VpcId=vpc.vpc_id, PeerVpcId=remote.vpc_id, PeerRegion="us-west-2"
        )["VpcPeeringConnection"]["VpcPeeringConnectionId"]
        west.accept_vpc_peering_connection(VpcPeeringConnectionId=connection)
        for side, peer_cidr in ((vpc, remote.cidr), (remote, vpc.cidr)):
            for table in side.ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [side.vpc_id]}])["RouteTables"]:
                side.ec2.create_route(RouteTableId=table["RouteTableId"], DestinationCidrBlock=peer_cidr,
                                      VpcPeeringConnectionId=connection)
        for side, group, peer_cidr in ((vpc, home_group, remote.cidr), (remote, remote_group, vpc.cidr)):
            side.ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[
                {"IpProtocol": "-1", "IpRanges": [{"CidrIp": peer_cidr}]}])
        until(lambda: remote.ssh(remote_ip, reach_home, check=False).returncode == 0, "the home node is not reachable")

        # The mount target answers once its own group admits NFS from the remote VPC.
        refused = mount_by_ip("/mnt/home")
        assert refused.returncode != 0 and "mount target unreachable" in refused.stderr, refused.stderr
        vpc.ec2.authorize_security_group_ingress(GroupId=nfs_group, IpPermissions=[
            {"IpProtocol": "tcp", "FromPort": 2049, "ToPort": 2049, "IpRanges": [{"CidrIp": remote.cidr}]}])
        until(lambda: mount_by_ip("/mnt/home").returncode == 0, "the EFS mount by IP did not succeed")
        remote.ssh(remote_ip, "echo from-us-west-2 | sudo tee /mnt/home/remote >/dev/null")
        name = f"{fs_id}.efs.us-east-1.amazonaws.com"
        vpc.ssh(home_ip, f"sudo mkdir -p /mnt/efs && sudo mount -t nfs4 {name}:/ /mnt/efs")
        assert vpc.ssh(home_ip, "cat /mnt/efs/remote").stdout.strip() == "from-us-west-2"
        # EFS names resolve only in their own region, even over a peering.
        by_name = remote.ssh(remote_ip, f"sudo mkdir -p /mnt/byname && sudo mount -t nfs4 {name}:/ /mnt/byname", check=False)
        assert by_name.returncode != 0 and f"Failed to resolve server {name}" in by_name.stderr, by_name.stderr

        # Routing is not stateful: without the home side's route, replies no longer get back.
        home_table = vpc.ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc.vpc_id]}])["RouteTables"][0]
        vpc.ec2.delete_route(RouteTableId=home_table["RouteTableId"], DestinationCidrBlock=remote.cidr)
        until(lambda: remote.ssh(remote_ip, reach_home, check=False).returncode != 0, "the deleted route still carries")
        cut = mount_by_ip("/mnt/again")
        assert cut.returncode != 0 and "mount target unreachable" in cut.stderr, cut.stderr
    finally:
        if connection is not None:
            vpc.ec2.delete_vpc_peering_connection(VpcPeeringConnectionId=connection)
        remote.ec2.terminate_instances(InstanceIds=[remote_id])
        remote.wait_state(remote_id, "terminated")


def test_capacity_is_machines_and_a_machine_that_never_arrives_says_so(boot: dict[str, Any], vpc: Vpc) -> None:
    group = vpc.group("ssh", [vpc.ssh_from_vpc()])
    with pytest.raises(ClientError) as excinfo:
        vpc.launch([group], image_id=boot["image_id"], count=BUDGET + 1)
    assert error_code(excinfo) == "InsufficientInstanceCapacity"
    assert "machine budget" in str(excinfo.value)

    control(boot["endpoint"], "POST", "/faults", {"service": "ec2", "action": "RunInstances", "boot": "never-arrives",
                                                 "count": 1})
    try:
        (instance_id,) = vpc.launch([group], USER_DATA, image_id=boot["image_id"])
        address = vpc.wait_state(instance_id, "running")["PrivateIpAddress"]
        assert "never-arrives" in vpc.console(instance_id)
        assert vpc.ssh(address, "true", check=False, timeout=20).returncode != 0
    finally:
        control(boot["endpoint"], "DELETE", "/faults")


def test_an_ami_without_a_disk_is_refused_in_boot_mode(boot: dict[str, Any], vpc: Vpc) -> None:
    builtin = vpc.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    with pytest.raises(ClientError) as excinfo:
        vpc.launch([], image_id=builtin)
    assert builtin in str(excinfo.value) and "no disk to boot" in str(excinfo.value)


def test_stale_state_of_a_crashed_run_is_removed(boot: dict[str, Any], tmp_path: Path) -> None:
    state = tmp_path / "state"
    crashed = state / "run-999999"
    (crashed / "machines").mkdir(parents=True)
    netns.create("hpcemu-999999-v0")
    try:
        process, _ = start_booting_emulator(tmp_path / "port", 1, state)
        assert stop_emulator(process) == 0
    finally:
        netns.delete("hpcemu-999999-v0")
    assert not crashed.exists()
    assert "hpcemu-999999-v0" not in netns.names("hpcemu-")
    assert os.listdir(state) == []


def test_a_vpc_not_routed_from_the_host_is_reached_through_its_client_namespace(
    boot: dict[str, Any], tmp_path: Path
) -> None:
    # As on a host whose own network overlaps the VPC's CIDR: no route from the host, the VPC's
    # client side in a namespace of its own, where SSH and the security groups work as from the host.
    process, endpoint = start_booting_emulator(tmp_path / "port", 1, tmp_path / "state", "--no-host-routes")
    try:
        image_id = publish_image(endpoint, bake_image(), tmp_path)
        network = Vpc(endpoint, "10.79.0.0/16", tmp_path)
        group = network.group("ssh", [network.ssh_from_vpc()])
        (instance_id,) = network.launch([group], image_id=image_id)
        address = network.wait_state(instance_id, "running")["PrivateIpAddress"]
        machine = machines(endpoint)[instance_id]
        assert machine["RoutedFromHost"] is False and machine["ClientNamespace"] == f"hpcemu-{process.pid}-c0"
        assert netns.ip("-4", "route", "show", "10.79.0.0/16").strip() == "", "the host got a route to the VPC"
        network.wait_ssh(address)
        who = network.ssh(address, "echo $SSH_CLIENT").stdout.split()
        assert who and who[0] == machine["ClientAddress"] == "10.79.255.254"
    finally:
        assert stop_emulator(process) == 0, (tmp_path / "emulator.err").read_text()
    assert netns.names(f"hpcemu-{process.pid}-") == [], "namespaces left after the emulator stopped"


def test_stop_start_keeps_the_root_disk_and_a_poweroff_inside_stops_the_instance(boot: dict[str, Any], vpc: Vpc) -> None:
    group = vpc.group("ssh", [vpc.ssh_from_vpc()])
    (instance_id,) = vpc.launch([group], image_id=boot["image_id"])
    address = vpc.wait_state(instance_id, "running")["PrivateIpAddress"]
    vpc.wait_ssh(address)
    vpc.ssh(address, "cloud-init status --wait >/dev/null; echo kept | sudo tee /var/tmp/kept >/dev/null")

    vpc.ec2.stop_instances(InstanceIds=[instance_id])
    assert vpc.describe(instance_id)["State"]["Name"] in ("stopping", "stopped")
    vpc.wait_state(instance_id, "stopped")
    vpc.ec2.start_instances(InstanceIds=[instance_id])
    address = vpc.wait_state(instance_id, "running")["PrivateIpAddress"]
    vpc.wait_ssh(address)
    assert vpc.ssh(address, "cat /var/tmp/kept").stdout.strip() == "kept"

    # A timer powers off after the SSH session has closed: a poweroff that races the session's
    # end can leave the client waiting on a connection nobody closes.
    vpc.ssh(address, "sudo systemd-run --quiet --on-active=2 systemctl poweroff")
    stopped = vpc.wait_state(instance_id, "stopped")
    assert stopped["StateReason"]["Code"] == "Client.InstanceInitiatedShutdown"


def test_boot_faults_a_machine_that_dies_and_a_spot_interruption(boot: dict[str, Any], vpc: Vpc) -> None:
    group = vpc.group("ssh", [vpc.ssh_from_vpc()])
    control(boot["endpoint"], "POST", "/faults", [
        {"service": "ec2", "action": "RunInstances", "boot": "dies-at-boot", "delay_s": 1, "count": 1},
    ])
    try:
        (dying,) = vpc.launch([group], image_id=boot["image_id"])
        died = vpc.wait_state(dying, "terminated")
        assert died["StateReason"]["Code"] == "Server.InternalError"
    finally:
        control(boot["endpoint"], "DELETE", "/faults")

    # The host under a running instance fails: no shutdown runs on it, and EC2 ends it, letting
    # go of its data volume (available again, for the instance that replaces it).
    (failing,) = vpc.launch([group], image_id=boot["image_id"])
    running = vpc.wait_state(failing, "running")
    address = running["PrivateIpAddress"]
    zone = running["Placement"]["AvailabilityZone"]
    data = vpc.ec2.create_volume(AvailabilityZone=zone, Size=1, Encrypted=True)["VolumeId"]
    vpc.ec2.attach_volume(VolumeId=data, InstanceId=failing, Device="/dev/sdf")
    vpc.wait_ssh(address)
    assert control(boot["endpoint"], "POST", f"/instances/{failing}/fail")["failed"] is True
    failed = vpc.wait_state(failing, "terminated", timeout=30)
    assert failed["StateReason"]["Code"] == "Server.InternalError"
    volume = vpc.ec2.describe_volumes(VolumeIds=[data])["Volumes"][0]
    assert (volume["State"], volume["Attachments"]) == ("available", []), volume
    vpc.ec2.delete_volume(VolumeId=data)
    gone = control(boot["endpoint"], "POST", f"/instances/{failing}/fail", expect=404)
    assert "no running machine" in json.dumps(gone), gone

    sqs, events = client(boot["endpoint"], "sqs"), client(boot["endpoint"], "events")
    interruptions = event_queue(sqs, events, "boot-interruptions", INTERRUPTION_RULES)
    everything = event_queue(sqs, events, "boot-ec2-events", ALL_EC2_EVENTS)
    control(boot["endpoint"], "POST", "/faults", [
        # Time to boot and answer SSH before the end, on a host busy with other tests' machines.
        {"service": "ec2", "action": "RunInstances", "boot": "spot-interruption", "delay_s": 60,
         "match": {"Lifecycle": "spot"}},
    ])
    try:
        (spot,) = vpc.launch([group], image_id=boot["image_id"],
                             InstanceMarketOptions={"MarketType": "spot"})
        address = vpc.wait_state(spot, "running")["PrivateIpAddress"]
        vpc.wait_ssh(address)
        imds = "http://169.254.169.254/latest"
        notice = vpc.ssh(address, f"t=$(curl -sf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' {imds}/api/token); "
                                  f"curl -sf -H \"X-aws-ec2-metadata-token: $t\" {imds}/meta-data/spot/instance-action").stdout
        assert json.loads(notice)["action"] == "terminate", notice
        vpc.wait_state(spot, "terminated", timeout=90)
        # EventBridge: the warning with the notice, then the machine's states, each once.
        # The instance's last event may reach a queue just after DescribeInstances says terminated.
        ended = lambda events: instance_states(events, spot)[-1:] == ["terminated"]  # noqa: E731
        received = [e for e in events_until(sqs, interruptions, ended) if e["detail"]["instance-id"] == spot]
        assert received[0]["detail-type"] == "EC2 Spot Instance Interruption Warning", received
        assert received[0]["detail"] == {"instance-id": spot, "instance-action": "terminate"}
        assert instance_states(received, spot) == ["shutting-down", "terminated"], received
        seen = events_until(sqs, everything, ended)
        assert instance_states(seen, spot) == ["pending", "running", "shutting-down", "terminated"], seen
    finally:
        control(boot["endpoint"], "DELETE", "/faults")


def test_a_volume_and_a_network_interface_outlive_the_instance_and_move_to_the_next(
    boot: dict[str, Any], vpc: Vpc
) -> None:
    group = vpc.group("ssh", [vpc.ssh_from_vpc()])
    eni = vpc.ec2.create_network_interface(SubnetId=vpc.subnet_id, Groups=[group])["NetworkInterface"]
    nic = [{"DeviceIndex": 0, "NetworkInterfaceId": eni["NetworkInterfaceId"]}]
    launch = {
        "ImageId": boot["image_id"], "InstanceType": "c7i.large", "MinCount": 1, "MaxCount": 1,
        "KeyName": vpc.key_name, "NetworkInterfaces": nic,
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
    }
    first = vpc.ec2.run_instances(**launch)["Instances"][0]["InstanceId"]
    address = vpc.wait_state(first, "running")["PrivateIpAddress"]
    assert address == eni["PrivateIpAddress"]
    with pytest.raises(ClientError) as taken:
        vpc.ec2.run_instances(**launch)
    assert error_code(taken) == "InvalidNetworkInterface.InUse"

    zone = vpc.describe(first)["Placement"]["AvailabilityZone"]
    volume = vpc.ec2.create_volume(AvailabilityZone=zone, Size=1, VolumeType="gp3", Encrypted=True)["VolumeId"]
    other_zone = vpc.ec2.create_volume(AvailabilityZone="us-east-1b", Size=1)["VolumeId"]
    with pytest.raises(ClientError) as elsewhere:
        vpc.ec2.attach_volume(VolumeId=other_zone, InstanceId=first, Device="/dev/sdg")
    assert error_code(elsewhere) == "InvalidVolume.ZoneMismatch"
    vpc.ec2.attach_volume(VolumeId=volume, InstanceId=first, Device="/dev/sdf")
    vpc.wait_ssh(address)
    by_id = f"/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_{volume.replace('-', '')}"
    vpc.ssh(address, f"for i in $(seq 50); do [ -b {by_id} ] && break; sleep 0.2; done; test -b {by_id}")
    vpc.ssh(address, f"sudo mkfs.ext4 -q {by_id} && sudo mkdir -p /data && sudo mount {by_id} /data && "
            "echo kept | sudo tee /data/proof >/dev/null && sync")
    with pytest.raises(ClientError) as busy:
        vpc.ec2.delete_volume(VolumeId=volume)
    assert error_code(busy) == "VolumeInUse"

    vpc.ec2.terminate_instances(InstanceIds=[first])
    vpc.wait_state(first, "terminated")
    described = vpc.ec2.describe_network_interfaces(NetworkInterfaceIds=[eni["NetworkInterfaceId"]])
    assert described["NetworkInterfaces"][0]["Status"] == "available"

    second = vpc.ec2.run_instances(**launch)["Instances"][0]["InstanceId"]
    assert vpc.wait_state(second, "running")["PrivateIpAddress"] == address
    vpc.ec2.attach_volume(VolumeId=volume, InstanceId=second, Device="/dev/sdf")
    vpc.wait_ssh(address)
    vpc.ssh(address, f"for i in $(seq 50); do [ -b {by_id} ] && break; sleep 0.2; done; "
            f"sudo mkdir -p /data && sudo mount {by_id} /data")
    assert vpc.ssh(address, "cat /data/proof").stdout.strip() == "kept"
    # ModifyVolume: no shrinking; growing shows on the attached device at once, and the file
    # system grows into it (offline: this host's kernel refuses ext4's online growth to
    # processes without CAP_SYS_RESOURCE, which the host itself lacks).
    vpc.ec2.modify_volume(VolumeId=volume, Size=2)
    assert vpc.ssh(address, f"sudo blockdev --getsize64 {by_id}").stdout.strip() == str(2 << 30)
    with pytest.raises(ClientError) as shrink:
        vpc.ec2.modify_volume(VolumeId=volume, Size=1)
    assert error_code(shrink) == "InvalidParameterValue"
    assert "smaller" in str(shrink.value)
    vpc.ssh(address, f"sudo umount /data && sudo e2fsck -f -p {by_id} && sudo resize2fs {by_id} && "
            f"sudo mount {by_id} /data")
    blocks = vpc.ssh(address, "df --output=size -B1M /data | tail -1").stdout.strip()
    assert int(blocks) > 1500, blocks
    assert vpc.ssh(address, "cat /data/proof").stdout.strip() == "kept"
    vpc.ssh(address, "sudo umount /data")
    # A snapshot keeps the volume's data as it is; a volume made from it starts with that data
    # after the first volume is gone.
    snapshot = vpc.ec2.create_snapshot(VolumeId=volume, Description="the proof")["SnapshotId"]
    vpc.ec2.detach_volume(VolumeId=volume)
    vpc.ssh(address, f"! test -e {by_id}")
    vpc.ec2.delete_volume(VolumeId=volume)
    run = boot["boot_dir"] / f"run-{boot['process'].pid}"
    assert not (run / "volumes" / f"{volume}.img").exists()
    with pytest.raises(ClientError) as small:
        vpc.ec2.create_volume(AvailabilityZone=zone, SnapshotId=snapshot, Size=1, Encrypted=True)
    assert error_code(small) == "InvalidParameterValue" and "too small" in str(small.value)
    restored = vpc.ec2.create_volume(AvailabilityZone=zone, SnapshotId=snapshot, Encrypted=True)["VolumeId"]
    vpc.ec2.attach_volume(VolumeId=restored, InstanceId=second, Device="/dev/sdg")
    restored_id = f"/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_{restored.replace('-', '')}"
    vpc.ssh(address, f"for i in $(seq 50); do [ -b {restored_id} ] && break; sleep 0.2; done; "
            f"sudo mkdir -p /restored && sudo mount {restored_id} /restored")
    assert vpc.ssh(address, "cat /restored/proof").stdout.strip() == "kept"
    vpc.ssh(address, "sudo umount /restored")
    vpc.ec2.detach_volume(VolumeId=restored)
    vpc.ssh(address, f"! test -e {restored_id}")
    vpc.ec2.delete_volume(VolumeId=restored)
    vpc.ec2.delete_snapshot(SnapshotId=snapshot)
    assert not (run / "snapshots" / f"{snapshot}.img").exists()
