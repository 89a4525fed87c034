"""Network namespaces for boot mode: create, delete, run commands in them, open sockets in them.

Every namespace, link and route the emulator makes carries its run's prefix (``hpcemu<pid>``),
so cleaning up after a crashed run removes exactly what that run made and nothing else.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"
HOST_ROUTES_LOCK = "/run/hpcemu-host-routes.lock"
COMMAND_TIMEOUT_S = 30

_libc = ctypes.CDLL(None, use_errno=True)
_setns_lock = threading.Lock()
T = TypeVar("T")


class NetError(RuntimeError):
    """A network set-up step failed; the message names the command and its output."""


def run(args: list[str], *, ns: str | None = None, check: bool = True, stdin: str | None = None) -> str:
    """Runs a command (inside ``ns`` when given), bounded in time; returns its stdout."""
    full = (["ip", "netns", "exec", ns] if ns else []) + args
    try:
        done = subprocess.run(
            full, input=stdin, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as err:
        raise NetError(f"{' '.join(full)}: no answer within {COMMAND_TIMEOUT_S} s") from err
    if check and done.returncode != 0:
        raise NetError(f"{' '.join(full)} failed ({done.returncode}): {(done.stderr or done.stdout).strip()}")
    return done.stdout


def ip(*args: str, ns: str | None = None, check: bool = True) -> str:
    return run(["ip", *args], ns=ns, check=check)


@contextlib.contextmanager
def host_routes_held() -> Iterator[None]:
    """Holds the host-wide lock over the host's routes into VPCs: every emulator on this host
    (each test's own, the demo's) takes it between looking at the host's routes and adding its
    own, so two VPCs of one CIDR started at once never both decide to route it from the host."""
    with open(HOST_ROUTES_LOCK, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def create(name: str) -> None:
    ip("netns", "add", name)
    ip("link", "set", "lo", "up", ns=name)


def delete(name: str) -> None:
    """Deletes a namespace; links inside it go with it."""
    if os.path.exists(os.path.join(NETNS_DIR, name)):
        ip("netns", "delete", name, check=False)


def names(prefix: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def host_links(pattern: re.Pattern[str]) -> list[str]:
    out = ip("-o", "link", "show", check=False)
    found = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            name = parts[1].strip().split("@", 1)[0]
            if pattern.match(name):
                found.append(name)
    return found


def inside(name: str, action: Callable[[], T]) -> T:
    """Calls ``action`` with this thread in namespace ``name``; sockets made there stay there.

    ``setns`` moves only the calling thread; a lock keeps one thread at a time switching.
    """
    with _setns_lock:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY)
        try:
            _setns(target)
            try:
                return action()
            finally:
                _setns(own)
        finally:
            os.close(target)
            os.close(own)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise NetError(f"setns: {os.strerror(err)} (boot mode needs root)")


def listen_tcp(ns: str, address: str, port: int) -> socket.socket:
    def make() -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(128)
        return sock

    return inside(ns, make)
