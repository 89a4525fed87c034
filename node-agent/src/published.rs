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
/// the agent's state directory).
pub async fn cluster_doc_with_users(aws: &Aws, args: &ClusterArgs) -> Result<Option<ClusterDoc>> {
    let Some(mut doc) = cluster_doc(aws, &args.cluster).await? else {
        return Ok(None);
    };
    fill_users(aws, &mut doc, Some(&args.state_dir.join("users.json"))).await?;
    Ok(Some(doc))
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
