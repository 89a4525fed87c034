//! The published desired state as the agent reads it: the cluster's document (with its users,
//! kept in shards of their own) and its partitions. Below the commands and the boot, which both
//! read it.

use std::path::Path;

use hpc_aws::Aws;
use hpc_desired_state::{
    cluster_param, partitions_path, users_from_shards, users_path, ClusterDoc, PartitionDoc, UserDoc,
};

use crate::cli::ClusterArgs;
use crate::error::{Context as _, Error, Result};

/// The cluster's published document (None before the provider published it).
pub async fn cluster_doc(aws: &Aws, cluster: &str) -> Result<Option<ClusterDoc>> {
    match aws.ssm().get(&cluster_param(cluster)).await? {
        Some(p) => serde_json::from_str(&p.value).context(|| p.name.clone()).map(Some),
        None => Ok(None),
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct UsersCache {
    digest: String,
    users: Vec<UserDoc>,
}

/// The cluster's document with its users (see [`fill_users`]; the users last read are kept in
/// the agent's state directory), checked by the rules plan applies
/// ([`hpc_desired_state::rules`]): a document breaking one was not written by the provider and
/// is refused whole, so the node applies none of it and keeps what it applied last.
pub async fn cluster_doc_with_users(aws: &Aws, args: &ClusterArgs) -> Result<Option<ClusterDoc>> {
    let Some(mut doc) = cluster_doc(aws, &args.cluster).await? else {
        return Ok(None);
    };
    fill_users(aws, &mut doc, Some(&args.state_dir.join("users.json"))).await?;
    checked(doc).map(Some)
}

/// `doc`, or why a node refuses it.
fn checked(doc: ClusterDoc) -> Result<ClusterDoc> {
    match refusal(&doc) {
        None => Ok(doc),
        Some(why) => Err(Error::new(why)),
    }
}

/// Why a node refuses `doc` (it breaks a rule plan applies), or None.
pub fn refusal(doc: &ClusterDoc) -> Option<String> {
    let problems = hpc_desired_state::rules::problems(doc);
    (!problems.is_empty()).then(|| {
        format!(
            "refused the published desired state of {} (none of it applied): {}",
            doc.name,
            problems.join("; ")
        )
    })
}

/// Puts the users into `doc` from their shards, read only when the document names other shards
/// than the ones kept in `cache`. Fails while a publication is in progress: the caller reads
/// again.
pub async fn fill_users(aws: &Aws, doc: &mut ClusterDoc, cache: Option<&Path>) -> Result<()> {
    let Some(digest) = doc.users_digest.clone() else {
        return Ok(());
    };
    let cached = cache
        .and_then(|path| std::fs::read(path).ok())
        .and_then(|b| serde_json::from_slice::<UsersCache>(&b).ok())
        .filter(|c| c.digest == digest);
    if let Some(c) = cached {
        doc.users = c.users;
        return Ok(());
    }
    let shards = aws.ssm().list(&users_path(&doc.name)).await?;
    let shards = shards.into_iter().map(|p| (p.name, p.value)).collect();
    doc.users = users_from_shards(doc, &shards).map_err(Error::new)?;
    let kept = UsersCache {
        digest,
        users: doc.users.clone(),
    };
    // Only a cache: without it the shards are read again next time.
    if let (Some(path), Ok(json)) = (cache, serde_json::to_vec(&kept)) {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = crate::host::write_file(path, &json, 0o600, None) {
            crate::host::log("users", &format!("cannot keep the users in {}: {e}", path.display()));
        }
    }
    Ok(())
}

/// The cluster's published partitions.
pub async fn partitions(aws: &Aws, cluster: &str) -> Result<Vec<PartitionDoc>> {
    let params = aws.ssm().list(&partitions_path(cluster)).await?;
    params
        .iter()
        .map(|p| serde_json::from_str(&p.value).context(|| p.name.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_breaking_a_rule_of_plan_is_refused_whole_naming_the_problem() {
        let user = |name: &str, uid: u32| UserDoc {
            name: name.into(),
            uid,
            gid: uid,
            ssh_public_keys: vec!["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly u".into()],
            sudo: true,
            accounts: vec![],
        };
        let mut doc = ClusterDoc {
            name: "research".into(),
            users: vec![user("alice", 2001)],
            ..ClusterDoc::default()
        };
        assert!(checked(doc.clone()).is_ok());
        // Written by other hands than the provider's: root's account with sudo and a second key line.
        doc.users.push(user("root", 0));
        doc.users[0].ssh_public_keys[0].push_str("\nssh-rsa AAAAB3NzaC1yc2EAAAADAQAB attacker");
        let refused = checked(doc).expect_err("refused").to_string();
        assert!(
            refused.starts_with("refused the published desired state of research (none of it applied)"),
            "{refused}"
        );
        assert!(refused.contains("\"root\" is a system account's name"), "{refused}");
        assert!(refused.contains("user alice: the key"), "{refused}");
    }
}
