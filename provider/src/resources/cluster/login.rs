//! The login nodes: as many as planned, each launched with the cluster's current settings (the
//! head's image, key pair, instance profile and root volume, the login instance type). A change
//! of any of them rolls the login nodes: their successors are launched and, with
//! `wait_for_ready`, report ready before the nodes they replace are terminated, so users always
//! have a login node to reach. A successor that fails to boot is terminated and the old nodes
//! stay.
//!
//! Each login instance carries a digest of its settings ([`tag::LAUNCH_SETTINGS`]); one launched
//! before the tag existed is current while its image and type are the plan's.

use std::collections::BTreeMap;
use std::time::Duration;

use hpc_aws::ec2::{InstanceInfo, LaunchTemplateSpec};
use tfplugin::model::Field;
use tfplugin::{Diagnostic, Diagnostics, Value};

use super::head::{console_tail, reported};
use super::model::{record, Cluster, Computed};
use super::template;
use crate::clients::Clients;
use crate::desired_state::boot::{login_param, login_reports_path, BootReport, Phase, Role};
use crate::desired_state::{self, tag};
use crate::resources::{aws_diag, or_stop};

/// The settings of `spec` a login node is launched with, as a short stable digest (FNV-1a, 64
/// bits): the same settings give the same digest in every provider release.
pub(super) fn settings_digest(spec: &LaunchTemplateSpec) -> String {
    let root = spec
        .root_volume
        .as_ref()
        .map(|r| format!("{}/{}/{}", r.size_gib, r.volume_type, r.encrypted))
        .unwrap_or_default();
    let settings = [
        spec.image_id.as_str(),
        spec.instance_type.as_deref().unwrap_or_default(),
        spec.key_name.as_deref().unwrap_or_default(),
        spec.instance_profile_arn.as_deref().unwrap_or_default(),
        root.as_str(),
    ]
    .join("\n");
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in settings.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// What becomes of the login nodes: those kept, how many to launch, those retired once the new
/// ones serve.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Roll {
    pub keep: Vec<String>,
    pub launch: usize,
    pub retire: Vec<String>,
}

/// The roll from `nodes` (with their boot `reports`) to `want` nodes of `spec`'s settings:
/// nodes launched with other settings, and nodes that reported a failed boot, are retired.
pub(super) fn roll(
    nodes: &[InstanceInfo],
    reports: &BTreeMap<String, BootReport>,
    spec: &LaunchTemplateSpec,
    want: usize,
) -> Roll {
    let digest = settings_digest(spec);
    let current = |i: &InstanceInfo| {
        let settings = match i.tag(tag::LAUNCH_SETTINGS) {
            Some(d) => d == digest,
            None => i.image_id == spec.image_id && Some(&i.instance_type) == spec.instance_type.as_ref(),
        };
        let failed = reports.get(&i.id).is_some_and(|r| r.phase == Phase::Failed);
        settings && !failed
    };
    let mut sorted: Vec<&InstanceInfo> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    let (current, stale): (Vec<&InstanceInfo>, Vec<&InstanceInfo>) = sorted.into_iter().partition(|i| current(i));
    let ids = |nodes: Vec<&InstanceInfo>| nodes.into_iter().map(|i| i.id.clone()).collect::<Vec<String>>();
    let (mut keep, mut retire) = (ids(current), ids(stale));
    retire.extend(keep.split_off(want.min(keep.len())));
    Roll {
        launch: want - keep.len(),
        keep,
        retire,
    }
}

/// What the login nodes are launched for: the cluster's name, security groups and tags.
pub(super) struct Owner<'a> {
    pub name: &'a str,
    pub sgs: &'a [String],
    pub tags: &'a [(String, String)],
}

/// Login nodes an apply launched (or found still booting), to be waited for before the old ones
/// are retired.
pub(super) struct Started {
    wait: Vec<String>,
    retire: Vec<String>,
}

