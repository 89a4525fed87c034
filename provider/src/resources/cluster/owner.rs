//! Who a cluster name belongs to in an account and region: the Terraform state a create
//! returned the cluster to (`desired_state::owner_param`). A second create of that name is
//! refused before anything is made, naming the import that brings the cluster under the new
//! configuration instead. A create killed before it returned leaves no owner, so its rerun
//! adopts what the killed run had made.

use crate::clients::Clients;
use crate::desired_state::{self, OwnerDoc};
use crate::resources::aws_diag;
use tfplugin::{AttributePath, Diagnostic, Diagnostics};

/// Refuses to create a cluster whose name another state owns; changes nothing.
pub(super) async fn refuse_taken(clients: &Clients, name: &str) -> Result<(), Diagnostics> {
    let owner = clients
        .ssm
        .get(&desired_state::owner_param(name))
        .await
        .map_err(|e| aws_diag("Cannot check whether the cluster name is taken", &e))?;
    let Some(owner) = owner else {
        return Ok(());
    };
    let place = match serde_json::from_str::<OwnerDoc>(&owner.value) {
        Ok(doc) => format!(" (VPC {}, subnet {})", doc.vpc_id, doc.subnet_id),
        Err(_) => String::new(),
    };
    Err(Diagnostic::error(
        format!("A cluster named {name:?} already exists in {}", clients.aws.region),
        format!(
            "It belongs to another Terraform state{place}; nothing was changed. Choose another `name`, \
             or manage that cluster from this configuration by importing it: \
             `terraform import <address of this hpc_cluster> {name}`, or an `import` block with `id = \"{name}\"`."
        ),
    )
    .at(AttributePath::root("name"))
    .into())
}

/// Records that the cluster belongs to the state this apply returns it to, unless it already
/// does. A failure is a warning: the cluster stands, and the next apply records it.
pub(super) async fn claim(clients: &Clients, name: &str, owner: &OwnerDoc, tags: &[(String, String)]) -> Diagnostics {
    let param = desired_state::owner_param(name);
    let recorded = async {
        if clients.ssm.get(&param).await?.is_none() {
            let doc = serde_json::to_string(owner).unwrap_or_default();
            clients.ssm.put(&param, &doc, tags).await?;
        }
        Ok::<(), hpc_aws::AwsError>(())
    };
    match recorded.await {
        Ok(()) => Diagnostics::new(),
        Err(e) => Diagnostic::warning(
            "Cannot record that this state owns the cluster",
            format!(
                "{e}. Until an apply records it, a create of the name {name:?} from another configuration \
                 is not refused."
            ),
        )
        .into(),
    }
}
