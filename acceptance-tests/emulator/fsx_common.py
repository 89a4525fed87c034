"""Shared pieces of the FSx emulation: errors, parameter access, ids, pagination, tags."""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from typing import Any, TypeVar, cast

from moto.core.exceptions import JsonRESTError

T = TypeVar("T")
Params = dict[str, Any]


class FsxError(JsonRESTError):
    """An FSx error in the JSON 1.1 wire shape: ``{"__type": code, "Message": ...}``.

    Extra keyword members (``Parameter``, ``InvalidSubnetId``, ``ResourceARN`` ...)
    are the modeled fields of that error shape.
    """

    def __init__(self, error_code: str, message: str, status: int = 400, **members: Any) -> None:
        super().__init__(error_code, message)
        self.code = status
        self.description = json.dumps({"__type": error_code, "Message": message, **members})
        self.content_type = "application/x-amz-json-1.1"


def bad_request(message: str) -> FsxError:
    return FsxError("BadRequest", message)


def incompatible(parameter: str, message: str) -> FsxError:
    return FsxError("IncompatibleParameterError", message, Parameter=parameter)


def new_id(prefix: str) -> str:
    """An FSx-style id: prefix, dash, 17 lowercase hex digits."""
    return f"{prefix}-{uuid.uuid4().hex[:17]}"


def get_param(params: Params, key: str, kind: type[T], where: str = "") -> T | None:
    """Returns ``params[key]`` checked to be of ``kind``, or None; BadRequest when mistyped."""
    value = params.get(key)
    if value is None:
        return None
    expected: tuple[type, ...] = (int,) if kind is int else (kind,)
    if not isinstance(value, expected) or (kind is not bool and isinstance(value, bool)):
        raise bad_request(f"Parameter {_name(key, where)} must be of type {kind.__name__}")
    return cast(T, value)


def require_param(params: Params, key: str, kind: type[T], where: str = "") -> T:
    """Like :func:`get_param`, but a missing value is a BadRequest."""
    value = get_param(params, key, kind, where)
    if value is None:
        raise bad_request(f"Missing required parameter: {_name(key, where)}")
    return value


def _name(key: str, where: str) -> str:
    return f"{where}.{key}" if where else key


def reject_unknown(params: Params, allowed: set[str], where: str) -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise bad_request(f"Unsupported parameter(s) in {where}: {', '.join(unknown)}")


def fingerprint(params: Params) -> str:
    """Canonical form of a request, used to compare retries that share a ClientRequestToken."""
    return json.dumps({k: v for k, v in params.items() if k != "ClientRequestToken"}, sort_keys=True)


def paginate(items: list[T], params: Params, max_limit: int = 2147483647) -> tuple[list[T], str | None]:
    """Slices ``items`` by MaxResults/NextToken; the token encodes the next offset."""
    max_results = get_param(params, "MaxResults", int)
    if max_results is not None and not 1 <= max_results <= max_limit:
        raise bad_request(f"MaxResults must be between 1 and {max_limit}")
    limit = max_results or max_limit
    start = 0
    token = get_param(params, "NextToken", str)
    if token is not None:
        try:
            start = int(base64.urlsafe_b64decode(token.encode()).decode())
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise bad_request("The NextToken value is invalid") from None
    page = items[start : start + limit]
    end = start + len(page)
    next_token = base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(items) else None
    return page, next_token


def parse_tags(raw: Any, where: str = "Tags") -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise bad_request(f"{where} must be a list of {{Key, Value}} objects")
    tags: dict[str, str] = {}
    for tag in raw:
        if not isinstance(tag, dict) or not isinstance(tag.get("Key"), str) or not tag["Key"]:
            raise bad_request(f"Each entry of {where} needs a non-empty Key")
        value = tag.get("Value", "")
        if not isinstance(value, str):
            raise bad_request(f"Tag value for {tag['Key']!r} must be a string")
        tags[tag["Key"]] = value
    return tags


def render_tags(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": key, "Value": value} for key, value in tags.items()]


def without_none(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value is not None}
