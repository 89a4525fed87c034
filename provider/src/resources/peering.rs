//! `hpc_network_peering`: the network path from a cluster's VPC to a VPC where capacity pools
//! of another region (or the same one) launch: a VPC peering connection requested from the
//! provider's region and accepted in the peer's, a route for the other side's range in every
//! route table of both VPCs, and each side's groups admitting the other side's range, so that
//! slurmd, munge, NFS and MPI traffic passes both ways. Ranges must not overlap (checked at
//! plan). A partition's pool in another region names the connection (`peering_connection_id`).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use hpc_aws::ec2::{Ec2, Peering};
use hpc_aws::AwsError;
use tfplugin::model::{Field, Model};
use tfplugin::{
    timeouts, ApplyOutcome, Attribute, AttributePath, Block, CreateRequest, DeleteRequest, Diagnostic, Diagnostics,
    ImportRequest, PlanRequest, ReadRequest, Resource, Schema, Type, UpdateRequest, ValidateRequest, Value,
};

use crate::clients::Clients;
use crate::convert::user_tags;
use crate::desired_state::tag;
use crate::resources::{aws_diag, checks, or_stop};

pub struct HpcNetworkPeering;

const CREATE_TIMEOUT: Duration = Duration::from_secs(10 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// What the security group rules this resource adds say they are for.
const RULE_DESCRIPTION: &str = "hpcforge: traffic from the peered VPC";

fn schema() -> Schema {
    let groups = |name: &str, doc: &str| Attribute::optional(name, Type::list(Type::String)).description(doc);
    Schema::new(
        0,
        Block::new(vec![
            Attribute::computed_kept("id", Type::String, "The VPC peering connection id (pcx-...)."),
            Attribute::required("vpc_id", Type::String)
                .description("The cluster's VPC, in the provider's region (e.g. `hpc_network.<name>.vpc_id`).")
                .requires_replace(),
            Attribute::required("peer_vpc_id", Type::String)
                .description("The VPC the capacity pools of `peer_region` launch in. Its IPv4 range must not overlap `vpc_id`'s.")
                .requires_replace(),
            Attribute::optional_computed("peer_region", Type::String)
                .description("Region of `peer_vpc_id`. Default: the provider's region.")
                .requires_replace(),
            groups(
                "security_group_ids",
                "Groups of `vpc_id` that admit all traffic from `peer_vpc_id`'s range (the cluster's security group, e.g. `hpc_network.<name>.security_group_id`: slurmctld, slurmdbd, munge and the /home mount targets).",
            ),
            groups(
                "peer_security_group_ids",
                "Groups of `peer_vpc_id` that admit all traffic from `vpc_id`'s range (the group the remote pool's nodes get: slurmd, srun and MPI).",
            ),
            Attribute::optional("tags", Type::map(Type::String)).description("Tags of the peering connection."),
            Attribute::computed("tags_all", Type::map(Type::String))
                .description("`tags` merged over the provider's `default_tags`."),
            Attribute::computed_kept("cidr_block", Type::String, "`vpc_id`'s IPv4 range."),
            Attribute::computed_kept("peer_cidr_block", Type::String, "`peer_vpc_id`'s IPv4 range."),
            Attribute::computed_kept(
                "route_table_ids",
                Type::list(Type::String),
                "Route tables of `vpc_id` that send `peer_cidr_block` through the connection (every table of the VPC when it was made).",
            ),
            Attribute::computed_kept(
                "peer_route_table_ids",
                Type::list(Type::String),
                "Route tables of `peer_vpc_id` that send `cidr_block` through the connection.",
            ),
        ])
        .with_blocks(vec![timeouts::block(&["create", "delete"])])
        .description("A VPC peering connection between a cluster's VPC and a VPC of another region (or the same), with routes both ways and security group rules, so that a partition's capacity pool there can join the cluster. Inter-region traffic is billed per GB by AWS."),
    )
}

tfplugin::model! {
    /// The attributes of an `hpc_network_peering` configuration its validation checks, as written.
    #[derive(Debug, Clone, Default)]
    struct PeeringConfig {
        vpc_id: Field<String>,
        peer_vpc_id: Field<String>,
        peer_region: Field<String>,
        security_group_ids: Field<Vec<String>>,
        peer_security_group_ids: Field<Vec<String>>,
        tags: Field<BTreeMap<String, String>>,
    }
}

tfplugin::model! {
    /// What the plan fills in: the peer's region when the configuration leaves it out, and the
    /// ranges of a new connection's two VPCs.
    struct Shown {
        peer_region: Field<String>,
        cidr_block: Field<String>,
        peer_cidr_block: Field<String>,
    }
}

/// Changes what the plan shows through [`Shown`].
fn show(req: &mut PlanRequest, f: impl FnOnce(&mut Shown)) {
    if let Err(e) = tfplugin::model::change(&mut req.planned, &schema().block.ty(), f) {
        req.diagnostics
            .push(e.diagnostic("The planned peering connection cannot be read"));
    }
}

tfplugin::model! {
    /// An `hpc_network_peering`: every attribute of its schema.
    #[derive(Debug, Clone, PartialEq)]
    struct PeeringModel {
        id: Option<String>,
        vpc_id: String,
        peer_vpc_id: String,
        peer_region: Option<String>,
        security_group_ids: Option<Vec<String>>,
        peer_security_group_ids: Option<Vec<String>>,
        tags: Option<BTreeMap<String, String>>,
        tags_all: Option<BTreeMap<String, String>>,
        cidr_block: Option<String>,
        peer_cidr_block: Option<String>,
        route_table_ids: Option<Vec<String>>,
        peer_route_table_ids: Option<Vec<String>>,
        timeouts: Value,
    }
}

impl PeeringModel {
    fn of(v: &Value) -> Result<PeeringModel, Diagnostics> {
        PeeringModel::from_value(&schema().block.with_defaults(v))
            .map_err(|e| e.into_diagnostics("The peering's values cannot be read"))
    }

    fn value(&self) -> Value {
        self.write(&schema().ty())
    }

    fn tags_all(&self) -> Vec<(String, String)> {
        self.tags_all.clone().unwrap_or_default().into_iter().collect()
    }

    fn groups(&self) -> Vec<String> {
        self.security_group_ids.clone().unwrap_or_default()
    }

    fn peer_groups(&self) -> Vec<String> {
        self.peer_security_group_ids.clone().unwrap_or_default()
    }
}

/// EC2 on both sides: the provider's region and the peer's.
struct Sides {
    home: Ec2,
    peer: Ec2,
}

impl Sides {
    fn of(clients: &Clients, peer_region: Option<&str>) -> Sides {
        let peer = match peer_region {
            Some(r) if r != clients.aws.region => clients.aws.ec2_in(r),
            _ => clients.ec2.clone(),
        };
        Sides {
            home: clients.ec2.clone(),
            peer,
        }
    }
}

/// Each side's range; an error names a VPC that does not exist.
async fn ranges(sides: &Sides, m: &PeeringModel) -> Result<(String, String), Diagnostics> {
    let missing = |attr: &str, vpc: &str, region: &str| {
        Diagnostics::from(
            Diagnostic::error(
                format!("VPC {vpc} does not exist in {region}"),
                "Give a VPC of that region (peer_region names the peer's).",
            )
            .at(AttributePath::root(attr)),
        )
    };
    let read = |e: AwsError| aws_diag("Cannot read the VPCs to peer", &e);
    let home = sides.home.vpc_cidr(&m.vpc_id).await.map_err(read)?;
    let home = home.ok_or_else(|| missing("vpc_id", &m.vpc_id, sides.home.region()))?;
    let peer = sides.peer.vpc_cidr(&m.peer_vpc_id).await.map_err(read)?;
    let peer = peer.ok_or_else(|| missing("peer_vpc_id", &m.peer_vpc_id, sides.peer.region()))?;
    Ok((home, peer))
}

/// Refuses ranges that overlap: routes could not tell the two VPCs' addresses apart.
fn overlap_check(home: &str, peer: &str) -> Diagnostics {
    let parsed = (home.parse::<hpc_aws::cidr::Cidr>(), peer.parse::<hpc_aws::cidr::Cidr>());
    let (Ok(a), Ok(b)) = parsed else {
        return Diagnostics::new();
    };
    if !a.overlaps(&b) {
        return Diagnostics::new();
    }
    Diagnostic::error(
        format!("the VPCs' ranges overlap: {home} and {peer}"),
        "Peered VPCs need ranges that share no address (routes could not tell them apart). Give the peer's network another range, e.g. hpc_network cidr_block = \"10.1.0.0/16\".",
    )
    .at(AttributePath::root("peer_vpc_id"))
    .into()
}

/// Makes the path, recording each step in `state` as it goes.
async fn connect(sides: &Sides, state: &mut PeeringModel, timeout: Duration) -> Result<(), AwsError> {
    let (home_cidr, peer_cidr) = (
        state.cidr_block.clone().unwrap_or_default(),
        state.peer_cidr_block.clone().unwrap_or_default(),
    );
    let region = sides.peer.region().to_string();
    let marker = (
        tag::PEERING.to_string(),
        format!("{} {}", state.vpc_id, state.peer_vpc_id),
    );
    let requested = sides
        .home
        .request_peering(&state.vpc_id, &state.peer_vpc_id, &region, &state.tags_all(), marker)
        .await?;
    let pcx = requested.id.clone();
    state.id = Some(pcx.clone());
    if !requested.is_active() {
        sides.peer.accept_peering(&pcx, timeout).await?;
        // The requester's side may see it active a moment later.
        sides.home.wait_peering_active(&pcx, timeout).await?;
    }
    state.route_table_ids = Some(sides.home.add_peering_routes(&state.vpc_id, &peer_cidr, &pcx).await?);
    state.peer_route_table_ids = Some(
        sides
            .peer
            .add_peering_routes(&state.peer_vpc_id, &home_cidr, &pcx)
            .await?,
    );
    for g in state.groups() {
        sides.home.allow_range(&g, &peer_cidr, RULE_DESCRIPTION).await?;
    }
    for g in state.peer_groups() {
        sides.peer.allow_range(&g, &home_cidr, RULE_DESCRIPTION).await?;
    }
    Ok(())
}

/// Takes the path down: rules, routes, then the connection.
async fn disconnect(sides: &Sides, state: &PeeringModel) -> Result<(), AwsError> {
    let home_cidr = state.cidr_block.clone().unwrap_or_default();
    let peer_cidr = state.peer_cidr_block.clone().unwrap_or_default();
    for g in state.groups() {
        sides.home.revoke_range(&g, &peer_cidr, RULE_DESCRIPTION).await?;
    }
    for g in state.peer_groups() {
        sides.peer.revoke_range(&g, &home_cidr, RULE_DESCRIPTION).await?;
    }
    let Some(pcx) = state.id.as_deref() else {
        return Ok(());
    };
    let tables = state.route_table_ids.clone().unwrap_or_default();
    sides.home.remove_peering_routes(&tables, &peer_cidr, pcx).await?;
    let tables = state.peer_route_table_ids.clone().unwrap_or_default();
    sides.peer.remove_peering_routes(&tables, &home_cidr, pcx).await?;
    sides.home.delete_peering(pcx).await
}

/// Admits the other side's range in groups added to a list, and takes it back from groups
/// removed from it.
async fn regroup(ec2: &Ec2, prior: &[String], planned: &[String], cidr: &str) -> Result<(), AwsError> {
    for g in prior.iter().filter(|g| !planned.contains(g)) {
        ec2.revoke_range(g, cidr, RULE_DESCRIPTION).await?;
    }
    for g in planned.iter().filter(|g| !prior.contains(g)) {
        ec2.allow_range(g, cidr, RULE_DESCRIPTION).await?;
    }
    Ok(())
}

fn id_checks(c: &PeeringConfig, diags: &mut Diagnostics) {
    for (attr, id) in [("vpc_id", &c.vpc_id), ("peer_vpc_id", &c.peer_vpc_id)] {
        if let Some(id) = id.as_str().filter(|id| !id.starts_with("vpc-")) {
            diags.error_at(
                AttributePath::root(attr),
                format!("{id:?} is not a VPC id"),
                "Use an id like vpc-0123456789abcdef0.",
            );
        }
    }
    for (attr, groups) in [
        ("security_group_ids", &c.security_group_ids),
        ("peer_security_group_ids", &c.peer_security_group_ids),
    ] {
        for (i, g) in groups.items().iter().enumerate() {
            if !g.starts_with("sg-") {
                diags.error_at(
                    AttributePath::root(attr).index(i),
                    format!("{g:?} is not a security group id"),
                    "Use an id like sg-0123456789abcdef0.",
                );
            }
        }
    }
}

#[async_trait]
impl Resource for HpcNetworkPeering {
    fn type_name(&self) -> &'static str {
        "hpc_network_peering"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    async fn validate(&self, req: ValidateRequest) -> Diagnostics {
        let c = match PeeringConfig::from_value(&req.config) {
            Ok(c) => c,
            Err(e) => return e.into_diagnostics("The peering's configuration cannot be read"),
        };
        let mut diags = Diagnostics::new();
        id_checks(&c, &mut diags);
        checks::tags(c.tags.known(), AttributePath::root("tags"), &mut diags);
        let same = c.vpc_id.as_str().is_some() && c.vpc_id == c.peer_vpc_id;
        if same && !c.peer_region.is_set() {
            diags.error_at(
                AttributePath::root("peer_vpc_id"),
                "a VPC cannot be peered with itself",
                "Give the VPC of the other region's (or the other) network.",
            );
        }
        diags
    }

    async fn modify_plan(&self, req: &mut PlanRequest) {
        let ctx = req.ctx.clone();
        let Ok(clients) = Clients::of(&ctx) else {
            return;
        };
        if req.planned.is_null() {
            return;
        }
        clients.plan_tags_all(&mut req.planned);
        let region_given = PeeringConfig::from_value(&req.config).is_ok_and(|c| c.peer_region.is_set());
        if !region_given {
            let region = Field::Known(clients.aws.region.clone());
            show(req, |p| p.peer_region = region);
        }
        // The ranges are read (and checked) once, for a new connection whose VPCs are known.
        if !req.prior.is_null() {
            return;
        }
        let Ok(m) = PeeringModel::of(&req.planned) else {
            return;
        };
        if m.vpc_id == m.peer_vpc_id && m.peer_region.as_deref() == Some(clients.aws.region.as_str()) {
            req.diagnostics.push(
                Diagnostic::error(
                    "a VPC cannot be peered with itself",
                    "Give the VPC of the other region's (or the other) network.",
                )
                .at(AttributePath::root("peer_vpc_id")),
            );
            return;
        }
        match ranges(&Sides::of(clients, m.peer_region.as_deref()), &m).await {
            Ok((home, peer)) => {
                req.diagnostics.extend(overlap_check(&home, &peer));
                show(req, |p| {
                    p.cidr_block = Field::Known(home);
                    p.peer_cidr_block = Field::Known(peer);
                });
            }
            Err(d) => req.diagnostics.extend(d),
        }
    }

    async fn create(&self, req: CreateRequest) -> ApplyOutcome {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return ApplyOutcome::failed(Value::Null, d),
        };
        let mut state = match PeeringModel::of(&req.planned) {
            Ok(m) => m,
            Err(d) => return ApplyOutcome::failed(Value::Null, d),
        };
        let sides = Sides::of(clients, state.peer_region.as_deref());
        match ranges(&sides, &state).await {
            Ok((home, peer)) => (state.cidr_block, state.peer_cidr_block) = (Some(home), Some(peer)),
            Err(d) => return ApplyOutcome::failed(Value::Null, d),
        }
        // VPCs made in the same apply were not known at plan.
        let overlap = overlap_check(
            state.cidr_block.as_deref().unwrap_or_default(),
            state.peer_cidr_block.as_deref().unwrap_or_default(),
        );
        if overlap.has_errors() {
            return ApplyOutcome::failed(Value::Null, overlap);
        }
        let timeout = timeouts::get(&req.planned, "create", CREATE_TIMEOUT);
        let result = or_stop(&req.ctx, "peering VPCs", connect(&sides, &mut state, timeout)).await;
        match result {
            Ok(()) => ApplyOutcome::ok(state.value()),
            // What was made is recorded (tainted) so destroy or the next apply removes it.
            Err(e) if state.id.is_none() => ApplyOutcome::failed(Value::Null, aws_diag("Cannot peer the VPCs", &e)),
            Err(e) => ApplyOutcome::failed(state.value(), aws_diag("Cannot peer the VPCs", &e)),
        }
    }

    async fn read(&self, req: ReadRequest) -> Result<Option<Value>, Diagnostics> {
        let clients = Clients::of(&req.ctx).map_err(Diagnostics::from)?;
        let state = PeeringModel::of(&req.state)?;
        let Some(id) = state.id.as_deref() else {
            return Ok(None);
        };
        let found = clients
            .ec2
            .peering(id)
            .await
            .map_err(|e| aws_diag("Cannot read the peering connection", &e))?;
        // Deleted, rejected or expired: planned again from scratch.
        let Some(p) = found.filter(Peering::is_active) else {
            return Ok(None);
        };
        let state = refreshed(clients, state, &p)
            .await
            .map_err(|e| aws_diag("Cannot read the peering's groups", &e))?;
        Ok(Some(state.value()))
    }

    async fn update(&self, req: UpdateRequest) -> ApplyOutcome {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return ApplyOutcome::failed(req.prior, d),
        };
        let (prior, planned) = match (PeeringModel::of(&req.prior), PeeringModel::of(&req.planned)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(d), _) | (_, Err(d)) => return ApplyOutcome::failed(req.prior, d),
        };
        let sides = Sides::of(clients, prior.peer_region.as_deref());
        let result = async {
            let (home_cidr, peer_cidr) = (prior.cidr_block.clone(), prior.peer_cidr_block.clone());
            regroup(
                &sides.home,
                &prior.groups(),
                &planned.groups(),
                &peer_cidr.unwrap_or_default(),
            )
            .await?;
            regroup(
                &sides.peer,
                &prior.peer_groups(),
                &planned.peer_groups(),
                &home_cidr.unwrap_or_default(),
            )
            .await?;
            let ids: Vec<String> = prior.id.iter().cloned().collect();
            sides.home.retag(&ids, &prior.tags_all(), &planned.tags_all()).await
        }
        .await;
        match result {
            Ok(()) => ApplyOutcome::ok(req.planned),
            Err(e) => ApplyOutcome::failed(req.prior, aws_diag("Cannot update the peering", &e)),
        }
    }

    async fn import(&self, req: ImportRequest) -> Result<Value, Diagnostics> {
        let id = req.id.trim();
        let clients = Clients::of(&req.ctx).map_err(Diagnostics::from)?;
        let found = match id.starts_with("pcx-") {
            true => clients
                .ec2
                .peering(id)
                .await
                .map_err(|e| aws_diag("Cannot import the peering connection", &e))?,
            false => None,
        };
        let Some(p) = found else {
            return Err(Diagnostic::error(
                "Peering connection not found",
                format!(
                    "{id:?}: import an hpc_network_peering by the id (pcx-...) of a connection requested in {}.",
                    clients.aws.region
                ),
            )
            .into());
        };
        if p.region != clients.aws.region {
            return Err(Diagnostic::error(
                "Peering connection requested from another region",
                format!(
                    "{id} was requested from {} ({}) and accepted in {}: import it with a provider of {}, whose VPC is vpc_id.",
                    p.region, p.vpc_id, p.peer_region, p.region
                ),
            )
            .into());
        }
        import_value(clients, &p).await
    }

    async fn delete(&self, req: DeleteRequest) -> Diagnostics {
        let clients = match Clients::of(&req.ctx) {
            Ok(c) => c,
            Err(d) => return d.into(),
        };
        let state = match PeeringModel::of(&req.prior) {
            Ok(m) => m,
            Err(d) => return d,
        };
        let sides = Sides::of(clients, state.peer_region.as_deref());
        let timeout = timeouts::get(&req.prior, "delete", DELETE_TIMEOUT);
        let deleting = async {
            tokio::time::timeout(timeout, disconnect(&sides, &state))
                .await
                .unwrap_or_else(|_| Err(AwsError::new("deleting the peering", Some("Timeout"), "timed out")))
        };
        match or_stop(&req.ctx, "deleting the peering", deleting).await {
            Ok(()) => Diagnostics::new(),
            Err(e) => aws_diag("Cannot delete the peering", &e),
        }
    }
}

