"""EBS direct APIs, emulated: write a snapshot block by block, then read it back.

moto's EBS backend keeps blocks but validates nothing (no checksums, lengths, states,
idempotency or errors) and its snapshots are not EC2-shaped, so every call of the "ebs"
signing name is answered here (``install`` routes moto's EBS URLs to
:class:`EbsDirectResponse`). A snapshot started here is also an EC2 snapshot
(:class:`ec2_resources.TimedSnapshot`) with the same id in moto's EC2 backend of the
account and region: ``pending`` while blocks are written, ``completed``
``snapshot_delay_s`` after CompleteSnapshot, so DescribeSnapshots, RegisterImage and
DeleteSnapshot see it. State is kept per account and region in a moto ``BackendDict``,
so moto's reset clears it too.

Block data is kept in memory up to :data:`MAX_STORED_BYTES` per process (``--block-store-mib``
sets another limit), once per distinct content (all-zero blocks cost nothing, a block written again in another snapshot nothing
more); past that only checksums are kept and GetSnapshotBlock of such a block answers
InternalServerException saying so.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import secrets
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import moto.ebs.urls
from moto.core.base_backend import BackendDict, BaseBackend
from moto.core.common_types import TYPE_RESPONSE
from moto.core.responses import BaseResponse
from moto.ec2.models import ec2_backends
from moto.ec2.utils import random_snapshot_id

from config import CONFIG
from ec2_resources import TimedSnapshot

BLOCK_SIZE = 524288
BLOCKS_PER_GIB = (1 << 30) // BLOCK_SIZE
MAX_VOLUME_SIZE_GIB = 65536
MAX_TAGS = 50
MIN_PAGE, MAX_PAGE = 100, 10000
MIN_TIMEOUT_MIN, MAX_TIMEOUT_MIN = 10, 4320
MAX_STORED_BYTES = 1 << 30
BLOCK_TOKEN_LIFETIME_S = 7 * 24 * 3600
ZERO_DIGEST = hashlib.sha256(bytes(BLOCK_SIZE)).digest()
SNAPSHOT_ID = re.compile(r"^snap-[0-9a-f]+$")
KMS_KEY_ARN = re.compile(r"^arn:aws[a-z\-]*:kms:.*:[0-9]{12}:key/.*$")


class EbsError(Exception):
    """An EBS direct API error: REST-JSON, ``x-amzn-ErrorType`` header, ``{"Message", "Reason"}`` body."""

    STATUS = {
        "ValidationException": 400,
        "ResourceNotFoundException": 404,
        "AccessDeniedException": 403,
        "ConflictException": 409,
        "InternalServerException": 500,
    }

    def __init__(self, error_type: str, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.reason = reason
        self.status = self.STATUS.get(error_type, 400)

    def body(self) -> str:
        body = {"Message": self.message}
        if self.reason:
            body["Reason"] = self.reason
        return json.dumps(body)


def invalid(message: str, reason: str = "INVALID_PARAMETER_VALUE") -> EbsError:
    return EbsError("ValidationException", message, reason)


def not_found(snapshot_id: str) -> EbsError:
    return EbsError(
        "ResourceNotFoundException", f"The snapshot '{snapshot_id}' does not exist.", "SNAPSHOT_NOT_FOUND"
    )


# --- block storage ---------------------------------------------------------------------------------


class StoreBudget:
    """Bytes of block data held by this process; blocks give theirs back when garbage-collected."""

    def __init__(self, limit: int) -> None:
        self._lock = threading.Lock()
        self.limit = limit
        self.used = 0

    def reserve(self, size: int) -> bool:
        with self._lock:
            if self.used + size > self.limit:
                return False
            self.used += size
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self.used -= size


BUDGET = StoreBudget(MAX_STORED_BYTES)


class _Stored:
    """One kept block's bytes, shared by every block with the same digest (a disk published
    twice costs its memory once)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        weakref.finalize(self, BUDGET.release, len(data))


_STORED: weakref.WeakValueDictionary[bytes, _Stored] = weakref.WeakValueDictionary()
_STORED_LOCK = threading.Lock()


def _stored(digest: bytes, data: bytes) -> _Stored | None:
    with _STORED_LOCK:
        found = _STORED.get(digest)
        if found is None and BUDGET.reserve(len(data)):
            found = _Stored(data)
            _STORED[digest] = found
        return found


