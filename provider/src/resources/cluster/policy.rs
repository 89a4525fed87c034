//! The IAM policy the cluster's nodes need, scoped to the cluster, and the user's own
//! secrets it names.

use crate::desired_state;
use crate::desired_state::tag;
use crate::desired_state::ClusterDoc;

/// The external database password's secret the user named (not the one the provider keeps for
/// a write-only `password`).
/// An external database's password secret of the user's own (not the one the provider
/// generates from the write-only password).
pub(super) fn external_password_secret(doc: &ClusterDoc) -> Option<String> {
    let generated = desired_state::db_password_secret(&doc.name);
    doc.accounting
        .password_secret_arn
        .clone()
        .filter(|arn| !arn.contains(&generated))
}

/// The secrets of the user's own that nodes read: an external database's password and the
/// second factor's settings.
pub(super) fn external_secrets(doc: &ClusterDoc) -> Vec<String> {
    external_password_secret(doc)
        .into_iter()
        .chain(doc.mfa_settings_secret_arn.clone())
        .collect()
}

/// The IAM policy the cluster's instance profile needs, scoped to this cluster: its own
/// parameters and secrets (and `external_secrets`, the user's own that nodes read); tags only
/// on what it launches; terminate only instances tagged with the cluster; pass only
/// `node_roles` (any role when none are named) and only to EC2.
pub(super) fn instance_profile_policy(name: &str, node_roles: &[String], external_secrets: &[String]) -> String {
    let pass_roles = if node_roles.is_empty() {
        serde_json::json!("*")
    } else {
        serde_json::json!(node_roles)
    };
    serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ReadDesiredState",
                "Effect": "Allow",
                "Action": ["ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath", "ssm:PutParameter"],
                "Resource": format!("arn:aws:ssm:*:*:parameter{}/*", desired_state::cluster_prefix(name))
            },
            {
                "Sid": "ReadClusterSecrets",
                "Effect": "Allow",
                "Action": ["secretsmanager:GetSecretValue"],
                "Resource": std::iter::once(format!("arn:aws:secretsmanager:*:*:secret:{}/*", desired_state::secrets_prefix(name)))
                    .chain(external_secrets.iter().cloned())
                    .collect::<Vec<_>>()
            },
            {
                "Sid": "LaunchComputeNodes",
                "Effect": "Allow",
                "Action": ["ec2:CreateFleet", "ec2:RunInstances",
                           "ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates",
                           "ec2:DescribeLaunchTemplateVersions", "ec2:DescribeSubnets", "ec2:DescribeCapacityReservations"],
                "Resource": "*"
            },
            {
                "Sid": "TagOnlyWhatItLaunches",
                "Effect": "Allow",
                "Action": "ec2:CreateTags",
                "Resource": "*",
                "Condition": {"StringEquals": {"ec2:CreateAction": ["CreateFleet", "RunInstances"]}}
            },
            {
                "Sid": "TerminateOnlyThisClustersNodes",
                "Effect": "Allow",
                "Action": "ec2:TerminateInstances",
                "Resource": "arn:aws:ec2:*:*:instance/*",
                "Condition": {"StringEquals": {format!("aws:ResourceTag/{}", tag::CLUSTER): name}}
            },
            {
                // The head node reads EC2's instance events from its partitions' queues.
                "Sid": "ReadInstanceEvents",
                "Effect": "Allow",
                "Action": ["sqs:GetQueueUrl", "sqs:ReceiveMessage", "sqs:DeleteMessage"],
                "Resource": format!("arn:aws:sqs:*:*:{}*", desired_state::events_route_prefix(name))
            },
            {
                "Sid": "PassTheNodeRole",
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": pass_roles,
                "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}
            },
            {
                // Nodes of a pool in another region mount /home by a mount target's address
                // (read-only; the file system is made with the cluster, after this policy is
                // planned, so any file system of the account).
                "Sid": "FindHomeMountTargets",
                "Effect": "Allow",
                "Action": "elasticfilesystem:DescribeMountTargets",
                "Resource": "arn:aws:elasticfilesystem:*:*:file-system/*"
            },
            {
                "Sid": "LustreReleaseTasks",
                "Effect": "Allow",
                "Action": ["fsx:CreateDataRepositoryTask", "fsx:DescribeDataRepositoryTasks", "fsx:DescribeFileSystems",
                           "fsx:DescribeDataRepositoryAssociations"],
                "Resource": "*"
            }
        ]
    })
    .to_string()
}
