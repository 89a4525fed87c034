"""Instance credentials and what they may do.

IMDS hands each booted instance temporary credentials of its instance profile's role (made by
moto's STS, so moto maps them to the instance's account). Calls signed with such credentials
are authorized against the role's inline and attached policies: an explicit Deny wins, else an
Allow whose Action and Resource match, else the call is denied as AWS denies it
(``UnauthorizedOperation`` for EC2, ``AccessDeniedException`` for JSON services,
``AccessDenied`` for query and REST services), naming the principal and the action.
Every other caller (the tests, the provider run by a user) stays unrestricted.

A call is one or more checks (:class:`Check`: action, resource, condition context), as AWS
makes them: TerminateInstances is checked per instance, with the instance's tags as
``aws:ResourceTag/<key>`` (and ``ec2:ResourceTag/<key>``); RunInstances and CreateFleet also
need ``ec2:CreateTags`` with ``ec2:CreateAction`` when they tag what they launch (in the
request or through its launch templates), and ``iam:PassRole`` on the role of every instance
profile they launch with (``iam:PassedToService`` = ``ec2.amazonaws.com``); a plain CreateTags
is checked per resource with its tags and the request's ``aws:RequestTag/<key>``.
Condition blocks are evaluated against that context with the String*, Arn* and Bool operators
(``...IfExists`` too); a statement using another operator does not apply.

SQS's batch actions are checked as the action they batch (DeleteMessageBatch as
``sqs:DeleteMessage``), over the JSON and the query protocol alike.

Limits: the Resource is known for SSM parameters, Secrets Manager secrets, SQS queues (from
QueueUrl or QueueName; their region is the one the call is signed for), the instances of
TerminateInstances and CreateTags and the roles of PassRole; for every other action
(EventBridge's among them) any Resource pattern matches.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

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


def _matches(patterns: list[str], value: str, ignore_case: bool = True) -> bool:
    for pattern in patterns:
        regex = "^" + re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".") + "$"
        if re.match(regex, value, re.IGNORECASE if ignore_case else 0):
            return True
    return False


@dataclass(frozen=True)
class Check:
    """One authorization AWS makes for a call: ``action`` on ``resource`` (None: any Resource
    pattern matches) with the condition keys of ``context`` (names in lower case)."""

    action: str
    resource: str | None = None
    context: tuple[tuple[str, str], ...] = ()


def _condition_holds(operator: str, key: str, wanted: Any, context: dict[str, str]) -> bool:
    base = operator[: -len("IfExists")] if operator.endswith("IfExists") else operator
    value = context.get(key.lower())
    if value is None:
        # AWS: a missing key satisfies ...IfExists and the negated operators, nothing else.
        return operator.endswith("IfExists") or "Not" in base
    wanted = [str(w) for w in _listed(wanted)]
    if base in ("StringEquals", "ArnEquals"):
        return value in wanted
    if base == "StringEqualsIgnoreCase":
        return value.lower() in [w.lower() for w in wanted]
    if base in ("StringLike", "ArnLike"):
        return _matches(wanted, value, ignore_case=False)
    if base in ("StringNotEquals", "ArnNotEquals"):
        return value not in wanted
    if base in ("StringNotLike", "ArnNotLike"):
        return not _matches(wanted, value, ignore_case=False)
    if base == "Bool":
        return value.lower() in [w.lower() for w in wanted]
    return False


def _conditions_hold(statement: dict[str, Any], context: dict[str, str]) -> bool:
    conditions = statement.get("Condition") or {}
    return all(
        _condition_holds(operator, key, wanted, context)
        for operator, pairs in conditions.items()
        for key, wanted in (pairs or {}).items()
    )


def decide(
    documents: list[dict[str, Any]], action: str, resource: str | None, context: dict[str, str] | None = None
) -> bool:
    """True when the policies allow ``action`` on ``resource`` (None: any Resource matches)
    under the condition keys of ``context``."""
    context = {k.lower(): v for k, v in (context or {}).items()}
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
            if not _conditions_hold(statement, context):
                continue
            if statement.get("Effect") == "Deny":
                return False
            if statement.get("Effect") == "Allow":
                allowed = True
    return allowed


def _listed_statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    statements = document.get("Statement", [])
    return [statements] if isinstance(statements, dict) else list(statements)


# Batch actions AWS authorizes as the action they batch.
AUTHORIZED_AS = {
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}
QUEUE_PATH = re.compile(r"^/(\d{12})/([^/]+)/?$")


def call_checks(session: Session, service: str, action: str, body: dict[str, Any], region: str, path: str = "") -> list[Check]:
    """The authorization check of a call to a JSON or query service: ``body`` is the JSON body
    or the query's fields (first values), ``region`` the one the call is signed for, ``path``
    the request's (a query-protocol SQS call may name its queue only there)."""
    full = f"{service}:{action}"
    return [Check(AUTHORIZED_AS.get(full, full), resource_of(session, service, body, region, path))]


def resource_of(session: Session, service: str, body: dict[str, Any], region: str | None = None, path: str = "") -> str | None:
    """The ARN a call acts on, where it is plain from the request; None when not known."""
    prefix = f"arn:aws:{service}:{region or session.region}:{session.account}"
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
    if service == "sqs":
        return _queue_arn(session, region or session.region, body, path)
    return None