class Block:
    """One written 512 KiB block: its SHA-256, a read token, and the data when kept."""

    def __init__(self, digest: bytes, data: bytes) -> None:
        self.digest = digest
        self.token = base64.b64encode(secrets.token_bytes(24)).decode()
        self.zero = digest == ZERO_DIGEST
        self._stored = None if self.zero else _stored(digest, data)

    @property
    def data(self) -> bytes | None:
        return self._stored.data if self._stored is not None else None

    @property
    def checksum(self) -> str:
        return base64.b64encode(self.digest).decode()

    def read(self) -> bytes | None:
        return bytes(BLOCK_SIZE) if self.zero else self.data


@dataclass
class DirectSnapshot:
    """A snapshot started with StartSnapshot, and the blocks written to it."""

    id: str
    owner_id: str
    volume_size: int
    description: str | None
    tags: list[dict[str, str]]
    parent_id: str | None
    kms_key_arn: str | None
    start_time: float
    ec2: TimedSnapshot
    # Blocks written by PutSnapshotBlock, and (for a child) the parent's blocks as they were.
    written: dict[int, Block] = field(default_factory=dict)
    inherited: dict[int, Block] = field(default_factory=dict)
    sealed: bool = False

    @property
    def status(self) -> str:
        return self.ec2.status

    def visible_blocks(self) -> dict[int, Block]:
        blocks = dict(self.inherited)
        blocks.update(self.written)
        return blocks

    def start_response(self) -> dict[str, Any]:
        response: dict[str, Any] = {
            "SnapshotId": self.id,
            "OwnerId": self.owner_id,
            "Status": self.status,
            "StartTime": self.start_time,
            "VolumeSize": self.volume_size,
            "BlockSize": BLOCK_SIZE,
            "Tags": self.tags,
            "SseType": "sse-kms" if self.ec2.encrypted else "none",
        }
        for key, value in (
            ("Description", self.description),
            ("ParentSnapshotId", self.parent_id),
            ("KmsKeyArn", self.kms_key_arn),
        ):
            if value is not None:
                response[key] = value
        return response


# --- the backend -----------------------------------------------------------------------------------


