"""VPC networks of emulators side by side: the booted tests run two at a time, each with its own
emulator, and the host's routes into VPCs are shared by all of them.

Needs root and iproute2 (namespaces, veths, host routes); nothing boots.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import threading
from pathlib import Path

import netns
import vpcnet

CIDR = "10.88.0.0/16"  # no other test's VPC


class _TestVpc(vpcnet.Vpc):
    """A VPC whose host link no emulator's clean-up takes for a dead run's (``he<pid>v<n>``):
    emulators starting beside this test remove such links of processes that are not emulators."""

    @property
    def host_link(self) -> str:
        return f"ht{os.getpid():06x}v{self.index}"[:15]


def _require_root_and_ip() -> None:
    missing = [] if os.geteuid() == 0 else ["root"]
    if not shutil.which("ip"):
        missing.append("ip (apt-get install iproute2)")
    assert not missing, "the VPC network tests need: " + ", ".join(missing) + " (.ci/run runs them as root)"


def _host_routes(cidr: str) -> list[str]:
    return netns.ip("-4", "route", "show", "exact", cidr).splitlines()


def test_two_vpcs_of_one_cidr_made_at_once_get_one_host_route_and_one_client_namespace(tmp_path: Path) -> None:
    _require_root_and_ip()
    assert _host_routes(CIDR) == [], f"a route for {CIDR} is already on this host"
    prefix = f"hpcemutest-{os.getpid()}"
    vpcs = [
        _TestVpc(prefix, index, "123456789012", "us-east-1", f"vpc-side{index}", ipaddress.ip_network(CIDR),
                 str(tmp_path / f"vpc{index}"))
        for index in (0, 1)
    ]
    start = threading.Barrier(len(vpcs))
    failures: list[BaseException] = []

    def create(vpc: vpcnet.Vpc) -> None:
        start.wait()
        try:
            vpc.create(route_host=True)
        except BaseException as err:  # noqa: BLE001 - reported by the assertion below
            failures.append(err)

    threads = [threading.Thread(target=create, args=(vpc,)) for vpc in vpcs]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert failures == [], failures
        routed = [vpc for vpc in vpcs if vpc.host_route]
        assert len(routed) == 1, [(vpc.index, vpc.host_route, vpc.client_ns) for vpc in vpcs]
        (other,) = [vpc for vpc in vpcs if not vpc.host_route]
        assert other.client_ns == f"{prefix}-c{other.index}"
        assert len(_host_routes(CIDR)) == 1
        assert routed[0].host_link in _host_routes(CIDR)[0]
    finally:
        for vpc in vpcs:
            vpc.destroy()
            netns.ip("link", "del", vpc.host_link, check=False)  # made before a failed route
    assert _host_routes(CIDR) == []
    assert netns.names(prefix) == []
