"""Fault injection: rules, a thread-safe engine, and AWS-shaped error rendering.

A rule selects calls by ``service`` and (optionally) ``action`` and then fires:
always, for the first ``count`` matching calls, or with probability ``ratio``
(drawn from a seeded RNG). A firing rule adds ``latency_ms`` of delay and, when
it has a ``code``, turns the call into that error.

Rules without ``match`` are applied by the WSGI middleware to whole requests. A rule with
``lost_answer`` lets the call be served, then answers the caller with its error instead: the
answer lost on the way back (a timeout, a reset connection), after which a client retries a
call whose work is already done.
Rules with ``match`` select EC2 launches by placement and are applied inside the
EC2 handlers: RunInstances answers with an error, an instant CreateFleet reports
the failed capacity pool in its 200 response's ``Errors`` list. A CreateFleet rule with
``capacity`` is a pool that holds that many instances: launches take from it until it is
used up, then fail with the rule's code (a partial fulfilment, as EC2 gives).
"""

from __future__ import annotations

import json
import random
import threading
import uuid
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

MATCH_KEYS = ("AvailabilityZone", "InstanceType", "SubnetId", "Lifecycle")
MATCH_ACTIONS = ("RunInstances", "CreateFleet")
RULE_KEYS = {
    "service", "action", "code", "message", "http_status", "count", "ratio", "latency_ms", "match", "boot", "delay_s",
    "capacity", "lost_answer",
}
# Boot faults (boot mode): what happens to the machines of matching launches.
BOOT_FAULTS = ("never-arrives", "dies-at-boot", "spot-interruption")
BOOT_DELAY_DEFAULTS = {"never-arrives": 0.0, "dies-at-boot": 2.0, "spot-interruption": 120.0}


class FaultRuleError(ValueError):
    """A fault rule that cannot be accepted; the message says why."""


def default_http_status(code: str) -> int:
    if "Unavailable" in code:
        return 503
    if "Internal" in code:
        return 500
    return 400