class EbsDirectBackend(BaseBackend):
    """EBS direct API state of one account in one region; callers hold ``lock``."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.lock = threading.RLock()
        self.snapshots: dict[str, DirectSnapshot] = {}
        self.tokens: dict[str, tuple[str, str]] = {}

    @property
    def ec2(self) -> Any:
        return ec2_backends[self.account_id][self.region_name]

    def get(self, snapshot_id: str) -> DirectSnapshot:
        """A snapshot of ours that EC2 still has (DeleteSnapshot in EC2 deletes it here too)."""
        if not SNAPSHOT_ID.match(snapshot_id or ""):
            raise invalid(f"Invalid snapshot id '{snapshot_id}'.", "INVALID_SNAPSHOT_ID")
        snapshot = self.snapshots.get(snapshot_id)
        if snapshot is None or self.ec2.snapshots.get(snapshot_id) is not snapshot.ec2:
            self.snapshots.pop(snapshot_id, None)
            raise not_found(snapshot_id)
        return snapshot

    def readable(self, snapshot_id: str) -> DirectSnapshot:
        snapshot = self.get(snapshot_id)
        if snapshot.status != "completed":
            raise invalid(
                f"The snapshot '{snapshot_id}' is {snapshot.status}; only completed snapshots can be read.",
                "INVALID_SNAPSHOT_ID",
            )
        return snapshot

    # --- operations ---------------------------------------------------------------------------

    def start_snapshot(self, request: Request) -> tuple[int, dict[str, str], bytes]:
        params = request.json()
        volume_size = _volume_size(params.get("VolumeSize"))
        tags = _tags(params.get("Tags"))
        description = _optional_str(params, "Description", 255)
        parent_id = _optional_str(params, "ParentSnapshotId", 64)
        kms_key_arn = _optional_str(params, "KmsKeyArn", 2048)
        encrypted = params.get("Encrypted")
        if encrypted is not None and not isinstance(encrypted, bool):
            raise invalid("Encrypted must be a boolean.")
        _timeout(params.get("Timeout"))
        token = _optional_str(params, "ClientToken", 255)

        fingerprint = json.dumps({k: v for k, v in params.items() if k != "ClientToken"}, sort_keys=True)
        if token is not None and token in self.tokens:
            known_fingerprint, snapshot_id = self.tokens[token]
            if known_fingerprint != fingerprint:
                raise EbsError(
                    "ConflictException",
                    "The request uses the same client token as a previous, but non-identical request.",
                )
            if snapshot_id in self.snapshots and snapshot_id in self.ec2.snapshots:
                return 201, {}, _json(self.snapshots[snapshot_id].start_response())

        if parent_id is not None and encrypted is not None:
            raise invalid("You can't specify ParentSnapshotId and Encrypted in the same request.")
        parent = self._parent(parent_id, volume_size) if parent_id is not None else None
        is_encrypted, kms_key_arn = self._encryption(bool(encrypted), kms_key_arn, parent)

        snapshot_id = random_snapshot_id()
        ec2_snapshot = TimedSnapshot(
            self.ec2,
            snapshot_id,
            volume_size=volume_size,
            description=description or "",
            encrypted=is_encrypted,
            kms_key_id=kms_key_arn,
            ready_at=None,
        )
        self.ec2.snapshots[snapshot_id] = ec2_snapshot
        ec2_snapshot.add_tags({tag["Key"]: tag["Value"] for tag in tags})
        own_parent = self.snapshots.get(parent_id or "")
        snapshot = DirectSnapshot(
            id=snapshot_id,
            owner_id=self.account_id,
            volume_size=volume_size,
            description=description,
            tags=tags,
            parent_id=parent_id,
            kms_key_arn=kms_key_arn,
            start_time=time.time(),
            ec2=ec2_snapshot,
            # A parent written with these APIs lends its blocks; any other parent has none to read.
            inherited=own_parent.visible_blocks() if own_parent and own_parent.ec2 is parent else {},
        )
        self.snapshots[snapshot_id] = snapshot
        if token is not None:
            self.tokens[token] = (fingerprint, snapshot_id)
        return 201, {}, _json(snapshot.start_response())

    def _parent(self, parent_id: str, volume_size: int) -> Any:
        """The parent's EC2 snapshot, which must be completed and no larger than the new volume."""
        if not SNAPSHOT_ID.match(parent_id):
            raise invalid(f"Invalid parent snapshot id '{parent_id}'.", "INVALID_SNAPSHOT_ID")
        parent = self.ec2.snapshots.get(parent_id)
        if parent is None:
            raise not_found(parent_id)
        if parent.status != "completed":
            raise invalid(f"The parent snapshot '{parent_id}' is not completed.", "INVALID_SNAPSHOT_ID")
        if volume_size < parent.volume_size:
            raise invalid(
                f"VolumeSize {volume_size} is smaller than the parent snapshot's {parent.volume_size} GiB.",
                "INVALID_VOLUME_SIZE",
            )
        return parent

    def _encryption(self, encrypted: bool, kms_key_arn: str | None, parent: Any) -> tuple[bool, str | None]:
        """(encrypted, key ARN): asked for, inherited from the parent, or by the account's default."""
        inherited = bool(parent is not None and parent.encrypted)
        is_encrypted = encrypted or inherited or self.ec2.ebs_encryption_by_default
        if kms_key_arn is not None:
            if not KMS_KEY_ARN.match(kms_key_arn):
                raise invalid(f"Invalid KmsKeyArn '{kms_key_arn}'.", "INVALID_CUSTOMER_KEY")
            if not is_encrypted:
                raise invalid("KmsKeyArn requires Encrypted to be true.")
            return True, kms_key_arn
        if not is_encrypted:
            return False, None
        if inherited and parent.kms_key_id:
            return True, parent.kms_key_id
        return True, self.ec2.default_kms_key_id or self.ec2._create_default_encryption_key()

    def put_snapshot_block(self, request: Request) -> tuple[int, dict[str, str], bytes]:
        snapshot = self.get(request.path_params["snapshot_id"])
        index = _block_index(request.path_params["block_index"])
        if snapshot.status != "pending" or snapshot.sealed:
            raise invalid(
                f"The snapshot '{snapshot.id}' is {'completing' if snapshot.sealed else snapshot.status}; "
                "blocks can be written only to a pending snapshot.",
                "INVALID_SNAPSHOT_ID",
            )
        _check_in_volume(snapshot, index)
        length = request.int_header("x-amz-Data-Length", required=True)
        if length != BLOCK_SIZE:
            raise invalid(f"x-amz-Data-Length must be {BLOCK_SIZE}, not {length}.")
        algorithm = request.header("x-amz-Checksum-Algorithm")
        if algorithm != "SHA256":
            raise invalid("x-amz-Checksum-Algorithm must be SHA256.")
        checksum = request.header("x-amz-Checksum")
        if not checksum:
            raise invalid("x-amz-Checksum is required.")
        progress = request.int_header("x-amz-Progress")
        if progress is not None and not 0 <= progress <= 100:
            raise invalid("x-amz-Progress must be between 0 and 100.")
        data = request.body
        if len(data) != length:
            raise invalid(f"The block data is {len(data)} bytes; x-amz-Data-Length says {length}.")
        digest = request.digest or hashlib.sha256(data).digest()
        if base64.b64encode(digest).decode() != checksum:
            raise invalid(
                f"Checksum mismatch: the SHA256 of the block data is {base64.b64encode(digest).decode()}, "
                f"x-amz-Checksum says {checksum}."
            )
        snapshot.written[index] = Block(digest, data)
        if progress is not None:
            snapshot.ec2.write_progress = progress
        return 201, {"x-amz-Checksum": checksum, "x-amz-Checksum-Algorithm": "SHA256"}, b""

    def complete_snapshot(self, request: Request) -> tuple[int, dict[str, str], bytes]:
        snapshot = self.get(request.path_params["snapshot_id"])
        count = request.int_header("x-amz-ChangedBlocksCount", required=True)
        if count < 0:
            raise invalid("x-amz-ChangedBlocksCount must not be negative.")
        if count != len(snapshot.written):
            raise invalid(
                f"x-amz-ChangedBlocksCount is {count}, but {len(snapshot.written)} blocks were written "
                f"to snapshot '{snapshot.id}'."
            )
        checksum = request.header("x-amz-Checksum")
        algorithm = request.header("x-amz-Checksum-Algorithm")
        method = request.header("x-amz-Checksum-Aggregation-Method")
        if checksum is not None or algorithm is not None or method is not None:
            if algorithm != "SHA256" or method != "LINEAR" or not checksum:
                raise invalid(
                    "An aggregated checksum needs x-amz-Checksum, x-amz-Checksum-Algorithm SHA256 and "
                    "x-amz-Checksum-Aggregation-Method LINEAR."
                )
            aggregate = hashlib.sha256(b"".join(snapshot.written[i].digest for i in sorted(snapshot.written)))
            expected = base64.b64encode(aggregate.digest()).decode()
            if checksum != expected:
                raise invalid(
                    f"Checksum mismatch: the LINEAR SHA256 aggregate of the written blocks is {expected}, "
                    f"x-amz-Checksum says {checksum}."
                )
        if snapshot.status == "pending" and not snapshot.sealed:
            snapshot.sealed = True
            snapshot.ec2.ready_at = time.time() + CONFIG.snapshot().snapshot_delay_s
        return 202, {}, _json({"Status": snapshot.status})

    def list_snapshot_blocks(self, request: Request) -> tuple[int, dict[str, str], bytes]:
        snapshot = self.readable(request.path_params["snapshot_id"])
        blocks = snapshot.visible_blocks()
        start, page = _page(request, snapshot.id)
        indexes = sorted(i for i in blocks if i >= start)
        listed, rest = indexes[:page], indexes[page:]
        response: dict[str, Any] = {
            "Blocks": [{"BlockIndex": i, "BlockToken": blocks[i].token} for i in listed],
            "ExpiryTime": time.time() + BLOCK_TOKEN_LIFETIME_S,
            "VolumeSize": snapshot.volume_size,
            "BlockSize": BLOCK_SIZE,
        }
        if rest:
            response["NextToken"] = _page_token(snapshot.id, rest[0])
        return 200, {}, _json(response)

    def list_changed_blocks(self, request: Request) -> tuple[int, dict[str, str], bytes]:
        second = self.readable(request.path_params["snapshot_id"])
        first_id = request.query("firstSnapshotId")
        first_blocks = self.readable(first_id).visible_blocks() if first_id else {}
        second_blocks = second.visible_blocks()
        start, page = _page(request, second.id)
        changed = sorted(
            i
            for i in set(first_blocks) | set(second_blocks)
            if i >= start and (first_blocks.get(i) is None or first_blocks.get(i) is not second_blocks.get(i))
        )
        listed, rest = changed[:page], changed[page:]
        entries = []
        for i in listed:
            entry: dict[str, Any] = {"BlockIndex": i}
            if i in first_blocks:
                entry["FirstBlockToken"] = first_blocks[i].token
            if i in second_blocks:
                entry["SecondBlockToken"] = second_blocks[i].token
            entries.append(entry)
        response: dict[str, Any] = {
            "ChangedBlocks": entries,
            "ExpiryTime": time.time() + BLOCK_TOKEN_LIFETIME_S,
            "VolumeSize": second.volume_size,
            "BlockSize": BLOCK_SIZE,
        }
        if rest:
            response["NextToken"] = _page_token(second.id, rest[0])
        return 200, {}, _json(response)

    def get_snapshot_block(self, request: Request) -> tuple[int, dict[str, str], bytes]:
        snapshot = self.readable(request.path_params["snapshot_id"])
        index = _block_index(request.path_params["block_index"])
        _check_in_volume(snapshot, index)
        token = request.query("blockToken")
        if not token:
            raise invalid("blockToken is required.", "INVALID_BLOCK_TOKEN")
        block = snapshot.visible_blocks().get(index)
        if block is None or block.token != token:
            raise invalid(f"The block token is not valid for block {index} of '{snapshot.id}'.", "INVALID_BLOCK_TOKEN")
        data = block.read()
        if data is None:
            raise EbsError(
                "InternalServerException",
                f"The emulator kept only the checksum of block {index} of '{snapshot.id}': its block store "
                f"was full ({BUDGET.limit} bytes).",
            )
        headers = {
            "Content-Type": "application/octet-stream",
            "x-amz-Data-Length": str(len(data)),
            "x-amz-Checksum": block.checksum,
            "x-amz-Checksum-Algorithm": "SHA256",
        }
        return 200, headers, data

    def forget(self, snapshot_id: str) -> None:
        """Drops a snapshot's blocks (EC2 DeleteSnapshot)."""
        self.snapshots.pop(snapshot_id, None)


