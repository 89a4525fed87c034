"""The networks booted instances live on: one namespace per VPC, one per instance.

Each instance's eth0 is a veth whose other end (``e<N>``) sits in its VPC's namespace with
the subnet's router address (the subnet's base + 1, as EC2 reserves it) and proxy ARP, and a
route for exactly the instance's address. So every packet between instances is routed by the
VPC's namespace, where the security groups are enforced (``firewall``) and where an instance,
root or not, cannot change them. The namespace also holds the link-local services every
instance reaches without a security group (IMDS on 169.254.169.254, DNS on 169.254.169.253,
the AWS endpoint on 169.254.169.250) and dnsmasq answering DHCP by MAC and the EC2 names of
the VPC (``ip-10-0-1-5.ec2.internal``, or ``ip-….<region>.compute.internal`` outside
us-east-1). It has no default route: an address with no instance behind it goes nowhere.

The host reaches the VPC through one veth, from the VPC's last address (as a client VPN in the
VPC would), with a route for exactly the VPC's CIDR. A CIDR that overlaps an address or route
the host already uses is not routed from the host (nor any, with ``--no-host-routes``): that
veth then ends in a namespace of its own (``<run>-c<N>``, the instances' ``ClientNamespace``),
where ``ip netns exec`` reaches the instances just as the host would.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import subprocess
import threading
from dataclasses import dataclass, field

import netns

log = logging.getLogger("emulator.boot")

IMDS_ADDRESS = "169.254.169.254"
DNS_ADDRESS = "169.254.169.253"
ENDPOINT_ADDRESS = "169.254.169.250"
HOST_SIDE = "h0"


def ec2_hostname(address: str, region: str) -> str:
    """EC2's private DNS name of an address (the IP-based form)."""
    label = "ip-" + address.replace(".", "-")
    return f"{label}.ec2.internal" if region == "us-east-1" else f"{label}.{region}.compute.internal"


def host_conflicts() -> list[ipaddress.IPv4Network]:
    """Networks the host already uses: its addresses, routes (but the default) and resolvers."""
    used: list[ipaddress.IPv4Network] = []
    for line in netns.ip("-4", "-o", "addr", "show", check=False).splitlines():
        parts = line.split()
        if "inet" in parts:
            used.append(ipaddress.ip_interface(parts[parts.index("inet") + 1]).network)
    for line in netns.ip("-4", "route", "show", "table", "all", check=False).splitlines():
        parts = line.split()
        if parts and parts[0] not in ("default", "broadcast", "local", "unreachable") and "/" in parts[0]:
            try:
                used.append(ipaddress.ip_network(parts[0], strict=False))
            except ValueError:
                pass
        if "via" in parts:
            used.append(ipaddress.ip_network(parts[parts.index("via") + 1] + "/32", strict=False))
    try:
        with open("/etc/resolv.conf", encoding="utf-8") as handle:
            for line in handle:
                words = line.split()
                if len(words) > 1 and words[0] == "nameserver" and ":" not in words[1]:
                    used.append(ipaddress.ip_network(words[1] + "/32"))
    except OSError:
        pass
    return used