/// Brings the login nodes to the planned count and settings and records them in `state`; the
/// apply then calls [`finish`]. With `roll_out` (the plan showed new login nodes: a count or a
/// setting changed, or a node was lost) nodes are launched and replaced as the module's notes
/// say; without it the plan promised the nodes in `state` and they stay, and only login nodes
/// outside it (left by an interrupted apply) are retired.
pub(super) async fn start(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    state: &mut Value,
    owner: &Owner<'_>,
    roll_out: bool,
    timeout: Duration,
) -> Result<Started, Diagnostics> {
    let cluster = Cluster::read(state)?;
    let (login, head) = (cluster.login_nodes, cluster.head_node);
    let want = usize::try_from(login.count).unwrap_or(0);
    let name = owner.name;
    let user_data = desired_state::boot::user_data(Role::Login, name, &clients.aws.region, None, None);
    let spec = template(
        &head,
        name,
        Role::Login,
        login.instance_type,
        owner.sgs,
        owner.tags,
        user_data,
    );
    let nodes = super::role_nodes(clients, name, Role::Login).await?;
    let reports = reports(clients, name).await?;
    let plan = if roll_out {
        roll(&nodes, &reports, &spec, want)
    } else {
        promised(&nodes, Computed::of(state)?.login_node_ids.items())
    };
    forget_reports(clients, name, &reports, &nodes).await?;
    let launched = launch(clients, state, &spec, plan.launch).await?;
    let mut ids: Vec<String> = plan.keep.iter().chain(&launched).cloned().collect();
    ids.sort();
    let mut ips = Vec::new();
    for id in &ids {
        let info = or_stop(
            ctx,
            "waiting for login nodes",
            clients.ec2.wait_instance_running(id, timeout),
        )
        .await
        .map_err(|e| aws_diag("A login node did not start", &e))?;
        ips.push(info.private_ip.unwrap_or_default());
    }
    record(state, |m| {
        m.login_node_ids = Field::Known(ids);
        m.login_node_private_ips = Field::Known(ips);
    })?;
    // Kept nodes of this release that have not reported ready (an apply stopped while they
    // booted) are waited for too; nodes launched before login reports existed are not.
    let unsure = plan.keep.iter().filter(|id| match reports.get(*id) {
        Some(r) => r.phase == Phase::Booting,
        None => nodes
            .iter()
            .any(|n| &n.id == *id && n.tag(tag::LAUNCH_SETTINGS).is_some()),
    });
    let wait = if cluster.wait_for_ready {
        launched.iter().chain(unsure).cloned().collect()
    } else {
        Vec::new()
    };
    Ok(Started {
        wait,
        retire: plan.retire,
    })
}

/// Waits for the started login nodes to report ready, then retires the ones they replace.
pub(super) async fn finish(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    name: &str,
    started: Started,
    timeout: Duration,
) -> Result<(), Diagnostics> {
    ready(ctx, clients, name, &started.wait, timeout).await?;
    retire(ctx, clients, name, &started.retire, timeout).await
}

/// The login nodes a refresh records (ids and addresses): those in `state` that still run and
/// did not report a failed boot. Through the shared views, which a refresh of the cluster has
/// already taken.
pub(super) async fn refreshed(
    clients: &Clients,
    state: &Value,
    name: &str,
) -> Result<Option<(Vec<String>, Vec<String>)>, Diagnostics> {
    let Some(ids) = Computed::of(state)?.login_node_ids.known().cloned() else {
        return Ok(None);
    };
    let live = clients
        .ec2
        .instances_viewed(tag::ROLE)
        .await
        .map_err(|e| aws_diag("Cannot read login nodes", &e))?;
    let params = clients
        .ssm
        .view(&desired_state::cluster_prefix(name))
        .await
        .map_err(|e| aws_diag("Cannot read the login nodes' boot reports", &e))?;
    let failed = |id: &str| {
        params
            .get(&login_param(name, id))
            .and_then(|p| serde_json::from_str::<BootReport>(&p.value).ok())
            .is_some_and(|r| r.phase == Phase::Failed)
    };
    let (mut kept, mut ips) = (Vec::new(), Vec::new());
    for id in ids {
        let Some(node) = live.iter().find(|n| n.id == id) else {
            continue;
        };
        if !matches!(node.state.as_str(), "shutting-down" | "terminated") && !failed(&id) {
            ips.push(node.private_ip.clone().unwrap_or_default());
            kept.push(id);
        }
    }
    Ok(Some((kept, ips)))
}

/// Without a roll: the nodes the plan promised stay (those still running), and any other login
/// node goes.
fn promised(nodes: &[InstanceInfo], ids: &[String]) -> Roll {
    let running = |id: &String| nodes.iter().any(|n| &n.id == id);
    let keep: Vec<String> = ids.iter().filter(|id| running(id)).cloned().collect();
    let mut retire: Vec<String> = nodes
        .iter()
        .map(|n| n.id.clone())
        .filter(|id| !ids.contains(id))
        .collect();
    retire.sort();
    Roll {
        launch: ids.len() - keep.len(),
        keep,
        retire,
    }
}

/// Deletes the reports of login nodes that are gone (terminated outside Terraform, or by an
/// apply stopped before it cleaned up).
async fn forget_reports(
    clients: &Clients,
    name: &str,
    reports: &BTreeMap<String, BootReport>,
    nodes: &[InstanceInfo],
) -> Result<(), Diagnostics> {
    let gone: Vec<String> = reports
        .keys()
        .filter(|id| !nodes.iter().any(|n| &n.id == *id))
        .cloned()
        .collect();
    delete_reports(clients, name, &gone).await
}

