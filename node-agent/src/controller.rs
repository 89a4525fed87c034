//! Which slurmctld is in charge. A cluster with a backup controller runs the agent's units on
//! both controllers; only the one in charge acts (the sweep, the events reader, the eviction
//! pass, the status report), as only it schedules. Slurm's own rule decides: the first
//! `SlurmctldHost` that answers is in charge (a backup stands by while the one before it is up,
//! and hands back when it returns).

use std::path::Path;
use std::process::Command;

/// Where slurm.conf is on the controllers.
const SLURM_CONF: &str = "/etc/slurm/slurm.conf";
/// When this controller last asked slurmctld to save its TRES (see [`save_tres_for_backup`]).
const TRES_ASKED: &str = "/run/hpc-node/tres-asked";
/// How long after asking it asks again while the TRES are still missing.
const TRES_ASK_AGAIN: std::time::Duration = std::time::Duration::from_secs(600);

/// The controllers `scontrol ping` lists (`Slurmctld(primary) at head is UP`), in
/// `SlurmctldHost` order, and whether each answered.
pub fn parse_ping(text: &str) -> Vec<(String, bool)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("Slurmctld(")?;
            let (_, rest) = rest.split_once(") at ")?;
            let (host, state) = rest.rsplit_once(" is ")?;
            Some((host.trim().to_string(), state.trim().starts_with("UP")))
        })
        .collect()
}

/// Whether `host` is in charge among `listed`: the first that answers; the first listed when
/// none does (a head starting its controller reports and configures before it answers).
pub fn in_charge_of(listed: &[(String, bool)], host: &str) -> bool {
    let first_up = listed.iter().find(|(_, up)| *up).or(listed.first());
    first_up.is_some_and(|(h, _)| h == host)
}

/// The number of `SlurmctldHost` lines of a slurm.conf.
pub fn controllers_in(conf: &str) -> usize {
    conf.lines()
        .filter(|l| l.trim_start().starts_with("SlurmctldHost="))
        .count()
}

/// Whether this controller should act now. A cluster with one controller (or whose slurm.conf
/// is not written yet) has nothing to decide: its head acts, as before backups existed.
pub fn in_charge() -> bool {
    let conf = std::fs::read_to_string(SLURM_CONF).unwrap_or_default();
    if controllers_in(&conf) < 2 {
        return true;
    }
    let Ok(host) = crate::host::short_hostname() else {
        return false;
    };
    match Command::new("scontrol").arg("ping").output() {
        // scontrol exits non-zero when a controller is down; the listing is still whole.
        Ok(out) => in_charge_of(&parse_ping(&String::from_utf8_lossy(&out.stdout)), &host),
        Err(e) => {
            crate::host::log("controller", &format!("cannot run scontrol ping: {e}"));
            false
        }
    }
}

/// The value of `key` in a slurm.conf (the first line setting it).
fn conf_value<'a>(conf: &'a str, key: &str) -> Option<&'a str> {
    conf.lines()
        .find_map(|l| l.trim_start().strip_prefix(key)?.strip_prefix('='))
        .map(str::trim)
}

/// Whether a backup controller of this slurm.conf can take over with slurmdbd away only once
/// slurmctld has saved its TRES: with accounting, a backup that finds no `last_tres` in the
/// shared StateSaveLocation stops at once ("we have no TRES"), and slurmctld first saves them
/// minutes after it starts (`dump_assoc_mgr_state`, from 22.05 to 26.05).
pub fn tres_missing(conf: &str) -> Option<String> {
    let accounting = conf_value(conf, "AccountingStorageType") == Some("accounting_storage/slurmdbd");
    if controllers_in(conf) < 2 || !accounting {
        return None;
    }
    let dir = conf_value(conf, "StateSaveLocation").unwrap_or("/var/spool/slurmctld");
    let file = Path::new(dir).join("last_tres");
    (!file.exists()).then(|| file.display().to_string())
}

