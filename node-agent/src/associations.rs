//! Slurm's accounting database follows the desired state: the cluster is registered, the
//! accounts and QOS that partitions name (`allow_accounts`, `allow_qos`) and the accounts each
//! user may charge (`accounts`, the first their default) exist, with the users' associations.
//!
//! Only additions: an account, QOS or association that leaves the desired state stays in the
//! database, since removing it would take its jobs' history with it (`sacctmgr` does that on
//! purpose, by hand).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use hpc_desired_state::{ClusterDoc, PartitionDoc};

/// What the database must hold for this cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    pub accounts: BTreeSet<String>,
    pub qos: BTreeSet<String>,
    /// user → accounts, the first the default.
    pub users: BTreeMap<String, Vec<String>>,
}

/// What the database holds for this cluster.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Existing {
    pub cluster: bool,
    pub accounts: BTreeSet<String>,
    pub qos: BTreeSet<String>,
    /// (user, account) associations.
    pub associations: BTreeSet<(String, String)>,
}

/// Names Slurm gives every partition list and database without being asked.
fn built_in(name: &str) -> bool {
    name.eq_ignore_ascii_case("ALL")
}

pub fn wanted(doc: &ClusterDoc, parts: &[PartitionDoc]) -> Wanted {
    let lower = |s: &String| s.to_ascii_lowercase();
    let mut accounts: BTreeSet<String> = parts
        .iter()
        .flat_map(|p| &p.slurm.allow_accounts)
        .filter(|a| !built_in(a))
        .map(lower)
        .collect();
    let mut users = BTreeMap::new();
    for u in doc.users.iter().filter(|u| !u.accounts.is_empty()) {
        let mine: Vec<String> = u.accounts.iter().map(lower).collect();
        accounts.extend(mine.iter().cloned());
        users.insert(u.name.clone(), mine);
    }
    Wanted {
        accounts,
        // Every database has the QOS `normal`.
        qos: parts
            .iter()
            .flat_map(|p| &p.slurm.allow_qos)
            .filter(|q| !built_in(q) && !q.eq_ignore_ascii_case("normal"))
            .map(lower)
            .collect(),
        users,
    }
}

/// The `sacctmgr -i` argument lists that take the database from `have` to `want`.
pub fn commands(cluster: &str, want: &Wanted, have: &Existing) -> Vec<Vec<String>> {
    let on_cluster = format!("Cluster={cluster}");
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut add = |words: &[&str]| out.push(words.iter().map(|w| w.to_string()).collect());
    if !have.cluster {
        add(&["add", "cluster", cluster]);
    }
    for a in want.accounts.difference(&have.accounts) {
        add(&["add", "account", a, &on_cluster]);
    }
    for q in want.qos.difference(&have.qos) {
        add(&["add", "qos", q]);
    }
    for (user, accounts) in &want.users {
        let missing: Vec<&str> = accounts
            .iter()
            .filter(|a| !have.associations.contains(&(user.clone(), a.to_string())))
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            continue;
        }
        let account = format!("Account={}", missing.join(","));
        let first_association = !have.associations.iter().any(|(u, _)| u == user);
        let default = format!("DefaultAccount={}", accounts[0]);
        let mut words = vec!["add", "user", user.as_str(), account.as_str(), on_cluster.as_str()];
        if first_association {
            words.push(default.as_str());
        }
        add(&words);
    }
    out
}

/// Parses `sacctmgr -n -P show assoc format=User,Account` lines.
fn parse_associations(text: &str, have: &mut Existing) {
    for line in text.lines() {
        let mut cols = line.split('|');
        let (Some(user), Some(account)) = (cols.next(), cols.next()) else {
            continue;
        };
        if account.is_empty() {
            continue;
        }
        if user.is_empty() {
            have.accounts.insert(account.to_string());
        } else {
            have.associations.insert((user.to_string(), account.to_string()));
        }
    }
}

fn sacctmgr(conf: &Path, args: &[String]) -> Result<String, String> {
    crate::host::slurm_client("sacctmgr", conf, args)
}

fn show(conf: &Path, words: &[&str]) -> Result<String, String> {
    let mut args = vec!["-n".to_string(), "-P".to_string(), "show".to_string()];
    args.extend(words.iter().map(|w| w.to_string()));
    sacctmgr(conf, &args)
}

