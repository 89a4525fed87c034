"""Instance-credential authorization: conditions and the checks of EC2 calls (iam_enforce)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.iam.models import iam_backends
from moto.moto_api._internal.models import moto_api_backend
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

import boot
import iam_enforce
from harness import client, error_code
from iam_enforce import Check, Session, decide, ec2_checks
from middleware import EmulatorMiddleware, classify

ACCOUNT = "123456789012"
REGION = "us-east-1"
SESSION = Session(ACCOUNT, REGION, f"arn:aws:iam::{ACCOUNT}:role/nodes", "nodes", "i-head", "AKIA", "s", "t", 0.0)

# What hpc_cluster.instance_profile_policy grants for EC2, in the shape the provider writes it.
POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": ["ec2:CreateFleet", "ec2:RunInstances", "ec2:DescribeInstances"], "Resource": "*"},
        {"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "*",
         "Condition": {"StringEquals": {"ec2:CreateAction": ["CreateFleet", "RunInstances"]}}},
        {"Effect": "Allow", "Action": "ec2:TerminateInstances", "Resource": "arn:aws:ec2:*:*:instance/*",
         "Condition": {"StringEquals": {"aws:ResourceTag/hpcforge:cluster": "research"}}},
        {"Effect": "Allow", "Action": "iam:PassRole", "Resource": f"arn:aws:iam::{ACCOUNT}:role/nodes",
         "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}},
    ],
}


def allowed(check: Check) -> bool:
    return decide([POLICY], check.action, check.resource, dict(check.context))


def form(**fields: str) -> dict[str, list[str]]:
    return {name.replace("__", "."): [value] for name, value in fields.items()}


def test_conditions_decide_whether_a_statement_applies() -> None:
    terminate = "arn:aws:ec2:us-east-1:1:instance/i-1"
    assert decide([POLICY], "ec2:TerminateInstances", terminate, {"aws:ResourceTag/hpcforge:cluster": "research"})
    assert not decide([POLICY], "ec2:TerminateInstances", terminate, {"aws:ResourceTag/hpcforge:cluster": "teaching"})
    assert not decide([POLICY], "ec2:TerminateInstances", terminate, {})
    assert not decide([POLICY], "ec2:CreateTags", None, {})
    assert decide([POLICY], "ec2:CreateTags", None, {"ec2:CreateAction": "CreateFleet"})
    negated = {"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*",
                              "Condition": {"StringNotEquals": {"aws:ResourceTag/team": "x"}, "StringLike": {"aws:RequestTag/k": "a*"}}}]}
    assert decide([negated], "s3:GetObject", None, {"aws:RequestTag/k": "abc"})
    assert not decide([negated], "s3:GetObject", None, {"aws:RequestTag/k": "ABC"})
    unknown = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"NumericLessThan": {"k": "1"}}}]}
    assert not decide([unknown], "ec2:DescribeInstances", None, {"k": "0"})


def _launch(ec2: Any, tags: dict[str, str]) -> str:
    reservation = ec2.run_instances(ImageId="ami-03cf127a", MinCount=1, MaxCount=1, TagSpecifications=[
        {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}])
    return reservation["Instances"][0]["InstanceId"]


@mock_aws
def test_terminate_create_tags_and_launches_are_checked_as_aws_checks_them() -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    iam = boto3.client("iam", region_name=REGION)
    ours = _launch(ec2, {"hpcforge:cluster": "research"})
    theirs = _launch(ec2, {"hpcforge:cluster": "teaching"})

    assert all(allowed(c) for c in ec2_checks(SESSION, "TerminateInstances", form(InstanceId__1=ours)))
    mixed = ec2_checks(SESSION, "TerminateInstances", form(InstanceId__1=ours, InstanceId__2=theirs))
    assert [allowed(c) for c in mixed] == [True, False]
    assert not any(allowed(c) for c in ec2_checks(SESSION, "CreateTags", form(ResourceId__1=ours, Tag__1__Key="a", Tag__1__Value="b")))

    trust = {"Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
    for name in ("nodes", "admin"):
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
        iam.create_instance_profile(InstanceProfileName=name)
        iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
    arn = {name: iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Arn"] for name in ("nodes", "admin")}
    for name in ("nodes", "admin"):
        ec2.create_launch_template(LaunchTemplateName=f"lt-{name}", LaunchTemplateData={
            "ImageId": "ami-03cf127a", "IamInstanceProfile": {"Arn": arn[name]},
            "TagSpecifications": [{"ResourceType": "instance", "Tags": [{"Key": "hpcforge:cluster", "Value": "research"}]}]})
    fleet = ec2_checks(SESSION, "CreateFleet", form(LaunchTemplateConfigs__1__LaunchTemplateSpecification__LaunchTemplateName="lt-nodes",
                                                    LaunchTemplateConfigs__1__LaunchTemplateSpecification__Version="$Latest"))
    assert [c.action for c in fleet] == ["ec2:CreateFleet", "ec2:CreateTags", "iam:PassRole"], fleet
    assert all(allowed(c) for c in fleet), fleet
    admin = ec2_checks(SESSION, "RunInstances", form(LaunchTemplate__LaunchTemplateName="lt-admin"))
    denied = [c for c in admin if not allowed(c)]
    assert [c.action for c in denied] == ["iam:PassRole"] and denied[0].resource.endswith(":role/admin"), admin


def test_a_remote_nodes_efs_mount_target_lookup_is_authorized_as_elasticfilesystem_describe_mount_targets() -> None:
    # As the agent on a node in another region signs it: EFS's REST call, in the home region.
    environ = {
        "REQUEST_METHOD": "GET", "PATH_INFO": "/2015-02-01/mount-targets", "QUERY_STRING": "FileSystemId=fs-0123456789abcdef0",
        "HTTP_AUTHORIZATION": "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20261205/us-east-1/elasticfilesystem/aws4_request, "
                              "SignedHeaders=host;x-amz-date, Signature=0",
    }
    call = classify(environ)
    assert call is not None and call.key == "elasticfilesystem:DescribeMountTargets"
    grant = {"Statement": [{"Effect": "Allow", "Action": "elasticfilesystem:DescribeMountTargets",
                            "Resource": f"arn:aws:elasticfilesystem:us-east-1:{ACCOUNT}:file-system/*"}]}
    assert decide([grant], call.key, None)
    assert not decide([POLICY], call.key, None)


# --- through the emulator: moto behind the middleware, enforcing as in boot mode ----------------


@pytest.fixture
def enforcing(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An emulator in this process that authorizes instance credentials (boot mode's rule,
    without machines); its endpoint."""
    monkeypatch.setattr(boot, "MANAGER", object())
    server = make_server("127.0.0.1", 0, EmulatorMiddleware(DomainDispatcherApplication(create_backend_app)),
                         threaded=True, request_handler=MotoRequestHandler)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        iam_enforce.reset()
        moto_api_backend.reset()


