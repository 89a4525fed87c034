"""WSGI middleware in front of moto: call counting, fault injection and the control API."""

from __future__ import annotations

import functools
import io
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import botocore.loaders
import moto
from moto.moto_api._internal.models import moto_api_backend

import fsx
from config import CONFIG
from faults import (
    FAULTS,
    PROTOCOL_EC2,
    PROTOCOL_JSON,
    PROTOCOL_QUERY,
    PROTOCOL_REST_JSON,
    PROTOCOL_REST_XML,
    FaultError,
    FaultRuleError,
    render_error,
)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

CONTROL_PREFIX = "/_emulator"
CREDENTIAL_SCOPE = re.compile(r"Credential=[^/,\s]+/\d{8}/([^/,\s]+)/([^/,\s]+)/aws4_request")
BOTOCORE_LOADER = botocore.loaders.create_loader()


@dataclass(frozen=True)
class AwsCall:
    service: str
    action: str
    protocol: str

    @property
    def key(self) -> str:
        return f"{self.service}:{self.action}"


def classify(environ: dict[str, Any]) -> AwsCall | None:
    """Names the AWS operation of a request, or None when it is not a (SigV4-signed) AWS call.

    The service is the signing name in the credential scope (``fsx``, ``ec2``, ``sts`` ...);
    the action comes from X-Amz-Target (JSON), ``Action=`` (query) or the REST route.
    """
    query = parse_qs(environ.get("QUERY_STRING", ""))
    service = _signing_service(environ, query)
    if service is None:
        return None
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return AwsCall(service, target.rsplit(".", 1)[-1], PROTOCOL_JSON)
    action = next(iter(query.get("Action") or _form_body(environ).get("Action") or []), None)
    if action:
        return AwsCall(service, action, PROTOCOL_EC2 if service == "ec2" else PROTOCOL_QUERY)
    protocol, operation = _rest_operation(service, environ, query)
    return AwsCall(service, operation or environ.get("REQUEST_METHOD", "GET"), protocol)


def _signing_service(environ: dict[str, Any], query: dict[str, list[str]]) -> str | None:
    found = _credential_scope(environ, query)
    return found.group(2).lower() if found else None


def _signing_region(environ: dict[str, Any]) -> str | None:
    found = _credential_scope(environ, parse_qs(environ.get("QUERY_STRING", "")))
    return found.group(1) if found else None


def _credential_scope(environ: dict[str, Any], query: dict[str, list[str]]) -> re.Match[str] | None:
    credential = environ.get("HTTP_AUTHORIZATION", "")
    if not credential and "X-Amz-Credential" in query:
        credential = "Credential=" + query["X-Amz-Credential"][0]
    return CREDENTIAL_SCOPE.search(credential)


def _form_body(environ: dict[str, Any]) -> dict[str, list[str]]:
    """Parses a form-encoded body and puts the bytes back for the app behind us."""
    if not environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded"):
        return {}
    length = environ.get("CONTENT_LENGTH") or ""
    stream = environ["wsgi.input"]
    if length.isdigit():
        body = stream.read(int(length))
    elif environ.get("wsgi.input_terminated"):
        body = stream.read()
    else:
        return {}
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return parse_qs(body.decode("utf-8", errors="replace"))


