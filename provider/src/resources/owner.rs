//! Who a cluster or partition name belongs to in an account and region: the Terraform state a
//! create returned it to (`desired_state::owner_param`, `partition_owner_param`). A second
//! create of that name is refused before anything is made, naming the import that brings the
//! existing one under the new configuration instead. A create killed before it returned leaves
//! no owner, so its rerun adopts what the killed run had made.

use crate::clients::Clients;
use crate::resources::aws_diag;
use tfplugin::{ApplyOutcome, AttributePath, Diagnostic, Diagnostics};

/// A name that may be owned: where its owner is recorded and how to talk about it.
pub(crate) struct Name {
    /// The owner's parameter.
    pub param: String,
    /// The published document whose presence says the owned thing still exists: a create
    /// after it vanished out of band (Terraform then plans one) takes the name back.
    pub document: String,
    /// What it names, for messages: `cluster named "research"`.
    pub what: String,
    /// The resource type and import id that take it over: `hpc_cluster`, `research`.
    pub resource: &'static str,
    pub import_id: String,
}

/// Refuses to create what another state owns and is still published; changes nothing. `place`
/// describes the owner's recorded value (empty when there is nothing to add).
pub(crate) async fn refuse_taken(
    clients: &Clients,
    name: &Name,
    place: impl Fn(&str) -> String,
) -> Result<(), Diagnostics> {
    let owner = clients
        .ssm
        .get(&name.param)
        .await
        .map_err(|e| aws_diag(&format!("Cannot check whether the {} is taken", name.what), &e))?;
    let Some(owner) = owner else {
        return Ok(());
    };
    let exists = clients
        .ssm
        .get(&name.document)
        .await
        .map_err(|e| aws_diag(&format!("Cannot check whether the {} is taken", name.what), &e))?;
    if exists.is_none() {
        return Ok(());
    }
    let (what, id, resource) = (&name.what, &name.import_id, name.resource);
    Err(Diagnostic::error(
        format!("A {what} already exists in {}", clients.aws.region),
        format!(
            "It belongs to another Terraform state{}; nothing was changed. Choose another `name`, or manage \
             it from this configuration by importing it: `terraform import <address of this {resource}> {id}`, \
             or an `import` block with `id = \"{id}\"`.",
            place(&owner.value)
        ),
    )
    .at(AttributePath::root("name"))
    .into())
}

/// `outcome`, with the name recorded as this state's when the outcome returns something to
/// Terraform (a tainted create included).
pub(crate) async fn claimed(
    clients: &Clients,
    name: &Name,
    value: &str,
    tags: &[(String, String)],
    mut outcome: ApplyOutcome,
) -> ApplyOutcome {
    if !outcome.state.is_null() {
        outcome.diagnostics.extend(claim(clients, name, value, tags).await);
    }
    outcome
}

/// Records that the name belongs to the state this apply returns it to, unless it already
/// does. A failure is a warning: what was made stands, and the next apply records it.
async fn claim(clients: &Clients, name: &Name, value: &str, tags: &[(String, String)]) -> Diagnostics {
    let recorded = async {
        if clients.ssm.get(&name.param).await?.is_none() {
            clients.ssm.put(&name.param, value, tags).await?;
        }
        Ok::<(), hpc_aws::AwsError>(())
    };
    match recorded.await {
        Ok(()) => Diagnostics::new(),
        Err(e) => Diagnostic::warning(
            format!("Cannot record that this state owns the {}", name.what),
            format!(
                "{e}. Until an apply records it, a create of the same name from another configuration is not refused."
            ),
        )
        .into(),
    }
}