async fn delete_reports(clients: &Clients, name: &str, ids: &[String]) -> Result<(), Diagnostics> {
    for id in ids {
        clients
            .ssm
            .delete(&login_param(name, id))
            .await
            .map_err(|e| aws_diag("Cannot delete a login node's boot report", &e))?;
    }
    Ok(())
}

/// The login nodes' boot reports, by instance.
async fn reports(clients: &Clients, name: &str) -> Result<BTreeMap<String, BootReport>, Diagnostics> {
    let params = clients
        .ssm
        .list(&login_reports_path(name))
        .await
        .map_err(|e| aws_diag("Cannot read the login nodes' boot reports", &e))?;
    Ok(params
        .iter()
        .filter_map(|p| serde_json::from_str::<BootReport>(&p.value).ok())
        .map(|r| (r.instance_id.clone(), r))
        .collect())
}

/// Launches `count` login nodes with `spec`'s settings (tagged with their digest).
async fn launch(
    clients: &Clients,
    state: &Value,
    spec: &LaunchTemplateSpec,
    count: usize,
) -> Result<Vec<String>, Diagnostics> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let (lt, _) = clients
        .ec2
        .ensure_launch_template(spec)
        .await
        .map_err(|e| aws_diag("Cannot create the login node launch template", &e))?;
    let mut tags = spec.tags.clone();
    tags.push((tag::LAUNCH_SETTINGS.into(), settings_digest(spec)));
    let subnet = Cluster::read(state)?.subnet_id;
    let mut ids = Vec::new();
    for _ in 0..count {
        // One launch's token (EC2 takes at most 64 characters: a 40-character cluster name
        // in it was refused on AWS; the emulator now refuses it too).
        let token = uuid::Uuid::new_v4().to_string();
        let id = clients
            .ec2
            .run_instance(&lt, &subnet, &token, &tags)
            .await
            .map_err(|e| aws_diag("Cannot launch a login node", &e))?;
        ids.push(id);
    }
    Ok(ids)
}

/// Waits for each new login node's report. One that fails (or never reports) is terminated,
/// and the error carries its reason and console; the nodes it was to replace stay.
async fn ready(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    name: &str,
    ids: &[String],
    timeout: Duration,
) -> Result<(), Diagnostics> {
    let mut failed = Vec::new();
    let mut diags = Diagnostics::new();
    for id in ids {
        let param = login_param(name, id);
        let error = match reported(ctx, clients, "the login node", &param, id, timeout).await {
            Ok(r) if r.phase == Phase::Ready => continue,
            Ok(r) => format!("It failed at {}: {}", r.step, r.error.unwrap_or_default()),
            // Stopped: the next apply finds the node and waits for it again.
            Err(e) if e.code_is(&["Interrupted"]) => return Err(aws_diag("Stopped waiting for a login node", &e)),
            Err(e) => e.to_string(),
        };
        diags.push(Diagnostic::error(
            format!("The login node {id} of {name} did not become ready; it is terminated"),
            format!(
                "{error}\n\n{}\n\nThe login nodes it was to replace are kept.",
                console_tail(clients, id).await
            ),
        ));
        failed.push(id.clone());
    }
    if failed.is_empty() {
        return Ok(());
    }
    if let Err(e) = retire(ctx, clients, name, &failed, timeout).await {
        diags.extend(e);
    }
    Err(diags)
}

