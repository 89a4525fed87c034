"""Instance credentials and what they may do.

IMDS hands each booted instance temporary credentials of its instance profile's role (made by
moto's STS, so moto maps them to the instance's account). Calls signed with such credentials
are authorized against the role's inline and attached policies: an explicit Deny wins, else an
Allow whose Action and Resource match, else the call is denied as AWS denies it
(``UnauthorizedOperation`` for EC2, ``AccessDeniedException`` for JSON services,
``AccessDenied`` for query and REST services), naming the principal and the action.
Every other caller (the tests, the provider run by a user) stays unrestricted.

Limits: Condition blocks are not evaluated (a statement with conditions applies as if they
held); the Resource is known for SSM parameters and Secrets Manager secrets, and for every
other action any Resource pattern matches.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from faults import PROTOCOL_EC2, PROTOCOL_JSON, FaultError

SESSION_S = 6 * 3600
RENEW_BEFORE_S = 15 * 60
ACCESS_KEY = re.compile(r"Credential=([^/,\s]+)/")


@dataclass
class Session:
    account: str
    region: str
    role_arn: str
    role_name: str
    instance_id: str
    access_key: str
    secret_key: str
    token: str
    expires: float


_lock = threading.Lock()
_by_instance: dict[str, Session] = {}
_by_key: dict[str, Session] = {}


def credentials_for(account: str, region: str, role: Any, instance_id: str) -> dict[str, Any]:
    """The instance's current credentials for ``role`` (renewed 15 minutes before they expire)."""
    from moto.sts.models import sts_backends

    with _lock:
        session = _by_instance.get(instance_id)
        if session is None or session.role_arn != role.arn or session.expires - time.time() < RENEW_BEFORE_S:
            assumed = sts_backends[account]["global"].assume_role(
                region_name=region, role_session_name=instance_id, role_arn=role.arn,
                policy=None, duration=SESSION_S, external_id=None,
            )
            session = Session(
                account=account, region=region, role_arn=role.arn, role_name=role.name, instance_id=instance_id,
                access_key=assumed.access_key_id, secret_key=assumed.secret_access_key,
                token=assumed.session_token, expires=time.time() + SESSION_S,
            )
            _by_instance[instance_id] = session
            _by_key[session.access_key] = session
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    return {
        "_role": session.role_name,
        "Code": "Success",
        "LastUpdated": time.strftime(stamp, time.gmtime(session.expires - SESSION_S)),
        "Type": "AWS-HMAC",
        "AccessKeyId": session.access_key,
        "SecretAccessKey": session.secret_key,
        "Token": session.token,
        "Expiration": time.strftime(stamp, time.gmtime(session.expires)),
    }


def session_of(environ: dict[str, Any]) -> Session | None:
    found = ACCESS_KEY.search(environ.get("HTTP_AUTHORIZATION", ""))
    if found is None:
        return None
    with _lock:
        return _by_key.get(found.group(1))


def forget(instance_id: str) -> None:
    with _lock:
        session = _by_instance.pop(instance_id, None)
        if session is not None:
            _by_key.pop(session.access_key, None)


def reset() -> None:
    with _lock:
        _by_instance.clear()
        _by_key.clear()


# --- evaluation ------------------------------------------------------------------------------


def role_documents(session: Session) -> list[dict[str, Any]]:
    from moto.iam.models import iam_backends

    iam = iam_backends[session.account]["global"]
    role = next((r for r in iam.roles.values() if r.arn == session.role_arn), None)
    if role is None:
        return []
    documents = [json.loads(unquote(doc)) if isinstance(doc, str) else doc for doc in role.policies.values()]
    for policy in role.managed_policies.values():
        version = next((v for v in policy.versions if v.is_default), None)
        if version is not None:
            document = version.document
            documents.append(json.loads(unquote(document)) if isinstance(document, str) else document)
    return documents


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _matches(patterns: list[str], value: str) -> bool:
    for pattern in patterns:
        regex = "^" + re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".") + "$"
        if re.match(regex, value, re.IGNORECASE):
            return True
    return False


def decide(documents: list[dict[str, Any]], action: str, resource: str | None) -> bool:
    """True when the policies allow ``action`` on ``resource`` (None: any Resource matches)."""
    allowed = False
    for document in documents:
        for statement in _listed_statements(document):
            if "NotAction" in statement:
                concerned = not _matches(_listed(statement["NotAction"]), action)
            else:
                concerned = _matches(_listed(statement.get("Action")), action)
            if not concerned:
                continue
            if resource is not None:
                if "NotResource" in statement:
                    if _matches(_listed(statement["NotResource"]), resource):
                        continue
                elif not _matches(_listed(statement.get("Resource", "*")), resource):
                    continue
            if statement.get("Effect") == "Deny":
                return False
            if statement.get("Effect") == "Allow":
                allowed = True
    return allowed


def _listed_statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    statements = document.get("Statement", [])
    return [statements] if isinstance(statements, dict) else list(statements)


def resource_of(session: Session, service: str, body: dict[str, Any]) -> str | None:
    """The ARN a call acts on, where it is plain from the request; None when not known."""
    prefix = f"arn:aws:{service}:{session.region}:{session.account}"
    if service == "ssm":
        name = body.get("Name") or body.get("Path")
        if isinstance(name, str):
            return f"{prefix}:parameter/{name.lstrip('/')}"
        names = body.get("Names")
        if isinstance(names, list) and len(names) == 1:
            return f"{prefix}:parameter/{str(names[0]).lstrip('/')}"
    if service == "secretsmanager":
        secret = body.get("SecretId")
        if isinstance(secret, str):
            return secret if secret.startswith("arn:") else f"{prefix}:secret:{secret}"
    return None


def denial(session: Session, action: str, protocol: str) -> FaultError:
    principal = f"arn:aws:sts::{session.account}:assumed-role/{session.role_name}/{session.instance_id}"
    message = (
        f"User: {principal} is not authorized to perform: {action} because no identity-based policy "
        "allows the action"
    )
    if protocol == PROTOCOL_EC2:
        return FaultError("UnauthorizedOperation", f"You are not authorized to perform this operation. {message}", 403)
    if protocol == PROTOCOL_JSON:
        return FaultError("AccessDeniedException", message, 400)
    return FaultError("AccessDenied", message, 403)