/// On the controller in charge (the reconcile unit's passes): when the saved TRES are missing,
/// a reconfigure saves them now, not minutes later (at most every ten minutes while they stay
/// missing; Slurm saves them on its own from then on).
pub fn save_tres_for_backup() {
    let conf = std::fs::read_to_string(SLURM_CONF).unwrap_or_default();
    let Some(file) = tres_missing(&conf) else {
        return;
    };
    let asked_recently = std::fs::metadata(TRES_ASKED)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < TRES_ASK_AGAIN);
    if asked_recently || !in_charge() {
        return;
    }
    crate::host::log(
        "controller",
        &format!("{file} is missing: a reconfigure saves it, for the backup controller to take over with"),
    );
    if crate::cmd::scontrol(&["reconfigure".to_string()]) {
        let _ = std::fs::create_dir_all("/run/hpc-node");
        let _ = std::fs::write(TRES_ASKED, b"");
    }
}

/// Whether this controller stands by (the other is in charge): it leaves the work to it.
pub fn standing_by(what: &str) -> bool {
    let by = !in_charge();
    if by {
        crate::host::log(what, "the other controller is in charge: nothing to do here");
    }
    by
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH_UP: &str = "Slurmctld(primary) at ip-10-0-0-5 is UP\nSlurmctld(backup) at slurmctld-backup is UP\n";
    const HEAD_DOWN: &str = "Slurmctld(primary) at ip-10-0-0-5 is DOWN\nSlurmctld(backup) at slurmctld-backup is UP\n";

    #[test]
    fn the_first_controller_that_answers_is_in_charge() {
        let both = parse_ping(BOTH_UP);
        assert_eq!(
            both,
            [
                ("ip-10-0-0-5".to_string(), true),
                ("slurmctld-backup".to_string(), true)
            ]
        );
        assert!(in_charge_of(&both, "ip-10-0-0-5"));
        assert!(!in_charge_of(&both, "slurmctld-backup"));
        let failed_over = parse_ping(HEAD_DOWN);
        assert!(!in_charge_of(&failed_over, "ip-10-0-0-5"));
        assert!(in_charge_of(&failed_over, "slurmctld-backup"));
    }

    #[test]
    fn with_no_controller_answering_the_primary_acts_and_nothing_listed_means_no_one() {
        let none = parse_ping(&BOTH_UP.replace("UP", "DOWN"));
        assert!(in_charge_of(&none, "ip-10-0-0-5"));
        assert!(!in_charge_of(&none, "slurmctld-backup"));
        assert!(!in_charge_of(
            &parse_ping("scontrol: error: no configuration\n"),
            "ip-10-0-0-5"
        ));
    }

    #[test]
    fn saved_tres_matter_only_with_a_backup_and_accounting() {
        let dir = std::env::temp_dir().join(format!("hpc-node-tres-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let conf = format!(
            "SlurmctldHost=a(10.0.0.5)\nSlurmctldHost=slurmctld-backup(10.0.0.6)\n\
             AccountingStorageType=accounting_storage/slurmdbd\nStateSaveLocation={}\n",
            dir.display()
        );
        assert_eq!(tres_missing(&conf), Some(dir.join("last_tres").display().to_string()));
        std::fs::write(dir.join("last_tres"), b"").expect("write");
        assert_eq!(tres_missing(&conf), None);
        std::fs::remove_file(dir.join("last_tres")).expect("remove");
        let one = conf.replace("SlurmctldHost=slurmctld-backup(10.0.0.6)\n", "");
        assert_eq!(tres_missing(&one), None);
        let none = conf.replace("accounting_storage/slurmdbd", "accounting_storage/none");
        assert_eq!(tres_missing(&none), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn controllers_are_counted_from_slurm_conf() {
        assert_eq!(controllers_in("ClusterName=c\nSlurmctldHost=head(10.0.0.5)\n"), 1);
        assert_eq!(
            controllers_in("SlurmctldHost=head(10.0.0.5)\nSlurmctldHost=slurmctld-backup(10.0.0.6)\n"),
            2
        );
    }
}