ebs_direct_backends = BackendDict(EbsDirectBackend, "ebs")


def forget_snapshot(account_id: str, region: str, snapshot_id: str) -> None:
    backend = ebs_direct_backends[account_id][region]
    with backend.lock:
        backend.forget(snapshot_id)


def has_blocks(account_id: str, region: str, snapshot_id: str) -> bool:
    """Whether a snapshot was written (or copied from one written) through the EBS direct APIs."""
    backend = ebs_direct_backends[account_id][region]
    with backend.lock:
        return snapshot_id in backend.snapshots


def snapshot_blocks(account_id: str, region: str, snapshot_id: str) -> tuple[int, list[tuple[int, bytes]]]:
    """A completed snapshot's size in bytes and its non-zero blocks (index, data), for booting it.

    Raises EbsError when the snapshot is unknown, not completed, or lost block data to the budget.
    """
    backend = ebs_direct_backends[account_id][region]
    with backend.lock:
        snapshot = backend.readable(snapshot_id)
        blocks = sorted(snapshot.visible_blocks().items())
        size = snapshot.volume_size << 30
    out = []
    for index, block in blocks:
        if block.zero:
            continue
        if block.data is None:
            raise EbsError(
                "InternalServerException",
                f"block {index} of {snapshot_id} was not kept (over the emulator's block store budget)",
            )
        out.append((index, block.data))
    return size, out


