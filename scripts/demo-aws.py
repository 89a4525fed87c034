"""What `make demo` makes in the account before Terraform runs, with boto3 against AWS_ENDPOINT_URL
(the local emulator): the SSH key pair, the nodes' role and instance profile,
and afterwards the role's policy (the cluster's `instance_profile_policy` output).

Usage: demo-aws.py key-pair NAME FILE | node-role NAME | role-policy ROLE FILE
"""

import json
import os
import sys

import boto3

REGION = "us-east-1"
TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}


def client(service: str):
    return boto3.client(service, region_name=REGION, endpoint_url=os.environ["AWS_ENDPOINT_URL"])


def key_pair(name: str, path: str) -> None:
    """An ed25519 key pair; its private key written 0600 to `path`."""
    ec2 = client("ec2")
    made = ec2.create_key_pair(KeyName=name, KeyType="ed25519")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(made["KeyMaterial"].rstrip() + "\n")


def node_role(name: str) -> None:
    """A role EC2 may assume and its instance profile; prints the profile's ARN."""
    iam = client("iam")
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(TRUST))
    profile = iam.create_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
    print(profile["Arn"])


def role_policy(role: str, path: str) -> None:
    with open(path, encoding="utf-8") as handle:
        policy = handle.read()
    client("iam").put_role_policy(RoleName=role, PolicyName="hpcforge", PolicyDocument=policy)


COMMANDS = {"key-pair": (key_pair, 2), "node-role": (node_role, 1), "role-policy": (role_policy, 2)}

if __name__ == "__main__":
    command = COMMANDS.get(sys.argv[1] if len(sys.argv) > 1 else "")
    if command is None or len(sys.argv) != command[1] + 2:
        sys.exit(__doc__)
    command[0](*sys.argv[2:])
