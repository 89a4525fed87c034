//! Which Slurm upgrades a running cluster can take (Slurm's upgrade guide): daemons read the
//! state files, RPCs and database records of the previous two major releases, and from 24.11
//! on the previous three. Nothing reads a newer release's state: there is no downgrade.

use crate::error::ModelError;

/// Slurm's major releases, oldest first.
pub const MAJOR_RELEASES: &[&str] = &[
    "20.02", "20.11", "21.08", "22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11", "26.05",
];

/// How many releases back `to` accepts state from.
fn window(to: usize) -> usize {
    let since = MAJOR_RELEASES.iter().position(|r| *r == "24.11").unwrap_or(usize::MAX);
    if to >= since {
        3
    } else {
        2
    }
}

/// The release series (`22.05`) of a Slurm version (`22.05.8`, `22.05.8-4+deb12u3`, `24.11`).
pub fn release_series(version: &str) -> Option<String> {
    let mut parts = version.trim().split(['.', '-', '+']);
    let (major, minor) = (parts.next()?, parts.next()?);
    let numeric = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
    (numeric(major) && numeric(minor)).then(|| format!("{major}.{minor}"))
}

/// Whether a cluster running `from` can be upgraded to `to` in place; the error names the
/// releases in between and a path Slurm supports.
pub fn check_upgrade(from: &str, to: &str) -> Result<(), ModelError> {
    let at = |r: &str| MAJOR_RELEASES.iter().position(|x| *x == r);
    let (Some(from), Some(to)) = (release_series(from), release_series(to)) else {
        return Ok(()); // Unreadable versions are the version check's to name.
    };
    let (Some(i), Some(j)) = (at(&from), at(&to)) else {
        return Ok(()); // So are unknown releases.
    };
    if j < i {
        return Err(ModelError::new(
            ["cluster", "version"],
            format!("Slurm cannot go back from {from} to {to}"),
            format!(
                "The cluster's saved state and accounting database were written by Slurm {from}; Slurm {to} \
                 cannot read them. Keep slurm.version = \"{from}\" (or build a new cluster)."
            ),
        ));
    }
    if j - i <= window(j) {
        return Ok(());
    }
    let between = MAJOR_RELEASES[i + 1..j].join(", ");
    let mut path = vec![from.clone()];
    let mut k = i;
    while j - k > window(j) {
        // The farthest release that still reads k's state.
        k = (k + 1..j).rev().find(|&n| n - k <= window(n)).unwrap_or(k + 1);
        path.push(MAJOR_RELEASES[k].to_string());
    }
    path.push(to.clone());
    Err(ModelError::new(
        ["cluster", "version"],
        format!("Slurm {from} cannot be upgraded to {to} in one step"),
        format!(
            "Slurm {to} reads the state of the previous {} major releases only, and {between} come between. \
             Upgrade through {} (one apply with each release's images), or build a new cluster on {to}.",
            window(j),
            path.join(" → ")
        ),
    ))
}

/// How a node image's Slurm release stands against the release its cluster's controller runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeRelease {
    /// The same release series.
    Same,
    /// An older release the controller still talks to: an image not upgraded yet, as Slurm's
    /// order has it (slurmdbd, slurmctld, then the nodes).
    Older,
    /// A newer release within Slurm's window: its daemons work once the controller is upgraded
    /// to it (never before: an older slurmctld does not take a newer slurmd).
    Newer,
    /// Too far apart, or a release this crate does not know.
    Unfit,
}

/// Where a node image's release `node` stands against the controller's release `controller`.
pub fn node_release(node: &str, controller: &str) -> NodeRelease {
    let at = |r: &str| MAJOR_RELEASES.iter().position(|x| *x == r);
    let (Some(n), Some(c)) = (release_series(node), release_series(controller)) else {
        return NodeRelease::Unfit;
    };
    if n == c {
        return NodeRelease::Same;
    }
    match (at(&n), at(&c)) {
        (Some(i), Some(j)) if i < j && check_upgrade(&n, &c).is_ok() => NodeRelease::Older,
        (Some(i), Some(j)) if i > j && check_upgrade(&c, &n).is_ok() => NodeRelease::Newer,
        _ => NodeRelease::Unfit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_releases_back_and_three_from_24_11() {
        assert!(check_upgrade("22.05", "23.11").is_ok());
        assert!(check_upgrade("22.05.8", "22.05.11").is_ok());
        assert!(check_upgrade("24.05", "25.05").is_ok());
        assert!(check_upgrade("23.02", "24.11").is_ok());
        assert!(check_upgrade("24.11", "26.05").is_ok());
        assert!(check_upgrade("24.05", "26.05").is_err());
        assert!(check_upgrade("22.05", "24.05").is_err());
    }

    #[test]
    fn a_long_jump_names_the_releases_between_and_a_path() {
        let e = check_upgrade("22.05", "24.11").expect_err("four releases");
        assert!(e.detail.contains("23.02, 23.11, 24.05 come between"), "{}", e.detail);
        assert!(e.detail.contains("22.05 → 23.11 → 24.11"), "{}", e.detail);
        let e = check_upgrade("20.11", "25.11").expect_err("far");
        assert!(e.detail.contains("20.11 → 22.05 → 23.11"), "{}", e.detail);
    }

    #[test]
    fn the_release_series_is_read_from_any_version_form() {
        assert_eq!(release_series("22.05.8-4+deb12u3").as_deref(), Some("22.05"));
        assert_eq!(release_series("24.11.1").as_deref(), Some("24.11"));
        assert_eq!(release_series("25.05"), Some("25.05".into()));
        for bad in ["", "22", "x.y", "22.", ".05"] {
            assert_eq!(release_series(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_node_may_lag_its_controller_within_the_window_and_never_lead_it() {
        assert_eq!(node_release("24.11.5", "24.11"), NodeRelease::Same);
        assert_eq!(node_release("24.11.5", "26.05"), NodeRelease::Older);
        assert_eq!(node_release("26.05.5", "24.11"), NodeRelease::Newer);
        assert_eq!(node_release("22.05.8", "24.11"), NodeRelease::Unfit);
        assert_eq!(node_release("24.11", "22.05"), NodeRelease::Unfit);
        assert_eq!(node_release("27.05", "26.05"), NodeRelease::Unfit);
        assert_eq!(node_release("slurm", "26.05"), NodeRelease::Unfit);
    }

    #[test]
    fn no_downgrade() {
        let e = check_upgrade("24.11", "22.05").expect_err("down");
        assert!(e.summary.contains("cannot go back"));
    }
}