@dataclass
class Vpc:
    """The namespace of one VPC (account, region, VPC id) and what runs in it."""

    run_prefix: str
    index: int
    account: str
    region: str
    vpc_id: str
    cidr: ipaddress.IPv4Network
    state_dir: str
    subnets: dict[str, ipaddress.IPv4Network] = field(default_factory=dict)
    hosts: dict[str, tuple[str, str]] = field(default_factory=dict)  # mac -> (address, hostname)
    host_route: bool = False
    client_address: str | None = None
    client_ns: str | None = None
    dnsmasq: subprocess.Popen[bytes] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def ns(self) -> str:
        return f"{self.run_prefix}-v{self.index}"

    @property
    def host_link(self) -> str:
        return f"he{os.getpid():06x}v{self.index}"[:15]

    @property
    def client_side(self) -> str:
        """The namespace standing for the host when the host must not route the VPC's CIDR."""
        return f"{self.run_prefix}-c{self.index}"

    def create(self, route_host: bool) -> None:
        os.makedirs(self.state_dir, exist_ok=True)
        netns.create(self.ns)
        netns.run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0"], ns=self.ns)
        for address in (IMDS_ADDRESS, DNS_ADDRESS, ENDPOINT_ADDRESS):
            netns.ip("addr", "add", f"{address}/32", "dev", "lo", ns=self.ns)
        self._connect_client(route_host)

    def _connect_client(self, route_host: bool) -> None:
        """Plugs the VPC's client side (its last address, as a client VPN would have) into ``h0``:
        the host itself, or a namespace of its own when the host must not get a route for the
        CIDR (``route_host`` off, or the CIDR overlaps a network the host uses). Emulators started
        side by side (each test its own, the demo) decide under one host-wide lock, so two VPCs of
        one CIDR never both get the route."""
        with netns.host_routes_held():
            conflicts = [net for net in host_conflicts() if net.overlaps(self.cidr)] if route_host else []
            side = None if route_host and not conflicts else self.client_side
            if side is not None:
                why = f"it overlaps {', '.join(map(str, conflicts))} on this host" if conflicts else "--no-host-routes"
                log.warning(
                    "VPC %s (%s) is not routed from the host (%s): reach its instances with 'ip netns exec %s ...'",
                    self.vpc_id, self.cidr, why, side,
                )
                netns.create(side)
            link = self.host_link if side is None else "c0"
            self.client_address = str(self.cidr.broadcast_address - 1)
            netns.ip("link", "add", link, "type", "veth", "peer", "name", HOST_SIDE, "netns", self.ns, ns=side)
            netns.ip("addr", "add", f"{self.client_address}/32", "dev", link, ns=side)
            netns.ip("link", "set", link, "up", ns=side)
            netns.ip("link", "set", HOST_SIDE, "up", ns=self.ns)
            netns.run(["sysctl", "-q", "-w", f"net.ipv4.conf.{HOST_SIDE}.proxy_arp=1"], ns=self.ns)
            netns.ip("route", "add", f"{self.client_address}/32", "dev", HOST_SIDE, ns=self.ns)
            netns.ip("route", "add", str(self.cidr), "dev", link, "src", self.client_address, ns=side)
            self.host_route = side is None
            self.client_ns = side

    def add_subnet(self, subnet_id: str, cidr: str) -> None:
        with self.lock:
            if subnet_id in self.subnets:
                return
            self.subnets[subnet_id] = ipaddress.ip_network(cidr)
            self._restart_dnsmasq()

    def attach(self, instance_ns: str, link: str, mac: str, address: str, subnet_id: str) -> None:
        """Plugs an instance's namespace into the VPC: eth0 there (its ENI's MAC), ``link`` here."""
        network = self.subnets[subnet_id]
        netns.ip("link", "del", link, ns=self.ns, check=False)
        netns.ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", instance_ns, ns=self.ns)
        netns.ip("link", "set", "eth0", "address", mac, ns=instance_ns)
        netns.ip("link", "set", "eth0", "up", ns=instance_ns)
        router = network.network_address + 1
        netns.ip("addr", "add", f"{router}/{network.prefixlen}", "dev", link, "noprefixroute", ns=self.ns)
        netns.run(["sysctl", "-q", "-w", f"net.ipv4.conf.{link}.proxy_arp=1"], ns=self.ns)
        netns.ip("link", "set", link, "up", ns=self.ns)
        netns.ip("route", "replace", f"{address}/32", "dev", link, ns=self.ns)
        with self.lock:
            self.hosts[mac] = (address, ec2_hostname(address, self.region))
            self._write_hosts()
        self._reload_dnsmasq()

    def detach(self, mac: str) -> None:
        """Unplugs an instance: its name goes, and so does its lease, so that its address (which
        EC2 may give the next instance) is not held for a MAC that is gone."""
        with self.lock:
            if self.hosts.pop(mac, None) is None:
                return
            leases = os.path.join(self.state_dir, "leases")
            self.stop_dnsmasq()
            try:
                with open(leases, encoding="utf-8") as handle:
                    kept = [line for line in handle if mac.lower() not in line.lower()]
                _write(leases, "".join(kept))
            except OSError:
                pass
            self._restart_dnsmasq()

    def _write_hosts(self) -> None:
        dhcp = "".join(f"{mac},{address}\n" for mac, (address, _) in sorted(self.hosts.items()))
        names = "".join(
            f"{address} {name} {name.split('.', 1)[0]}\n" for address, name in sorted(self.hosts.values())
        )
        _write(os.path.join(self.state_dir, "dhcp-hosts"), dhcp)
        _write(os.path.join(self.state_dir, "hosts"), names)

    def _restart_dnsmasq(self) -> None:
        self.stop_dnsmasq()
        self._write_hosts()
        domain = "ec2.internal" if self.region == "us-east-1" else f"{self.region}.compute.internal"
        args = [
            "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
            "--no-poll", "--user=root", "--bind-dynamic", "--interface=e*", f"--listen-address={DNS_ADDRESS}",
            f"--addn-hosts={self.state_dir}/hosts", f"--dhcp-hostsfile={self.state_dir}/dhcp-hosts",
            f"--dhcp-leasefile={self.state_dir}/leases", f"--pid-file={self.state_dir}/dnsmasq.pid",
            f"--log-facility={self.state_dir}/dnsmasq.log", f"--domain={domain}",
            f"--dhcp-option=option:dns-server,{DNS_ADDRESS}", f"--dhcp-option=option:domain-name,{domain}",
            "--dhcp-authoritative",
        ]
        for network in self.subnets.values():
            args.append(f"--dhcp-range={network.network_address},static,{network.netmask},12h")
        self.dnsmasq = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(f"{self.state_dir}/dnsmasq.err", "ab"),
        )

    def _reload_dnsmasq(self) -> None:
        if self.dnsmasq is not None and self.dnsmasq.poll() is None:
            try:
                with open(f"{self.state_dir}/dnsmasq.pid", encoding="utf-8") as handle:
                    os.kill(int(handle.read().strip()), signal.SIGHUP)
            except (OSError, ValueError):
                self.dnsmasq.send_signal(signal.SIGHUP)

    def stop_dnsmasq(self) -> None:
        if self.dnsmasq is not None and self.dnsmasq.poll() is None:
            self.dnsmasq.terminate()
            try:
                self.dnsmasq.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.dnsmasq.kill()
                self.dnsmasq.wait(timeout=5)
        self.dnsmasq = None

    def destroy(self) -> None:
        self.stop_dnsmasq()
        if self.host_route:
            netns.ip("route", "del", str(self.cidr), "dev", self.host_link, check=False)
            netns.ip("link", "del", self.host_link, check=False)
            self.host_route = False
        if self.client_ns is not None:
            netns.delete(self.client_ns)
        netns.delete(self.ns)


def _write(path: str, text: str) -> None:
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)