def _discarded(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
    """A start_response for an answer that is lost (a ``lost_answer`` fault): nothing is sent."""
    return lambda data: None


def _drain(environ: dict[str, Any]) -> None:
    """Reads an unanswered request body, so closing the socket does not reset the client's upload.

    (A faulted PutSnapshotBlock would otherwise see a connection reset instead of its error.)
    """
    length = environ.get("CONTENT_LENGTH") or ""
    stream = environ["wsgi.input"]
    if length.isdigit():
        remaining = int(length)
        while remaining > 0:
            chunk = stream.read(min(remaining, 1 << 16))
            if not chunk:
                break
            remaining -= len(chunk)
    elif environ.get("wsgi.input_terminated"):
        while stream.read(1 << 16):
            pass


@dataclass(frozen=True)
class RestOperation:
    name: str
    method: str
    path: re.Pattern[str]
    query_keys: frozenset[str]
    headers: frozenset[str]
    literal_length: int

    def matches(self, method: str, path: str, query_keys: set[str], environ: dict[str, Any]) -> bool:
        return (
            self.method == method
            and self.query_keys <= query_keys
            and all(_header_key(header) in environ for header in self.headers)
            and self.path.match(path) is not None
        )

    @property
    def specificity(self) -> tuple[int, int]:
        return len(self.query_keys) + len(self.headers), self.literal_length


def _header_key(header: str) -> str:
    key = header.upper().replace("-", "_")
    return key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{key}"


# Signing names whose botocore model is named otherwise.
MODEL_NAMES = {"elasticfilesystem": "efs"}


@functools.cache
def _rest_operations(service: str) -> tuple[str, tuple[RestOperation, ...]]:
    """The REST protocol and operations of a botocore service model (empty if unknown).

    An operation is told apart by method, path template, and the query keys and headers
    its input requires (S3's PutObject and CopyObject share a path; CopyObject needs a header).
    """
    try:
        model = BOTOCORE_LOADER.load_service_model(MODEL_NAMES.get(service, service), "service-2")
    except Exception:  # noqa: BLE001 - any loader failure means "no model for this name"
        return PROTOCOL_REST_JSON, ()
    protocol = PROTOCOL_REST_XML if model["metadata"].get("protocol") == "rest-xml" else PROTOCOL_REST_JSON
    shapes = model["shapes"]
    operations = []
    for name, operation in model["operations"].items():
        http = operation.get("http", {})
        path_template, _, query_template = http.get("requestUri", "/").partition("?")
        pattern = re.sub(
            r"\\\{[^}]+\\\}",
            lambda m: ".+" if m.group(0).endswith("+\\}") else "[^/]+",
            re.escape(path_template.rstrip("/")),
        )
        query_keys = {
            part.split("=", 1)[0] for part in query_template.split("&") if part and not part.startswith("x-id")
        }
        headers: set[str] = set()
        input_shape = shapes.get(operation.get("input", {}).get("shape", ""), {})
        for member in input_shape.get("required", []):
            spec = input_shape["members"][member]
            if spec.get("location") == "querystring":
                query_keys.add(spec["locationName"])
            elif spec.get("location") == "header":
                headers.add(spec["locationName"])
        operations.append(
            RestOperation(
                name=name,
                method=http.get("method", "POST"),
                path=re.compile(f"^{pattern}/?$"),
                query_keys=frozenset(query_keys),
                headers=frozenset(headers),
                literal_length=len(re.sub(r"\{[^}]+\}", "", path_template)),
            )
        )
    return protocol, tuple(operations)


def _rest_operation(service: str, environ: dict[str, Any], query: dict[str, list[str]]) -> tuple[str, str | None]:
    protocol, operations = _rest_operations(service)
    named = next(iter(query.get("x-id", [])), None)
    if named and any(op.name == named for op in operations):
        return protocol, named
    method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "/")
    candidates = [op for op in operations if op.matches(method, path, set(query), environ)]
    best = max(candidates, key=lambda op: op.specificity, default=None)
    return protocol, best.name if best else None