@dataclass
class FaultRule:
    id: str
    service: str
    action: str | None
    code: str | None
    message: str | None
    http_status: int
    count: int | None
    ratio: float | None
    latency_s: float
    match: dict[str, str] | None
    boot: str | None = None
    delay_s: float = 0.0
    # A pool with this many instances of capacity: launches take from it, then fail with ``code``.
    capacity: int | None = None
    # Served first: the error replaces the call's answer (see the module's docstring).
    lost_answer: bool = False
    used: int = 0
    fired: int = 0

    @classmethod
    def parse(cls, raw: Any, rule_id: str) -> FaultRule:
        if not isinstance(raw, dict):
            raise FaultRuleError("a fault rule must be a JSON object")
        unknown = set(raw) - RULE_KEYS
        if unknown:
            raise FaultRuleError(f"unknown fault rule keys: {', '.join(sorted(unknown))}")
        service = raw.get("service")
        if not isinstance(service, str) or not service:
            raise FaultRuleError('\'service\' is required (e.g. "fsx", "ec2", "sts")')
        action = _optional_str(raw, "action")
        code = _optional_str(raw, "code")
        message = _optional_str(raw, "message")
        count, ratio = raw.get("count"), raw.get("ratio")
        if count is not None and ratio is not None:
            raise FaultRuleError("give either 'count' or 'ratio', not both")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            raise FaultRuleError("'count' must be a positive integer")
        if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1):
            raise FaultRuleError("'ratio' must be a number in (0, 1]")
        latency_ms = raw.get("latency_ms", 0)
        if isinstance(latency_ms, bool) or not isinstance(latency_ms, (int, float)) or latency_ms < 0:
            raise FaultRuleError("'latency_ms' must be a non-negative number")
        boot, delay_s = _boot_fault(raw, service, action, code)
        if code is None and not latency_ms and boot is None:
            raise FaultRuleError("a rule needs a 'code' (to fail), 'latency_ms' (to delay) or 'boot' (a machine fault)")
        http_status = raw.get("http_status", default_http_status(code or ""))
        if isinstance(http_status, bool) or not isinstance(http_status, int) or not 400 <= http_status <= 599:
            raise FaultRuleError("'http_status' must be an integer between 400 and 599")
        match = raw.get("match")
        if match is not None:
            _validate_match(match, service, action)
        capacity = _capacity(raw, action, code, match)
        lost_answer = raw.get("lost_answer", False)
        if not isinstance(lost_answer, bool):
            raise FaultRuleError("'lost_answer' must be true or false")
        if lost_answer and (code is None or match is not None or boot is not None):
            raise FaultRuleError("'lost_answer' needs a 'code' and takes no 'match' or 'boot' (it applies to whole calls)")
        return cls(
            id=rule_id,
            service=service.lower(),
            action=action,
            code=code,
            message=message,
            http_status=http_status,
            count=count,
            ratio=float(ratio) if ratio is not None else None,
            latency_s=latency_ms / 1000.0,
            match=match,
            boot=boot,
            delay_s=delay_s,
            capacity=capacity,
            lost_answer=lost_answer,
        )

    def applies_to(self, service: str, action: str, attrs: dict[str, str] | None) -> bool:
        if self.service != service or (self.action is not None and self.action != action):
            return False
        if self.boot is not None:
            return False  # boot rules are walked by boot_fault, once per launched machine
        if attrs is None:
            return self.match is None
        return self.match is not None and all(attrs.get(k) == v for k, v in self.match.items())

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "service": self.service}
        for key in ("action", "code", "message", "count", "ratio", "match", "boot", "capacity"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.lost_answer:
            out["lost_answer"] = True
        if self.code is not None:
            out["http_status"] = self.http_status
        if self.latency_s:
            out["latency_ms"] = self.latency_s * 1000.0
        if self.boot is not None:
            out["delay_s"] = self.delay_s
        out["fired"] = self.fired
        out["remaining"] = None if self.count is None else max(self.count - self.fired, 0)
        return out


def _optional_str(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise FaultRuleError(f"'{key}' must be a non-empty string")
    return value


def _boot_fault(raw: dict[str, Any], service: str, action: str | None, code: str | None) -> tuple[str | None, float]:
    boot = raw.get("boot")
    if boot is None:
        if "delay_s" in raw:
            raise FaultRuleError("'delay_s' goes with 'boot'")
        return None, 0.0
    if boot not in BOOT_FAULTS:
        raise FaultRuleError(f"'boot' must be one of {', '.join(BOOT_FAULTS)}")
    if service.lower() != "ec2" or action not in MATCH_ACTIONS:
        raise FaultRuleError(f"'boot' is supported only for service ec2 with action {' or '.join(MATCH_ACTIONS)}")
    if code is not None:
        raise FaultRuleError("a 'boot' rule launches the instance: it takes no 'code'")
    delay = raw.get("delay_s", BOOT_DELAY_DEFAULTS[boot])
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
        raise FaultRuleError("'delay_s' must be a non-negative number of seconds")
    return boot, float(delay)


def _capacity(raw: dict[str, Any], action: str | None, code: str | None, match: Any) -> int | None:
    capacity = raw.get("capacity")
    if capacity is None:
        return None
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise FaultRuleError("'capacity' must be a non-negative integer (instances the pool can launch)")
    if action != "CreateFleet" or match is None or code is None:
        raise FaultRuleError("'capacity' needs action CreateFleet, a 'match' and the 'code' to fail with once used up")
    if "count" in raw or "ratio" in raw:
        raise FaultRuleError("'capacity' takes no 'count' or 'ratio'")
    return capacity


def _validate_match(match: Any, service: str, action: str | None) -> None:
    if not isinstance(match, dict) or not match:
        raise FaultRuleError("'match' must be a non-empty object")
    if service.lower() != "ec2" or action not in MATCH_ACTIONS:
        raise FaultRuleError(f"'match' is supported only for service ec2 with action {' or '.join(MATCH_ACTIONS)}")
    for key, value in match.items():
        if key not in MATCH_KEYS:
            raise FaultRuleError(f"unknown match key {key!r}; supported: {', '.join(MATCH_KEYS)}")
        if not isinstance(value, str):
            raise FaultRuleError(f"match value for {key!r} must be a string")


@dataclass
class FaultError:
    code: str
    message: str
    http_status: int


@dataclass
class Outcome:
    """What the fired rules ask for: a delay, and possibly an error."""

    latency_s: float = 0.0
    error: FaultError | None = None


def _fire(rule: FaultRule, outcome: Outcome, attrs: dict[str, str] | None) -> bool:
    """Counts a firing of ``rule`` into ``outcome``; True when it ends the call with its error."""
    rule.fired += 1
    outcome.latency_s += rule.latency_s
    if rule.code is None:
        return False
    outcome.error = FaultError(rule.code, rule.message or default_message(rule.code, attrs), rule.http_status)
    return True


class FaultEngine:
    def __init__(self, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._next_id = 1
        self._rng = random.Random(seed)

    def add(self, raw_rules: list[Any]) -> list[str]:
        """Validates every rule first, then adds them all; returns their ids."""
        with self._lock:
            parsed = [FaultRule.parse(raw, f"fault-{self._next_id + i}") for i, raw in enumerate(raw_rules)]
            self._next_id += len(parsed)
            self._rules.extend(parsed)
            return [rule.id for rule in parsed]

    def describe(self) -> list[dict[str, Any]]:
        with self._lock:
            return [rule.describe() for rule in self._rules]

    def remove(self, rule_id: str) -> bool:
        with self._lock:
            kept = [rule for rule in self._rules if rule.id != rule_id]
            removed = len(kept) != len(self._rules)
            self._rules = kept
            return removed

    def clear(self) -> int:
        with self._lock:
            removed = len(self._rules)
            self._rules = []
            return removed

    def reset(self) -> None:
        """Removes every rule and numbers new ones from fault-1 again, as in a fresh emulator."""
        with self._lock:
            self._rules = []
            self._next_id = 1

    def reseed(self, seed: int) -> None:
        with self._lock:
            self._rng = random.Random(seed)

    def evaluate(
        self, service: str, action: str, attrs: dict[str, str] | None = None, *, served: bool = False
    ) -> Outcome:
        """Fires the rules that select this call, in the order they were added.

        ``attrs`` is None for whole-request evaluation (rules without ``match``);
        for an EC2 launch it holds the placement being tried (rules with ``match``).
        ``served``: the call has been served, and only ``lost_answer`` rules are walked.
        Delays of all fired rules add up; the first fired rule with a code ends the walk.
        """
        outcome = Outcome()
        with self._lock:
            for rule in self._rules:
                if rule.capacity is not None or rule.lost_answer != served:
                    continue  # capacity: walked by evaluate_launch, with the count launched
                if rule.applies_to(service, action, attrs) and self._fires(rule) and _fire(rule, outcome, attrs):
                    break
        return outcome

    def evaluate_launch(self, service: str, action: str, attrs: dict[str, str], wanted: int) -> tuple[int, Outcome]:
        """Like :meth:`evaluate` for one capacity pool of a launch of ``wanted`` instances:
        returns how many may launch. A ``capacity`` rule grants what it has left (and fails
        the rest); any other firing rule with a code grants none."""
        outcome = Outcome()
        granted = wanted
        with self._lock:
            for rule in self._rules:
                if not rule.applies_to(service, action, attrs):
                    continue
                if rule.capacity is not None:
                    take = min(granted, rule.capacity - rule.used)
                    rule.used += take
                    if take < granted:
                        _fire(rule, outcome, attrs)
                        return take, outcome
                    continue
                if self._fires(rule) and _fire(rule, outcome, attrs):
                    return 0, outcome
        return granted, outcome

    def boot_fault(self, action: str, attrs: dict[str, str]) -> tuple[str, float] | None:
        """The first firing ``boot`` rule for one machine of a launch: (kind, delay_s), or None."""
        with self._lock:
            for rule in self._rules:
                if rule.boot is None or rule.service != "ec2" or rule.action not in (None, action):
                    continue
                if rule.match and not all(attrs.get(k) == v for k, v in rule.match.items()):
                    continue
                if not self._fires(rule):
                    continue
                rule.fired += 1
                return rule.boot, rule.delay_s
        return None

    def _fires(self, rule: FaultRule) -> bool:
        if rule.count is not None:
            return rule.fired < rule.count
        if rule.ratio is not None:
            return self._rng.random() < rule.ratio
        return True


def default_message(code: str, attrs: dict[str, str] | None) -> str:
    if code == "InsufficientInstanceCapacity" and attrs:
        return (
            f"We currently do not have sufficient {attrs.get('InstanceType', 'instance')} capacity in the "
            f"Availability Zone you requested ({attrs.get('AvailabilityZone', 'unknown')}). Our system will be "
            "working on provisioning additional capacity."
        )
    if code == "ThrottlingException":
        return "Rate exceeded"
    if code == "RequestLimitExceeded":
        return "Request limit exceeded."
    return f"Injected fault: {code}"


FAULTS = FaultEngine()


# --- rendering errors in each protocol's wire shape -------------------------------------------

PROTOCOL_JSON = "json"
PROTOCOL_EC2 = "ec2"
PROTOCOL_QUERY = "query"
PROTOCOL_REST_XML = "rest-xml"
PROTOCOL_REST_JSON = "rest-json"


def render_error(protocol: str, error: FaultError) -> tuple[int, list[tuple[str, str]], bytes]:
    """Returns (status, headers, body) as the real service would send this error."""
    request_id = str(uuid.uuid4())
    code, message = escape(error.code), escape(error.message)
    headers = [("x-amzn-RequestId", request_id)]
    if protocol in (PROTOCOL_JSON, PROTOCOL_REST_JSON):
        content_type = "application/x-amz-json-1.1" if protocol == PROTOCOL_JSON else "application/json"
        body = json.dumps({"__type": error.code, "message": error.message})
        headers += [("Content-Type", content_type), ("x-amzn-ErrorType", error.code)]
    elif protocol == PROTOCOL_EC2:
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors>"
            f"<RequestID>{request_id}</RequestID></Response>"
        )
        headers.append(("Content-Type", "text/xml;charset=UTF-8"))
    elif protocol == PROTOCOL_REST_XML:
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{message}</Message><RequestId>{request_id}</RequestId></Error>"
        )
        headers.append(("Content-Type", "application/xml"))
    else:
        fault_type = "Sender" if error.http_status < 500 else "Receiver"
        body = (
            f"<ErrorResponse><Error><Type>{fault_type}</Type><Code>{code}</Code><Message>{message}</Message>"
            f"</Error><RequestId>{request_id}</RequestId></ErrorResponse>"
        )
        headers.append(("Content-Type", "text/xml"))
    encoded = body.encode("utf-8")
    headers.append(("Content-Length", str(len(encoded))))
    return error.http_status, headers, encoded
