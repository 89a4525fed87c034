"""The instance metadata service of booted instances (169.254.169.254 in each VPC namespace).

Instances are told apart by source address (their private IP). IMDSv2: ``PUT
/latest/api/token`` with ``X-aws-ec2-metadata-token-ttl-seconds`` (1..21600) gives a token
bound to the instance; a GET with an unknown or expired token is 401; a GET without one is
401 when the instance requires tokens (``HttpTokens=required``), as on EC2. Paths work under
``/latest/`` and every dated version.

One limit, documented in the README: cloud-init 22.4 asks for a token only once it has
identified AWS (from /sys/hypervisor/uuid, which systemd-nspawn's own sysfs does not have), so
requests made by cloud-init's HTTP stack (User-Agent ``Cloud-Init/…`` or ``python-requests/…``)
are answered without one. curl, the AWS SDKs and the product must use tokens; the request log
records who did.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socket import socket
from typing import Any

MAX_TTL_S = 21600
TOKENLESS_AGENTS = ("Cloud-Init/", "python-requests/")
Tree = dict[str, Any]


@dataclass
class RequestRecord:
    """One metadata request, kept per instance so a test can see who used tokens."""

    path: str
    method: str
    token: bool
    status: int
    user_agent: str


@dataclass
class MetadataSource:
    """What IMDS needs of an instance; built by the machine manager."""

    instance_id: str
    tokens_required: bool
    tree: Callable[[], Tree]
    user_data: Callable[[], bytes | None]
    log: list[RequestRecord] = field(default_factory=list)


class Imds:
    """Tokens and the request handler; ``lookup(address)`` finds the instance at an address."""

    def __init__(self, lookup: Callable[[str], MetadataSource | None]) -> None:
        self.lookup = lookup
        self._tokens: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def issue(self, instance_id: str, ttl: int) -> str:
        token = secrets.token_urlsafe(40)
        with self._lock:
            now = time.monotonic()
            self._tokens = {k: v for k, v in self._tokens.items() if v[1] > now}
            self._tokens[token] = (instance_id, now + ttl)
        return token

    def valid(self, token: str, instance_id: str) -> bool:
        with self._lock:
            found = self._tokens.get(token)
        return found is not None and found[0] == instance_id and found[1] > time.monotonic()

    def serve(self, sock: socket) -> ThreadingHTTPServer:
        imds = self

        class Handler(_Handler):
            service = imds

        server = ThreadingHTTPServer(sock.getsockname()[:2], Handler, bind_and_activate=False)
        server.socket.close()
        server.socket = sock
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="imds", daemon=True).start()
        return server


class _Handler(BaseHTTPRequestHandler):
    service: Imds
    protocol_version = "HTTP/1.1"
    server_version = "EC2ws"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def _answer(self, status: int, body: bytes = b"", content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _source(self) -> MetadataSource | None:
        return self.service.lookup(self.client_address[0])

    def _record(self, source: MetadataSource, token: bool, status: int) -> None:
        source.log.append(RequestRecord(self.path, self.command, token, status, self.headers.get("User-Agent", "")))
        del source.log[:-500]

    def do_PUT(self) -> None:  # noqa: N802 - http.server's naming
        source = self._source()
        if source is None:
            return self._answer(404)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path.rstrip("/") != "/latest/api/token":
            return self._answer(404)
        if self.headers.get("X-Forwarded-For"):
            self._record(source, False, 403)
            return self._answer(403)
        try:
            ttl = int(self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", ""))
        except ValueError:
            ttl = 0
        if not 1 <= ttl <= MAX_TTL_S:
            self._record(source, False, 400)
            return self._answer(400)
        token = self.service.issue(source.instance_id, ttl)
        self._record(source, False, 200)
        self.send_response(200)
        self.send_header("X-aws-ec2-metadata-token-ttl-seconds", str(ttl))
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(token)))
        self.end_headers()
        self.wfile.write(token.encode())

    def do_GET(self) -> None:  # noqa: N802
        source = self._source()
        if source is None:
            return self._answer(404)
        token = self.headers.get("X-aws-ec2-metadata-token")
        if token is not None and not self.service.valid(token, source.instance_id):
            self._record(source, True, 401)
            return self._answer(401)
        tokenless_client = self.headers.get("User-Agent", "").startswith(TOKENLESS_AGENTS)
        if token is None and source.tokens_required and not tokenless_client:
            self._record(source, False, 401)
            return self._answer(401)
        try:
            status, body = answer(self.path, source)
        except Exception:  # noqa: BLE001 - a bug here must show, not hang the instance
            logging.getLogger("emulator.boot").exception("IMDS %s", self.path)
            status, body = 500, b""
        self._record(source, token is not None, status)
        self._answer(status, body)

    do_HEAD = do_GET


def answer(path: str, source: MetadataSource) -> tuple[int, bytes]:
    """The status and body for a GET of ``path``."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if not parts:
        return 200, b"latest\n"
    rest = parts[1:]
    if not rest:
        return 200, b"dynamic\nmeta-data\nuser-data"
    if rest[0] == "user-data":
        data = source.user_data()
        return (404, b"") if data is None else (200, data)
    node: Any = {"meta-data": None, "dynamic": None}
    if rest[0] == "meta-data":
        node = source.tree()
    elif rest[0] == "dynamic":
        node = source.tree().get("_dynamic", {})
    else:
        return 404, b""
    for part in rest[1:]:
        if not isinstance(node, dict) or part not in node:
            return 404, b""
        node = node[part]
    if isinstance(node, dict):
        if "_listing" in node:
            return 200, str(node["_listing"]).encode()
        names = [f"{k}/" if isinstance(v, dict) else k for k, v in node.items() if not k.startswith("_")]
        return 200, "\n".join(names).encode()
    if isinstance(node, (list, tuple)):
        return 200, "\n".join(map(str, node)).encode()
    if isinstance(node, (bytes, bytearray)):
        return 200, bytes(node)
    return 200, (json.dumps(node) if isinstance(node, (int, float, bool)) else str(node)).encode()