class CallCounter:
    """Calls per ``service:Action``, the seconds the emulator spent answering them (so a
    benchmark can tell the emulator's time from the client's) and the most of them in flight
    at once (so a test can see a client's calls overlap)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._seconds: Counter[str] = Counter()
        self._in_flight: Counter[str] = Counter()
        self._peak: Counter[str] = Counter()
        # Wall time with at least one call in flight: what the emulator took of a client's
        # time when its calls overlap (summed seconds would count overlaps twice).
        self._busy = 0.0
        self._busy_since: float | None = None

    def add(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1
            if self._busy_since is None:
                self._busy_since = time.perf_counter()
            self._in_flight[key] += 1
            self._peak[key] = max(self._peak[key], self._in_flight[key])

    def done(self, key: str) -> None:
        with self._lock:
            self._in_flight[key] -= 1
            if self._busy_since is not None and not +self._in_flight:
                self._busy += time.perf_counter() - self._busy_since
                self._busy_since = None

    def busy(self) -> float:
        with self._lock:
            running = time.perf_counter() - self._busy_since if self._busy_since is not None else 0.0
            return round(self._busy + running, 4)

    def peaks(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._peak.items()))

    def add_time(self, key: str, seconds: float) -> None:
        with self._lock:
            self._seconds[key] += seconds

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._counts.items()))

    def seconds(self) -> dict[str, float]:
        with self._lock:
            return {k: round(v, 4) for k, v in sorted(self._seconds.items())}

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
            self._seconds.clear()
            self._peak.clear()
            self._peak.update(+self._in_flight)
            self._busy = 0.0
            self._busy_since = time.perf_counter() if +self._in_flight else None


class ControlError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class EmulatorMiddleware:
    """Counts and faults AWS calls, answers ``/_emulator/...``, passes the rest to moto."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app
        self.calls = CallCounter()
        self.started = time.time()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == CONTROL_PREFIX or path.startswith(CONTROL_PREFIX + "/"):
            return self._control(environ, start_response)
        call = classify(environ)
        if call is None:
            return self.app(environ, start_response)
        self.calls.add(call.key)
        try:
            return self._answer(call, environ, start_response)
        finally:
            self.calls.done(call.key)

    def _answer(self, call: AwsCall, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        """Refuses what the caller may not do, serves faults, or asks moto."""
        refused = _authorize(environ, call)
        if refused is None:
            outcome = FAULTS.evaluate(call.service, call.action)
            if outcome.latency_s:
                time.sleep(outcome.latency_s)
            refused = outcome.error
        if refused is not None:
            _drain(environ)
            status, headers, body = render_error(call.protocol, refused)
            start_response(f"{status} Error", headers)
            return [body]
        started = time.perf_counter()
        lost = FAULTS.evaluate(call.service, call.action, served=True).error
        result = self.app(environ, start_response if lost is None else _discarded)
        try:
            answered = list(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
            self.calls.add_time(call.key, time.perf_counter() - started)
        if lost is not None:
            status, headers, body = render_error(call.protocol, lost)
            start_response(f"{status} Error", headers)
            return [body]
        return answered

    # --- control API ---------------------------------------------------------------------------

    def _control(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        route = environ.get("PATH_INFO", "")[len(CONTROL_PREFIX) :].rstrip("/")
        try:
            status, payload = self._route(method, route, environ)
        except ControlError as err:
            status, payload = err.status, {"error": str(err)}
        body = json.dumps(payload).encode("utf-8")
        start_response(
            f"{status} {'OK' if status < 400 else 'Error'}",
            [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
        )
        return [body]

    def _route(self, method: str, route: str, environ: dict[str, Any]) -> tuple[int, Any]:
        if route == "/health" and method == "GET":
            return 200, {"status": "ok", "moto_version": moto.__version__, "uptime_s": time.time() - self.started}
        if route == "/calls" and method == "GET":
            return 200, {"calls": self.calls.snapshot(), "seconds": self.calls.seconds(), "peak_in_flight": self.calls.peaks(), "busy_s": self.calls.busy()}
        if route == "/calls/reset" and method == "POST":
            self.calls.clear()
            return 200, {"calls": {}}
        if route == "/faults":
            return self._faults(method, environ)
        if route.startswith("/faults/") and method == "DELETE":
            rule_id = route[len("/faults/") :]
            if not FAULTS.remove(rule_id):
                raise ControlError(404, f"no fault rule with id {rule_id!r}")
            return 200, {"deleted": 1}
        if route == "/config":
            if method == "GET":
                return 200, CONFIG.as_dict()
            if method == "POST":
                return 200, self._update_config(_json_body(environ))
        if route == "/quotas" and method == "POST":
            import service_quotas

            body = _json_body(environ)
            if not isinstance(body, dict) or not isinstance(body.get("quotas"), dict):
                raise ControlError(400, 'send {"quotas": {"L-417A185B": 192}, "region": ..., "account": ...}')
            try:
                applied = service_quotas.set_quotas(
                    str(body.get("account", "123456789012")), str(body.get("region", "us-east-1")), body["quotas"]
                )
            except ValueError as err:
                raise ControlError(400, str(err)) from err
            return 200, {"quotas": applied}
        if route == "/instances" or route.startswith("/instances/"):
            return _instances(method, route, environ)
        if route == "/reset" and method == "POST":
            import boot

            if boot.MANAGER is not None:
                boot.MANAGER.reset()
            moto_api_backend.reset()
            self.calls.clear()
            FAULTS.reset()
            FAULTS.reseed(CONFIG.snapshot().seed)
            return 200, {"status": "reset"}
        lifecycle = re.fullmatch(r"/fsx/([^/]+)/lifecycle", route)
        if lifecycle and method == "POST":
            return 200, self._force_lifecycle(lifecycle.group(1), _json_body(environ))
        raise ControlError(404, f"no control endpoint {method} {CONTROL_PREFIX}{route}")

    def _faults(self, method: str, environ: dict[str, Any]) -> tuple[int, Any]:
        if method == "GET":
            return 200, {"faults": FAULTS.describe()}
        if method == "DELETE":
            return 200, {"deleted": FAULTS.clear()}
        if method == "POST":
            body = _json_body(environ)
            try:
                ids = FAULTS.add(body if isinstance(body, list) else [body])
            except FaultRuleError as err:
                raise ControlError(400, f"invalid fault rule: {err}") from err
            return 200, {"ids": ids}
        raise ControlError(405, f"{method} is not supported on {CONTROL_PREFIX}/faults")

    @staticmethod
    def _update_config(body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ControlError(400, "config must be a JSON object")
        try:
            updated = CONFIG.update(body)
        except ValueError as err:
            raise ControlError(400, str(err)) from err
        if "seed" in body:
            FAULTS.reseed(updated["seed"])
        return updated

    @staticmethod
    def _force_lifecycle(resource_id: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("Lifecycle"), str):
            raise ControlError(400, 'body must be {"Lifecycle": "...", "FailureDetails": {"Message": "..."}}')
        details = body.get("FailureDetails") or {}
        message = details.get("Message") if isinstance(details, dict) else None
        try:
            return fsx.force_lifecycle(resource_id, body["Lifecycle"], message)
        except LookupError as err:
            raise ControlError(404, str(err.args[0])) from err
        except ValueError as err:
            raise ControlError(400, str(err)) from err


def _authorize(environ: dict[str, Any], call: AwsCall) -> FaultError | None:
    """Boot mode: a call signed with an instance's credentials must be allowed by its role."""
    import boot
    import iam_enforce

    if boot.MANAGER is None:
        return None
    session = iam_enforce.session_of(environ)
    if session is None:
        return None
    if call.protocol == PROTOCOL_EC2:
        checks = iam_enforce.ec2_checks(session, call.action, _form_body(environ))
    else:
        checks = iam_enforce.call_checks(session, call.service, call.action, _request_fields(environ, call.protocol),
                                         _signing_region(environ) or session.region, environ.get("PATH_INFO", ""))
    documents = iam_enforce.role_documents(session)
    for check in checks:
        if not iam_enforce.decide(documents, check.action, check.resource, dict(check.context)):
            return iam_enforce.denial(session, check.action, call.protocol)
    return None


def _request_fields(environ: dict[str, Any], protocol: str) -> dict[str, Any]:
    """A JSON call's body, a query call's fields (first values, query string and form), else nothing."""
    if protocol == PROTOCOL_JSON:
        return _peek_json(environ)
    if protocol == PROTOCOL_QUERY:
        fields = {**parse_qs(environ.get("QUERY_STRING", "")), **_form_body(environ)}
        return {name: values[0] for name, values in fields.items() if values}
    return {}


def _peek_json(environ: dict[str, Any]) -> dict[str, Any]:
    """The JSON body of a request, put back for the app behind us."""
    length = environ.get("CONTENT_LENGTH") or ""
    if not length.isdigit():
        return {}
    raw = environ["wsgi.input"].read(int(length))
    environ["wsgi.input"] = io.BytesIO(raw)
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _instances(method: str, route: str, environ: dict[str, Any]) -> tuple[int, Any]:
    """Boot mode's read-outs: the machines, one instance's IMDS requests; spot interruptions and
    failures of the host under an instance."""
    import boot

    if boot.MANAGER is None:
        raise ControlError(404, "boot mode is off: start the emulator with --boot-instances")
    parts = route.split("/")[2:]
    if not parts and method == "GET":
        return 200, {"budget": boot.MANAGER.budget, "instances": boot.MANAGER.describe()}
    if len(parts) == 2 and parts[1] == "imds-log" and method == "GET":
        machine = boot.MANAGER.machines.get(parts[0])
        if machine is None or machine.metadata is None:
            raise ControlError(404, f"instance {parts[0]} has no machine")
        return 200, {"requests": [vars(r) for r in machine.metadata.log]}
    if len(parts) == 2 and parts[1] == "interrupt" and method == "POST":
        body = _json_body(environ) if (environ.get("CONTENT_LENGTH") or "0") != "0" else {}
        delay = body.get("delay_s", 120) if isinstance(body, dict) else 120
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
            raise ControlError(400, "delay_s must be a non-negative number of seconds")
        try:
            return 200, boot.MANAGER.interrupt(parts[0], float(delay))
        except LookupError as err:
            raise ControlError(404, str(err)) from err
    if len(parts) == 2 and parts[1] == "fail" and method == "POST":
        try:
            return 200, boot.MANAGER.fail(parts[0])
        except LookupError as err:
            raise ControlError(404, str(err)) from err
    raise ControlError(404, f"no control endpoint {method} {CONTROL_PREFIX}{route}")


def _json_body(environ: dict[str, Any]) -> Any:
    length = environ.get("CONTENT_LENGTH") or "0"
    raw = environ["wsgi.input"].read(int(length)) if length.isdigit() else b""
    if not raw.strip():
        raise ControlError(400, "a JSON request body is required")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as err:
        raise ControlError(400, f"request body is not valid JSON: {err}") from err
