//! Plan-time checks of values several resources share: each names the attribute and what to
//! write instead, so a value AWS or the nodes would refuse later is refused before anything is
//! made. Every function takes the value it checks once known (None: unset or not known yet,
//! nothing to check) and the attribute's path.

use std::collections::BTreeMap;

use tfplugin::{AttributePath, Diagnostics};

/// EBS limits for a root volume: 8 GiB is the smallest a Debian image boots from, 16 TiB the
/// largest gp2/gp3 volume.
pub(crate) const ROOT_VOLUME_GIB: std::ops::RangeInclusive<i64> = 8..=16384;
/// Tags a user may set on one resource: EC2 allows 50, and the provider adds its own
/// (`hpcforge:*`, `Name`) and the provider's `default_tags`.
pub(crate) const MAX_USER_TAGS: usize = 40;
/// EC2 refuses user data over 16 KiB; the boot script hpcforge writes takes about 1 KiB.
pub(crate) const MAX_USER_DATA_EXTRA: usize = 12 * 1024;

pub(crate) fn root_volume_size(size: Option<i64>, at: AttributePath, diags: &mut Diagnostics) {
    if let Some(size) = size {
        if !ROOT_VOLUME_GIB.contains(&size) {
            diags.error_at(
                at,
                format!("a root volume of {size} GiB is not possible"),
                format!(
                    "Use {} to {} GiB (and at least the image's own size, 30 GiB for hpc-image's templates).",
                    ROOT_VOLUME_GIB.start(),
                    ROOT_VOLUME_GIB.end()
                ),
            );
        }
    }
}

/// `arn:<partition>:iam::<account>:instance-profile/<path/name>`; a role's ARN (the usual
/// mistake) is named as such.
pub(crate) fn instance_profile_arn(arn: Option<&str>, at: AttributePath, diags: &mut Diagnostics) {
    let Some(arn) = arn else { return };
    if is_iam_arn(arn, "instance-profile") {
        return;
    }
    let detail = if arn.contains(":role/") {
        "This is a role's ARN: give the ARN of the instance profile that holds it (aws_iam_instance_profile.<name>.arn)."
    } else {
        "Use an ARN like arn:aws:iam::111122223333:instance-profile/hpc-nodes."
    };
    diags.error_at(at, refused_arn(arn, "an instance profile"), detail);
}

/// Whether `arn` holds a wildcard of IAM's (`*`, `?`): many resources where one is meant, which
/// would reach the node policy as a grant on all of them.
pub(crate) fn is_wildcard(arn: &str) -> bool {
    arn.contains(['*', '?'])
}

/// The error for an ARN refused where `one` is meant (`"an IAM role"`): a wildcard is named as
/// such.
pub(crate) fn refused_arn(arn: &str, one: &str) -> String {
    if is_wildcard(arn) {
        format!("{arn:?} is a wildcard where {one} is meant")
    } else {
        format!("{arn:?} is not {one} ARN")
    }
}

/// `arn:<partition>:iam::<12-digit account>:<kind>/<path and name>`, e.g. kind `role`; no
/// wildcard.
pub(crate) fn is_iam_arn(arn: &str, kind: &str) -> bool {
    if is_wildcard(arn) {
        return false;
    }
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    matches!(parts.as_slice(), ["arn", partition, "iam", "", account, resource]
        if partition.starts_with("aws")
            && account.len() == 12
            && account.chars().all(|c| c.is_ascii_digit())
            && resource.strip_prefix(kind).and_then(|r| r.strip_prefix('/')).is_some_and(|n| !n.is_empty()))
}

/// The region of a Secrets Manager secret's ARN
/// (`arn:<partition>:secretsmanager:<region>:<12-digit account>:secret:<name>`), or None when
/// `arn` is not one (a wildcard is not).
pub(crate) fn secret_arn_region(arn: &str) -> Option<&str> {
    if is_wildcard(arn) {
        return None;
    }
    let parts: Vec<&str> = arn.splitn(7, ':').collect();
    match parts.as_slice() {
        ["arn", partition, "secretsmanager", region, account, "secret", name]
            if partition.starts_with("aws")
                && !region.is_empty()
                && account.len() == 12
                && account.chars().all(|c| c.is_ascii_digit())
                && !name.is_empty() =>
        {
            Some(region)
        }
        _ => None,
    }
}