/// The recorded groups that still admit the other side (a rule taken away is added back by
/// the next apply), and the connection's tags as EC2 has them.
async fn refreshed(clients: &Clients, mut state: PeeringModel, p: &Peering) -> Result<PeeringModel, AwsError> {
    let sides = Sides::of(clients, state.peer_region.as_deref());
    let still = |found: Vec<(String, bool)>, recorded: &Option<Vec<String>>| {
        recorded.as_ref().map(|groups| {
            groups
                .iter()
                .filter(|g| found.iter().any(|(f, _)| f == *g))
                .cloned()
                .collect::<Vec<_>>()
        })
    };
    let (home_cidr, peer_cidr) = (p.cidr_block.clone(), p.peer_cidr_block.clone());
    let found = sides
        .home
        .groups_admitting(&p.vpc_id, &peer_cidr, RULE_DESCRIPTION)
        .await?;
    state.security_group_ids = still(found, &state.security_group_ids);
    let found = sides
        .peer
        .groups_admitting(&p.peer_vpc_id, &home_cidr, RULE_DESCRIPTION)
        .await?;
    state.peer_security_group_ids = still(found, &state.peer_security_group_ids);
    let tags = user_tags_of(p);
    if Some(&tags) != state.tags_all.as_ref() {
        let user = user_tags(&tags, &clients.default_tags);
        state.tags = (!user.is_empty() || state.tags.is_some()).then_some(user);
        state.tags_all = Some(tags);
    }
    Ok(state)
}