def share_blocks(account_id: str, source_region: str, source_id: str, region: str, copy: TimedSnapshot) -> None:
    """Makes the blocks of a snapshot written here readable from its copy (CopyImage) as well."""
    source_backend = ebs_direct_backends[account_id][source_region]
    with source_backend.lock:
        source = source_backend.snapshots.get(source_id)
        blocks = source.visible_blocks() if source is not None else {}
        size = source.volume_size if source is not None else copy.volume_size
    backend = ebs_direct_backends[account_id][region]
    with backend.lock:
        backend.snapshots[copy.id] = DirectSnapshot(
            id=copy.id,
            owner_id=account_id,
            volume_size=size,
            description=copy.description,
            tags=[],
            parent_id=None,
            kms_key_arn=copy.kms_key_id,
            start_time=time.time(),
            ec2=copy,
            inherited=blocks,
            sealed=True,
        )


# --- request parsing helpers -----------------------------------------------------------------------


@dataclass
class Request:
    """What the operations need from an HTTP request."""

    path_params: dict[str, str]
    headers: Any
    query_params: dict[str, list[str]]
    body: bytes
    # SHA-256 of the body, computed before the backend lock is taken (PutSnapshotBlock).
    digest: bytes | None = None

    def header(self, name: str) -> str | None:
        value = self.headers.get(name)
        return value if value not in (None, "") else None

    def int_header(self, name: str, required: bool = False) -> int | None:
        value = self.header(name)
        if value is None:
            if required:
                raise invalid(f"The {name} header is required.")
            return None
        try:
            return int(value)
        except ValueError:
            raise invalid(f"The {name} header must be an integer, not {value!r}.") from None

    def query(self, name: str) -> str | None:
        values = self.query_params.get(name)
        return values[0] if values else None

    def json(self) -> dict[str, Any]:
        if not self.body.strip():
            return {}
        try:
            params = json.loads(self.body)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise EbsError("ValidationException", f"The request body is not valid JSON: {err}") from err
        if not isinstance(params, dict):
            raise invalid("The request body must be a JSON object.")
        return params