def _queue_arn(session: Session, region: str, body: dict[str, Any], path: str) -> str | None:
    """A queue's ARN from QueueUrl (``.../<account>/<name>``), QueueName, or the request's path."""
    url = body.get("QueueUrl")
    found = QUEUE_PATH.match(urlparse(url).path) if isinstance(url, str) else QUEUE_PATH.match(path)
    if found:
        return f"arn:aws:sqs:{region}:{found.group(1)}:{found.group(2)}"
    name = body.get("QueueName")
    if isinstance(name, str) and name:
        owner = body.get("QueueOwnerAWSAccountId")
        return f"arn:aws:sqs:{region}:{owner if isinstance(owner, str) and owner else session.account}:{name}"
    return None


# --- the checks of an EC2 call ---------------------------------------------------------------

PASSED_TO = "ec2.amazonaws.com"
RESOURCE_KINDS = {"i": "instance", "vol": "volume", "eni": "network-interface", "sg": "security-group",
                  "subnet": "subnet", "vpc": "vpc", "lt": "launch-template", "fleet": "fleet"}


def _numbered(form: dict[str, list[str]], pattern: str) -> list[str]:
    """Values of the form fields whose names match ``pattern`` (a regex), in field order."""
    regex = re.compile(f"^{pattern}$")
    return [values[0] for name, values in form.items() if regex.match(name) and values]


def _tag_context(tags: dict[str, str], prefix: str) -> list[tuple[str, str]]:
    return [(f"{prefix}/{key}".lower(), value) for key, value in tags.items()]


def _resource_tags(session: Session, resource_id: str) -> dict[str, str]:
    from moto.ec2.models import ec2_backends

    return dict(ec2_backends[session.account][session.region].tags.get(resource_id, {}))


def _resource_arn(session: Session, resource_id: str) -> str:
    kind = RESOURCE_KINDS.get(resource_id.split("-", 1)[0], "resource")
    return f"arn:aws:ec2:{session.region}:{session.account}:{kind}/{resource_id}"


def _request_tags(form: dict[str, list[str]], prefix: str) -> dict[str, str]:
    keys = {name[: -len(".Key")]: values[0] for name, values in form.items() if name.startswith(prefix) and name.endswith(".Key")}
    return {key: (form.get(f"{stem}.Value") or [""])[0] for stem, key in keys.items()}


def _launch_templates(session: Session, form: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The data of the launch template versions a RunInstances or CreateFleet launches from."""
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[session.account][session.region]
    specs = [("LaunchTemplate.LaunchTemplateId", "LaunchTemplate.LaunchTemplateName", "LaunchTemplate.Version")]
    stems = {m.group(1) for name in form for m in [re.match(r"^(LaunchTemplateConfigs\.\d+\.LaunchTemplateSpecification)\.", name)] if m}
    specs += [(f"{s}.LaunchTemplateId", f"{s}.LaunchTemplateName", f"{s}.Version") for s in sorted(stems)]
    found = []
    for id_field, name_field, version_field in specs:
        template_id, name = (form.get(id_field) or [None])[0], (form.get(name_field) or [None])[0]
        try:
            template = backend.get_launch_template(template_id) if template_id else (
                backend.get_launch_template_by_name(name) if name else None)
        except Exception:  # an unknown template: EC2 itself answers that
            template = None
        if template is None:
            continue
        version = (form.get(version_field) or ["$Default"])[0]
        chosen = template.latest_version() if version == "$Latest" else (
            template.default_version() if version == "$Default" else template.get_version(int(version)))
        found.append(chosen.data)
    return found


def _passed_roles(session: Session, profiles: list[dict[str, Any]]) -> list[str]:
    from moto.iam.models import iam_backends

    iam = iam_backends[session.account]["global"]
    roles = []
    for profile in profiles:
        try:
            found = iam.get_instance_profile_by_arn(profile["Arn"]) if profile.get("Arn") else iam.get_instance_profile(profile["Name"])
        except Exception:  # no such profile: EC2 itself refuses the launch
            continue
        roles += [role.arn for role in found.roles]
    return roles


def ec2_checks(session: Session, action: str, form: dict[str, list[str]]) -> list[Check]:
    """The authorization checks of one EC2 call (form fields as parse_qs gives them)."""
    full = f"ec2:{action}"
    if action == "TerminateInstances":
        return [Check(full, _resource_arn(session, i), tuple(_tag_context(_resource_tags(session, i), "aws:ResourceTag")
                                                            + _tag_context(_resource_tags(session, i), "ec2:ResourceTag")))
                for i in _numbered(form, r"InstanceId\.\d+")] or [Check(full)]
    if action == "CreateTags":
        requested = _tag_context(_request_tags(form, "Tag."), "aws:RequestTag")
        return [Check(full, _resource_arn(session, r), tuple(_tag_context(_resource_tags(session, r), "aws:ResourceTag") + requested))
                for r in _numbered(form, r"ResourceId\.\d+")] or [Check(full)]
    checks = [Check(full)]
    if action in ("RunInstances", "CreateFleet"):
        templates = _launch_templates(session, form)
        tags = _request_tags(form, "TagSpecification.")
        if tags or any(t.get("TagSpecifications") or t.get("TagSpecification") for t in templates):
            checks.append(Check("ec2:CreateTags", None, (("ec2:createaction", action),)
                                + tuple(_tag_context(tags, "aws:RequestTag"))))
        profiles = [t.get("IamInstanceProfile") or {} for t in templates]
        profiles.append({"Arn": (form.get("IamInstanceProfile.Arn") or [None])[0],
                         "Name": (form.get("IamInstanceProfile.Name") or [None])[0]})
        for role in _passed_roles(session, [p for p in profiles if p.get("Arn") or p.get("Name")]):
            checks.append(Check("iam:PassRole", role, (("iam:passedtoservice", PASSED_TO),)))
    return checks


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