/// The connection's tags but hpcforge's own marker.
fn user_tags_of(p: &Peering) -> BTreeMap<String, String> {
    p.tags.iter().filter(|(k, _)| k != tag::PEERING).cloned().collect()
}

/// An imported connection: its VPCs and ranges, the route tables that route through it, and
/// the groups whose rules say they admit the other side for it.
async fn import_value(clients: &Clients, p: &Peering) -> Result<Value, Diagnostics> {
    let sides = Sides::of(clients, Some(&p.peer_region));
    let read = |e: AwsError| aws_diag("Cannot import the peering connection's routes and groups", &e);
    let ours = |found: Vec<(String, bool)>| -> Vec<String> {
        found.into_iter().filter(|(_, ours)| *ours).map(|(g, _)| g).collect()
    };
    let groups = ours(
        sides
            .home
            .groups_admitting(&p.vpc_id, &p.peer_cidr_block, RULE_DESCRIPTION)
            .await
            .map_err(read)?,
    );
    let peer_groups = ours(
        sides
            .peer
            .groups_admitting(&p.peer_vpc_id, &p.cidr_block, RULE_DESCRIPTION)
            .await
            .map_err(read)?,
    );
    let tables = sides
        .home
        .tables_routing(&p.vpc_id, &p.peer_cidr_block, &p.id)
        .await
        .map_err(read)?;
    let peer_tables = sides
        .peer
        .tables_routing(&p.peer_vpc_id, &p.cidr_block, &p.id)
        .await
        .map_err(read)?;
    let tags_all = user_tags_of(p);
    let user = user_tags(&tags_all, &clients.default_tags);
    Ok(PeeringModel {
        id: Some(p.id.clone()),
        vpc_id: p.vpc_id.clone(),
        peer_vpc_id: p.peer_vpc_id.clone(),
        peer_region: Some(p.peer_region.clone()),
        security_group_ids: (!groups.is_empty()).then_some(groups),
        peer_security_group_ids: (!peer_groups.is_empty()).then_some(peer_groups),
        tags: (!user.is_empty()).then_some(user),
        tags_all: Some(tags_all),
        cidr_block: Some(p.cidr_block.clone()),
        peer_cidr_block: Some(p.peer_cidr_block.clone()),
        route_table_ids: Some(tables),
        peer_route_table_ids: Some(peer_tables),
        timeouts: Value::Null,
    }
    .value())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_well_formed() {
        schema().check().expect("hpc_network_peering schema");
    }

    #[tokio::test]
    async fn bad_ids_and_a_vpc_peered_with_itself_are_named() {
        let mut c = Value::null_object(&schema().ty());
        c.set_attr("vpc_id", Value::string("vpc-1"));
        c.set_attr("peer_vpc_id", Value::string("vpc-1"));
        c.set_attr(
            "security_group_ids",
            crate::convert::of_list(Some(&["sg-1".to_string(), "default".to_string()])),
        );
        let d = HpcNetworkPeering.validate(ValidateRequest { config: c }).await;
        let paths: Vec<String> =
            d.0.iter()
                .filter_map(|x| x.path.as_ref().map(ToString::to_string))
                .collect();
        assert_eq!(paths, vec!["security_group_ids[1]", "peer_vpc_id"]);
    }

    #[test]
    fn overlapping_ranges_are_refused_naming_both() {
        let d = overlap_check("10.0.0.0/16", "10.0.128.0/17");
        let text = format!("{:?}", d.0);
        assert!(text.contains("10.0.0.0/16") && text.contains("10.0.128.0/17"), "{text}");
        assert!(overlap_check("10.0.0.0/16", "10.1.0.0/16").0.is_empty());
    }
}

#[cfg(test)]
mod model_tests {
    use super::*;
    use tfplugin::model::{fields_outside_schema, schema_mismatches};

    #[test]
    fn the_model_reads_the_schema_and_the_configuration_view_only_its_attributes() {
        let block = schema().block;
        assert_eq!(schema_mismatches::<PeeringModel>(&block), Vec::<String>::new());
        assert_eq!(fields_outside_schema::<PeeringConfig>(&block), Vec::<String>::new());
        assert_eq!(fields_outside_schema::<Shown>(&block), Vec::<String>::new());
    }
}