/// Reads what the database has for `cluster` (through slurmdbd, as `conf` says where).
pub fn existing(cluster: &str, conf: &Path) -> Result<Existing, String> {
    let mut have = Existing {
        cluster: show(conf, &["cluster", "format=Cluster"])?
            .lines()
            .any(|l| l.trim() == cluster),
        qos: show(conf, &["qos", "format=Name"])?
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect(),
        ..Existing::default()
    };
    let cluster_filter = format!("cluster={cluster}");
    parse_associations(
        &show(conf, &["assoc", &cluster_filter, "format=User,Account"])?,
        &mut have,
    );
    Ok(have)
}

impl Wanted {
    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty() && self.qos.is_empty() && self.users.is_empty()
    }
}

/// The last set this process made hold: the reconcile loop runs every few seconds, and the
/// database needs asking again only when the desired state names something new.
static MADE: std::sync::Mutex<Option<Wanted>> = std::sync::Mutex::new(None);

/// Adds what is missing; returns the commands it ran (for the log). Asks nothing when nothing
/// is wanted (slurmctld registers its cluster itself) or when this process already made `want`
/// hold.
pub fn ensure(cluster: &str, conf: &Path, want: &Wanted) -> Result<Vec<String>, String> {
    let mut made = MADE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if want.is_empty() || made.as_ref() == Some(want) {
        return Ok(Vec::new());
    }
    let done = add_missing(cluster, conf, want)?;
    *made = Some(want.clone());
    Ok(done)
}

fn add_missing(cluster: &str, conf: &Path, want: &Wanted) -> Result<Vec<String>, String> {
    let have = existing(cluster, conf)?;
    let mut done = Vec::new();
    for words in commands(cluster, want, &have) {
        let mut args = vec!["-i".to_string()];
        args.extend(words.iter().cloned());
        if let Err(e) = sacctmgr(conf, &args) {
            // slurmctld registers its cluster on its first start, perhaps since the read.
            if commands(cluster, want, &existing(cluster, conf)?).contains(&words) {
                return Err(format!("accounting database: {e}"));
            }
        }
        done.push(words.join(" "));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpc_desired_state::UserDoc;

    fn user(name: &str, accounts: &[&str]) -> UserDoc {
        UserDoc {
            name: name.into(),
            uid: 2000,
            gid: 2000,
            ssh_public_keys: vec![],
            sudo: false,
            accounts: accounts.iter().map(|a| a.to_string()).collect(),
        }
    }

    fn words(cmds: &[Vec<String>]) -> Vec<String> {
        cmds.iter().map(|c| c.join(" ")).collect()
    }

    #[test]
    fn partitions_and_users_name_what_the_database_must_hold() {
        let doc = ClusterDoc {
            users: vec![user("ada", &["physics", "ML"]), user("bob", &[])],
            ..ClusterDoc::default()
        };
        let mut part = PartitionDoc {
            name: "gpu".into(),
            ..Default::default()
        };
        part.slurm.allow_accounts = vec!["chem".into(), "ALL".into()];
        part.slurm.allow_qos = vec!["normal".into(), "high".into()];
        let want = wanted(&doc, &[part]);
        assert_eq!(want.accounts, ["chem", "ml", "physics"].map(String::from).into());
        assert_eq!(want.qos, ["high"].map(String::from).into());
        assert_eq!(want.users.len(), 1, "bob charges no account: no association");
        assert_eq!(want.users["ada"], ["physics", "ml"]);
    }

    #[test]
    fn only_what_is_missing_is_added_and_the_default_only_with_the_first_association() {
        let want = Wanted {
            accounts: ["ml", "physics"].map(String::from).into(),
            qos: ["high"].map(String::from).into(),
            users: [("ada".to_string(), vec!["physics".to_string(), "ml".to_string()])].into(),
        };
        let empty = Existing::default();
        assert_eq!(
            words(&commands("alive", &want, &empty)),
            [
                "add cluster alive",
                "add account ml Cluster=alive",
                "add account physics Cluster=alive",
                "add qos high",
                "add user ada Account=physics,ml Cluster=alive DefaultAccount=physics",
            ]
        );
        let mut have = Existing {
            cluster: true,
            qos: ["normal", "high"].map(String::from).into(),
            ..Existing::default()
        };
        parse_associations("|root\nroot|root\n|physics\n|ml\nada|physics\n", &mut have);
        assert_eq!(
            words(&commands("alive", &want, &have)),
            ["add user ada Account=ml Cluster=alive"]
        );
        have.associations.insert(("ada".into(), "ml".into()));
        assert!(commands("alive", &want, &have).is_empty());
    }
}
