//! The instance metadata service for root and Slurm's user only, on every node.
//!
//! IMDS hands out the node role's credentials to any local process that asks. A user's shell on
//! a login node or their job on a compute node must not get them (ParallelCluster blocks IMDS
//! for other users with iptables the same way). What needs the role keeps it: the agent runs as
//! root, and Slurm's programs on the controllers (ResumeProgram, the sweep and events units) run
//! as Slurm's user. Packets of any other user to IMDS are refused, counted and logged by an
//! nftables table of our own, loaded by `hpc-node-imds.service` early on every later boot.

use std::path::Path;

use crate::error::{Context as _, Result};
use crate::host::{self as system, log, write_file};

/// The rules, loaded again by [`UNIT`] on every boot.
const RULES: &str = "/etc/hpcforge/imds.nft";
const UNIT: &str = "hpc-node-imds.service";
/// The table the rules live in, ours alone (other tables are left as they are).
const TABLE: &str = "inet hpcforge_imds";
/// The kernel log's prefix for a refused attempt.
const LOG_PREFIX: &str = "hpcforge-imds-refused: ";

/// IMDS over IPv4 and over IPv6 (Nitro instances).
const ADDRESSES: &[(&str, &str)] = &[("ip", "169.254.169.254"), ("ip6", "fd00:ec2::254")];

/// Loads the rules (replacing an earlier load whole) and enables their unit for later boots.
pub fn restrict(slurm_user: &str) -> Result<()> {
    // Every role's image has Slurm's user (its packages make it); one without runs no Slurm
    // program that could need the role.
    let allowed = match system::account(slurm_user) {
        Ok((uid, _)) => vec![0, uid],
        Err(e) => {
            log("imds", &format!("{e}: IMDS for root only"));
            vec![0]
        }
    };
    let rules = rules(&allowed);
    write_file(Path::new(RULES), rules.as_bytes(), 0o600, None)?;
    system::run("nft", &["-f", RULES]).context(|| "loading the IMDS rules (nftables)".to_string())?;
    // For later boots only: it is loaded now, so no reload of the manager is needed.
    system::systemctl(&["enable", "--no-reload", UNIT])?;
    log(
        "imds",
        &format!("the instance metadata service answers root and {slurm_user} only"),
    );
    Ok(())
}

/// The nftables script: our table made if missing, deleted, and made again in one transaction,
/// so loading it twice leaves one copy.
pub fn rules(allowed_uids: &[u32]) -> String {
    let uids = allowed_uids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    let mut chain = String::new();
    for (family, address) in ADDRESSES {
        chain.push_str(&format!(
            "\t\t{family} daddr {address} meta skuid {{ {uids} }} accept\n"
        ));
    }
    for (family, address) in ADDRESSES {
        chain.push_str(&format!(
            "\t\t{family} daddr {address} counter log prefix \"{LOG_PREFIX}\" reject with icmpx admin-prohibited\n"
        ));
    }
    format!(
        "# hpcforge: IMDS for root and Slurm's user only (written by hpc-node; loaded by {UNIT})\n\
         table {TABLE} {{}}\n\
         delete table {TABLE}\n\
         table {TABLE} {{\n\
         \tchain output {{\n\
         \t\ttype filter hook output priority filter; policy accept;\n\
         {chain}\
         \t}}\n\
         }}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_allowed_uids_reach_imds_over_either_address_and_the_rest_are_counted() {
        let rules = rules(&[0, 64030]);
        assert!(
            rules.contains("ip daddr 169.254.169.254 meta skuid { 0, 64030 } accept"),
            "{rules}"
        );
        assert!(
            rules.contains("ip6 daddr fd00:ec2::254 meta skuid { 0, 64030 } accept"),
            "{rules}"
        );
        let refusals = rules
            .lines()
            .filter(|l| l.contains("counter log") && l.contains("reject"))
            .count();
        assert_eq!(refusals, 2, "{rules}");
        // Loading twice replaces: the table is made, deleted and made again.
        let table = rules.find("delete table inet hpcforge_imds").expect("delete");
        assert!(rules[..table].contains("table inet hpcforge_imds {}"), "{rules}");
    }
}