/// Keys AWS or hpcforge own, lengths past EC2's limits, and too many tags.
pub(crate) fn tags(tags: Option<&BTreeMap<String, String>>, at: AttributePath, diags: &mut Diagnostics) {
    let Some(tags) = tags else { return };
    if tags.len() > MAX_USER_TAGS {
        diags.error_at(
            at.clone(),
            format!("{} tags are too many", tags.len()),
            format!("Use at most {MAX_USER_TAGS}: EC2 allows 50 per resource and hpcforge adds its own."),
        );
    }
    for (key, value) in tags {
        let here = at.clone().key(key);
        let lower = key.to_ascii_lowercase();
        if lower.starts_with("aws:") || lower.starts_with("hpcforge:") {
            diags.error_at(
                here,
                format!("the tag key {key:?} is reserved"),
                "Keys starting with aws: belong to AWS and hpcforge: to hpcforge (it sets them itself); choose another key.",
            );
        } else if key.is_empty() || key.chars().count() > 128 {
            diags.error_at(
                here,
                format!("the tag key {key:?} has {} characters", key.chars().count()),
                "A tag key has 1 to 128 characters.",
            );
        } else if value.chars().count() > 256 {
            diags.error_at(
                here,
                format!("the value of tag {key:?} has {} characters", value.chars().count()),
                "A tag value has at most 256 characters.",
            );
        }
    }
}

/// What is added to the nodes' boot script must leave the user data under EC2's 16 KiB.
pub(crate) fn user_data_extra(extra: Option<&str>, at: AttributePath, diags: &mut Diagnostics) {
    if let Some(extra) = extra {
        if extra.len() > MAX_USER_DATA_EXTRA {
            diags.error_at(
                at,
                format!("user_data_extra has {} bytes", extra.len()),
                format!(
                    "EC2 takes at most 16 KiB of user data and the boot script needs about 1 KiB: keep it under \
                     {MAX_USER_DATA_EXTRA} bytes, or have it fetch a longer script (from S3, say)."
                ),
            );
        }
    }
}

/// A duration of at least `min_s` seconds (`parsed`: the value in seconds, when it parsed).
pub(crate) fn duration_at_least(
    parsed: Option<u64>,
    min_s: u64,
    at: AttributePath,
    why: &str,
    diags: &mut Diagnostics,
) {
    if let Some(s) = parsed {
        if s < min_s {
            diags.error_at(
                at,
                format!("{s}s is too short"),
                format!("Use at least {min_s}s: {why}"),
            );
        }
    }
}

/// A whole number not below zero (Slurm counts and tiers).
pub(crate) fn not_negative(n: Option<i64>, at: AttributePath, diags: &mut Diagnostics) {
    if let Some(n) = n {
        if n < 0 {
            diags.error_at(at, format!("{n} is negative"), "Use 0 or more.");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(check: impl Fn(&mut Diagnostics)) -> usize {
        let mut d = Diagnostics::new();
        check(&mut d);
        d.0.len()
    }

    #[test]
    fn instance_profiles_and_not_roles() {
        let at = || AttributePath::root("instance_profile_arn");
        let ok = "arn:aws:iam::111122223333:instance-profile/hpc-nodes";
        assert_eq!(errors(|d| instance_profile_arn(Some(ok), at(), d)), 0);
        for bad in [
            "arn:aws:iam::111122223333:role/hpc-nodes",
            "hpc-nodes",
            "arn:aws:iam::1:instance-profile/x",
        ] {
            assert_eq!(errors(|d| instance_profile_arn(Some(bad), at(), d)), 1, "{bad}");
        }
    }

    #[test]
    fn reserved_long_and_many_tags_are_refused() {
        let at = || AttributePath::root("tags");
        let map = |kv: Vec<(String, String)>| kv.into_iter().collect::<BTreeMap<_, _>>();
        assert_eq!(
            errors(|d| tags(Some(&map(vec![("team".into(), "hpc".into())])), at(), d)),
            0
        );
        for key in ["aws:cloudformation", "hpcforge:cluster", "HPCFORGE:x"] {
            assert_eq!(
                errors(|d| tags(Some(&map(vec![(key.into(), "v".into())])), at(), d)),
                1,
                "{key}"
            );
        }
        assert_eq!(
            errors(|d| tags(Some(&map(vec![("k".repeat(129), "v".into())])), at(), d)),
            1
        );
        assert_eq!(
            errors(|d| tags(Some(&map(vec![("k".into(), "v".repeat(257))])), at(), d)),
            1
        );
        let many: Vec<(String, String)> = (0..41).map(|i| (format!("k{i}"), "v".into())).collect();
        assert_eq!(errors(|d| tags(Some(&map(many.clone())), at(), d)), 1);
    }

    #[test]
    fn sizes_and_numbers() {
        let at = || AttributePath::root("x");
        assert_eq!(errors(|d| root_volume_size(Some(7), at(), d)), 1);
        assert_eq!(errors(|d| root_volume_size(Some(100), at(), d)), 0);
        assert_eq!(errors(|d| root_volume_size(Some(16385), at(), d)), 1);
        assert_eq!(errors(|d| not_negative(Some(-1), at(), d)), 1);
        assert_eq!(errors(|d| user_data_extra(Some(&"x".repeat(13 * 1024)), at(), d)), 1);
        assert_eq!(errors(|d| duration_at_least(Some(5), 60, at(), "why", d)), 1);
        assert_eq!(errors(|d| duration_at_least(Some(60), 60, at(), "why", d)), 0);
    }
}
