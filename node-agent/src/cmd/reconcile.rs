//! `hpc-node reconcile`: the head node's loop applying the published desired state to Slurm.

use std::path::PathBuf;

use hpc_aws::Aws;

use crate::cli::ReconcileArgs;
use crate::error::{Context as _, Result};
use crate::reconcile::{reconcile_once, Layout, Outcome};

/// The layout a reconcile uses: the file given, or the image's defaults.
pub fn load_layout(path: Option<&PathBuf>) -> Result<Layout> {
    match path {
        Some(path) => {
            let text = std::fs::read_to_string(path).context(|| format!("reading layout {}", path.display()))?;
            Ok(Layout::from_json(&text)?)
        }
        None => Ok(Layout::default()),
    }
}

pub async fn run(args: &ReconcileArgs, aws: &Aws) -> Result<()> {
    let layout = load_layout(args.layout.as_ref())?;
    let slurmctld = crate::reconcile::slurmctld();
    let cluster = &args.cluster.cluster;
    loop {
        let result = reconcile_once(aws, cluster, &layout, &slurmctld).await;
        match &result {
            Ok(Outcome::Unchanged | Outcome::NoPartitions) => {}
            Ok(Outcome::Applied {
                reconfigured,
                restarted,
            }) => eprintln!(
                "hpc-node: applied the desired state of {cluster} (reconfigured: {reconfigured}, restarted: {restarted})"
            ),
            Err(e) => eprintln!("hpc-node: kept the running configuration: {e}"),
        }
        crate::controller::save_tres_for_backup();
        if args.once {
            return result.map(|_| ()).map_err(Into::into);
        }
        tokio::time::sleep(std::time::Duration::from_secs(args.interval)).await;
    }
}