def _json(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode("utf-8")


def _optional_str(params: dict[str, Any], key: str, max_length: int) -> str | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > max_length:
        raise invalid(f"{key} must be a string of 1 to {max_length} characters.")
    return value


def _volume_size(raw: Any) -> int:
    if raw is None:
        raise invalid("VolumeSize is required.")
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise invalid("VolumeSize must be an integer number of GiB.")
    if not 1 <= raw <= MAX_VOLUME_SIZE_GIB:
        # The service's own words (they appear in the SDKs' protocol tests).
        raise invalid(f"Invalid volume size: {raw}", "INVALID_VOLUME_SIZE")
    return raw


def _timeout(raw: Any) -> None:
    if raw is None:
        return
    if isinstance(raw, bool) or not isinstance(raw, int) or not MIN_TIMEOUT_MIN <= raw <= MAX_TIMEOUT_MIN:
        raise invalid(f"Timeout must be between {MIN_TIMEOUT_MIN} and {MAX_TIMEOUT_MIN} minutes.")


def _tags(raw: Any) -> list[dict[str, str]]:
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MAX_TAGS:
        raise invalid(f"Tags must be a list of at most {MAX_TAGS} tags.", "INVALID_TAG")
    tags = []
    for tag in raw:
        key = tag.get("Key") if isinstance(tag, dict) else None
        value = tag.get("Value", "") if isinstance(tag, dict) else None
        if not isinstance(key, str) or not 1 <= len(key) <= 127 or not isinstance(value, str) or len(value) > 255:
            raise invalid("Each tag needs a Key of 1 to 127 characters and a Value of at most 255.", "INVALID_TAG")
        if key.lower().startswith("aws:"):
            raise invalid(f"Tag keys starting with 'aws:' are reserved: {key}", "INVALID_TAG")
        tags.append({"Key": key, "Value": value})
    return tags


def _block_index(raw: str) -> int:
    if not raw.isdigit():
        raise invalid(f"The block index must be a non-negative integer, not {raw!r}.", "INVALID_BLOCK")
    return int(raw)


def _check_in_volume(snapshot: DirectSnapshot, index: int) -> None:
    last = snapshot.volume_size * BLOCKS_PER_GIB - 1
    if index > last:
        raise invalid(
            f"Block index {index} is outside the {snapshot.volume_size} GiB volume of '{snapshot.id}' "
            f"(0 to {last}).",
            "INVALID_BLOCK",
        )


def _page(request: Request, snapshot_id: str) -> tuple[int, int]:
    """(first block index, page size) from pageToken, startingBlockIndex and maxResults."""
    max_results = request.query("maxResults")
    page = MAX_PAGE
    if max_results is not None:
        if not max_results.isdigit() or int(max_results) > MAX_PAGE:
            raise invalid(f"maxResults must be at most {MAX_PAGE}.")
        page = max(int(max_results), MIN_PAGE)  # fewer than 100 still returns up to 100, as the service does
    token = request.query("pageToken")
    if token:
        try:
            decoded = json.loads(base64.b64decode(token, validate=True))
            if decoded["s"] != snapshot_id or not isinstance(decoded["i"], int):
                raise ValueError
            return decoded["i"], page
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise invalid("The pagination token is not valid.", "INVALID_PAGE_TOKEN") from None
    start = request.query("startingBlockIndex")
    if start is not None and not start.isdigit():
        raise invalid("startingBlockIndex must be a non-negative integer.")
    return int(start or 0), page


def _page_token(snapshot_id: str, next_index: int) -> str:
    return base64.b64encode(json.dumps({"s": snapshot_id, "i": next_index}).encode()).decode()


# --- the HTTP handler ------------------------------------------------------------------------------

Operation = Callable[[EbsDirectBackend, Request], tuple[int, dict[str, str], bytes]]
BLOCK_PATH = r"^/snapshots/(?P<snapshot_id>[^/]+)/blocks/(?P<block_index>[^/]+)/?$"
ROUTES: list[tuple[str, re.Pattern[str], Operation]] = [
    ("POST", re.compile(r"^/snapshots/?$"), EbsDirectBackend.start_snapshot),
    ("POST", re.compile(r"^/snapshots/completion/(?P<snapshot_id>[^/]+)/?$"), EbsDirectBackend.complete_snapshot),
    ("PUT", re.compile(BLOCK_PATH), EbsDirectBackend.put_snapshot_block),
    ("GET", re.compile(BLOCK_PATH), EbsDirectBackend.get_snapshot_block),
    ("GET", re.compile(r"^/snapshots/(?P<snapshot_id>[^/]+)/blocks/?$"), EbsDirectBackend.list_snapshot_blocks),
    (
        "GET",
        re.compile(r"^/snapshots/(?P<snapshot_id>[^/]+)/changedblocks/?$"),
        EbsDirectBackend.list_changed_blocks,
    ),
]


class EbsDirectResponse(BaseResponse):
    """Answers EBS direct API calls; moto resolves the caller's account and region."""

    use_raw_body = True

    def __init__(self) -> None:
        super().__init__(service_name="ebs")

    def call_action(self) -> TYPE_RESPONSE:
        headers = {"Content-Type": "application/json", "x-amzn-RequestId": str(uuid.uuid4())}
        try:
            operation, path_params = self._route()
            body = self.raw_body if isinstance(self.raw_body, bytes) else (self.raw_body or "").encode()
            request = Request(
                path_params=path_params,
                headers=self.headers,
                query_params=self._query_params(),
                body=body,
                digest=hashlib.sha256(body).digest() if self.method == "PUT" else None,
            )
            backend = ebs_direct_backends[self.current_account][self.region]
            with backend.lock:
                status, extra_headers, body = operation(backend, request)
            headers.update(extra_headers)
            return status, headers, body
        except EbsError as err:
            headers["x-amzn-ErrorType"] = err.error_type
            return err.status, headers, err.body()

    def _route(self) -> tuple[Operation, dict[str, str]]:
        for method, pattern, operation in ROUTES:
            match = pattern.match(self.path)
            if method == self.method and match:
                return operation, match.groupdict()
        raise EbsError("ValidationException", f"The emulator has no EBS direct API {self.method} {self.path}.")

    def _query_params(self) -> dict[str, list[str]]:
        return parse_qs(self.parsed_url.query, keep_blank_values=True)


def install() -> None:
    """Routes moto's EBS endpoint to :class:`EbsDirectResponse`; call before serving."""
    for path in list(moto.ebs.urls.url_paths):
        moto.ebs.urls.url_paths[path] = EbsDirectResponse.dispatch