def _instance_credentials(endpoint: str, policy: dict[str, Any]) -> dict[str, Any]:
    """Credentials IMDS would hand an instance whose profile's role has ``policy``."""
    iam = client(endpoint, "iam")
    trust = {"Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
    iam.create_role(RoleName="head", AssumeRolePolicyDocument=json.dumps(trust))
    iam.put_role_policy(RoleName="head", PolicyName="interruptions", PolicyDocument=json.dumps(policy))
    role = iam_backends[ACCOUNT]["global"].get_role("head")
    return iam_enforce.credentials_for(ACCOUNT, REGION, role, "i-head")


def _query_call(endpoint: str, path: str, fields: dict[str, str], credentials: dict[str, Any]) -> tuple[int, str]:
    """A query-protocol SQS call (as older SDKs make it), signed with ``credentials``."""
    form = urllib.parse.urlencode({"Version": "2012-11-05", **fields}).encode()
    request = AWSRequest(method="POST", url=f"{endpoint}{path}", data=form,
                         headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
    SigV4Auth(Credentials(credentials["AccessKeyId"], credentials["SecretAccessKey"], credentials["Token"]),
              "sqs", REGION).add_auth(request)
    prepared = request.prepare()
    sent = urllib.request.Request(prepared.url, data=prepared.body, headers=dict(prepared.headers), method="POST")
    try:
        with urllib.request.urlopen(sent) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_an_agent_receives_and_deletes_only_from_the_queues_its_role_names(enforcing: str) -> None:
    sqs = client(enforcing, "sqs")
    ours = sqs.create_queue(QueueName="hpcforge-research-interruptions")["QueueUrl"]
    theirs = sqs.create_queue(QueueName="hpcforge-teaching-interruptions")["QueueUrl"]
    for url in (ours, theirs):
        sqs.send_message(QueueUrl=url, MessageBody="{}")
    queue_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:hpcforge-research-interruptions"
    credentials = _instance_credentials(enforcing, {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["sqs:GetQueueUrl", "sqs:ReceiveMessage", "sqs:DeleteMessage"], "Resource": queue_arn},
    ]})
    agent = client(enforcing, "sqs", aws_access_key_id=credentials["AccessKeyId"],
                   aws_secret_access_key=credentials["SecretAccessKey"], aws_session_token=credentials["Token"])
    assert agent.meta.service_model.protocol == "json"  # as aws-sdk-sqs 1.x: X-Amz-Target AmazonSQS.*

    assert agent.get_queue_url(QueueName="hpcforge-research-interruptions")["QueueUrl"] == ours
    (message,) = agent.receive_message(QueueUrl=ours, WaitTimeSeconds=1)["Messages"]
    # DeleteMessageBatch is authorized as sqs:DeleteMessage.
    deleted = agent.delete_message_batch(QueueUrl=ours, Entries=[{"Id": "0", "ReceiptHandle": message["ReceiptHandle"]}])
    assert [d["Id"] for d in deleted["Successful"]] == ["0"], deleted

    with pytest.raises(ClientError) as denied:
        agent.receive_message(QueueUrl=theirs)
    assert error_code(denied) == "AccessDeniedException", denied.value.response
    assert "assumed-role/head/i-head is not authorized to perform: sqs:ReceiveMessage" in str(denied.value)
    for refused in (lambda: agent.get_queue_url(QueueName="hpcforge-teaching-interruptions"),
                    lambda: agent.get_queue_attributes(QueueUrl=ours, AttributeNames=["All"])):  # not granted
        with pytest.raises(ClientError) as denied:
            refused()
        assert error_code(denied) == "AccessDeniedException", denied.value.response
    assert len(sqs.receive_message(QueueUrl=theirs)["Messages"]) == 1  # untouched

    # The query protocol: the queue named by QueueUrl, or only by the path it is sent to.
    status, body = _query_call(enforcing, "/", {"Action": "ReceiveMessage", "QueueUrl": theirs}, credentials)
    assert (status, "<Code>AccessDenied</Code>" in body) == (403, True), body
    status, body = _query_call(enforcing, f"/{ACCOUNT}/hpcforge-teaching-interruptions", {"Action": "ReceiveMessage"}, credentials)
    assert status == 403, body
    status, body = _query_call(enforcing, f"/{ACCOUNT}/hpcforge-research-interruptions", {"Action": "ReceiveMessage"}, credentials)
    assert status == 200, body