/// Terminates login nodes and deletes their boot reports.
async fn retire(
    ctx: &tfplugin::Ctx,
    clients: &Clients,
    name: &str,
    ids: &[String],
    timeout: Duration,
) -> Result<(), Diagnostics> {
    if ids.is_empty() {
        return Ok(());
    }
    or_stop(ctx, "terminating login nodes", clients.ec2.terminate(ids, timeout))
        .await
        .map_err(|e| aws_diag("Cannot terminate login nodes", &e))?;
    delete_reports(clients, name, ids).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpc_aws::ec2::RootVolume;

    fn spec(image: &str, instance_type: &str) -> LaunchTemplateSpec {
        LaunchTemplateSpec {
            name: "hpc-c-login".into(),
            image_id: image.into(),
            instance_type: Some(instance_type.into()),
            key_name: Some("k".into()),
            security_group_ids: vec!["sg-1".into()],
            instance_profile_arn: Some("arn:aws:iam::1:instance-profile/p".into()),
            user_data: Some("#!/bin/bash".into()),
            root_volume: Some(RootVolume {
                size_gib: 100,
                volume_type: "gp3".into(),
                encrypted: true,
                kms_key_id: None,
            }),
            efa_network_cards: Vec::new(),
            placement_group: None,
            capacity_reservation: None,
            tags: Vec::new(),
        }
    }

    fn node(id: &str, image: &str, digest: Option<&str>) -> InstanceInfo {
        InstanceInfo {
            id: id.into(),
            state: "running".into(),
            image_id: image.into(),
            instance_type: "c7i.xlarge".into(),
            tags: digest
                .map(|d| vec![(tag::LAUNCH_SETTINGS.to_string(), d.to_string())])
                .unwrap_or_default(),
            ..InstanceInfo::default()
        }
    }

    fn report(id: &str, phase: Phase) -> (String, BootReport) {
        let r = BootReport {
            instance_id: id.into(),
            host: "h".into(),
            addr: "10.0.0.9".into(),
            phase,
            step: "s".into(),
            error: None,
            at: 1,
        };
        (id.to_string(), r)
    }

    #[test]
    fn the_digest_changes_with_each_launch_setting_and_nothing_else() {
        let base = spec("ami-1", "c7i.xlarge");
        let d = settings_digest(&base);
        assert_eq!(d.len(), 16);
        assert_eq!(d, settings_digest(&base.clone()));
        let mut other = base.clone();
        other.tags.push(("team".into(), "x".into()));
        other.user_data = Some("#!/bin/sh".into());
        assert_eq!(settings_digest(&other), d, "tags and user data do not roll login nodes");
        type Change = Box<dyn Fn(&mut LaunchTemplateSpec)>;
        let changes: Vec<Change> = vec![
            Box::new(|s| s.image_id = "ami-2".into()),
            Box::new(|s| s.instance_type = Some("c7i.2xlarge".into())),
            Box::new(|s| s.key_name = None),
            Box::new(|s| s.instance_profile_arn = Some("arn:aws:iam::1:instance-profile/q".into())),
            Box::new(|s| s.root_volume.as_mut().into_iter().for_each(|r| r.size_gib = 200)),
            Box::new(|s| s.root_volume.as_mut().into_iter().for_each(|r| r.encrypted = false)),
        ];
        for change in changes {
            let mut s = base.clone();
            change(&mut s);
            assert_ne!(settings_digest(&s), d, "{s:?}");
        }
    }

    #[test]
    fn current_nodes_are_kept_and_others_retired_once_successors_launch() {
        let s = spec("ami-new", "c7i.xlarge");
        let d = settings_digest(&s);
        let old = settings_digest(&spec("ami-old", "c7i.xlarge"));
        let nodes = [node("i-3", "ami-new", Some(&d)), node("i-1", "ami-old", Some(&old))];
        let none = BTreeMap::new();
        assert_eq!(
            roll(&nodes, &none, &s, 2),
            Roll {
                keep: vec!["i-3".into()],
                launch: 1,
                retire: vec!["i-1".into()]
            }
        );
        // Fewer wanted: the current ones beyond the count go too.
        let both = [node("i-1", "ami-new", Some(&d)), node("i-2", "ami-new", Some(&d))];
        assert_eq!(
            roll(&both, &none, &s, 1),
            Roll {
                keep: vec!["i-1".into()],
                launch: 0,
                retire: vec!["i-2".into()]
            }
        );
        assert_eq!(roll(&[], &none, &s, 2).launch, 2);
    }

    #[test]
    fn without_a_roll_the_promised_nodes_stay_and_strays_go() {
        let nodes = [
            node("i-9", "ami-1", None),
            node("i-1", "ami-1", None),
            node("i-2", "ami-0", None),
        ];
        let ids = ["i-1".to_string(), "i-2".to_string()];
        assert_eq!(
            promised(&nodes, &ids),
            Roll {
                keep: ids.to_vec(),
                launch: 0,
                retire: vec!["i-9".into()]
            }
        );
        // A promised node gone since the refresh is launched again.
        let r = promised(&nodes[..2], &ids);
        assert_eq!((r.keep, r.launch), (vec!["i-1".to_string()], 1));
    }

    #[test]
    fn an_untagged_node_is_current_by_its_image_and_type_and_a_failed_one_is_replaced() {
        let s = spec("ami-new", "c7i.xlarge");
        let nodes = [node("i-1", "ami-new", None), node("i-2", "ami-old", None)];
        let failed: BTreeMap<_, _> = [report("i-1", Phase::Failed)].into_iter().collect();
        let none = BTreeMap::new();
        let r = roll(&nodes, &none, &s, 1);
        assert_eq!((r.keep, r.retire), (vec!["i-1".to_string()], vec!["i-2".to_string()]));
        let r = roll(&nodes, &failed, &s, 1);
        assert_eq!(r.keep, Vec::<String>::new());
        assert_eq!(r.launch, 1);
        assert_eq!(r.retire, vec!["i-1".to_string(), "i-2".to_string()]);
    }
}
