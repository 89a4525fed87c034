//! Writing `Key=Value` text the way Slurm's config parser reads it.

/// A value as written after `Key=`: trimmed, and in double quotes when it contains
/// whitespace (Slurm's parser reads `Key="a b"` as one value). Validation rejects
/// values that cannot be written safely (quotes, `#`, `\`, line breaks).
pub(crate) fn conf_value(value: &str) -> String {
    let v = value.trim();
    if v.chars().any(char::is_whitespace) {
        format!("\"{v}\"")
    } else {
        v.to_string()
    }
}

/// Why a free-form value cannot be written into a Slurm config file, if it cannot.
pub(crate) fn unsafe_value(value: &str) -> Option<&'static str> {
    let v = value.trim();
    if v.is_empty() {
        Some("the value is empty")
    } else if v.contains(['\n', '\r']) {
        Some("the value contains a line break")
    } else if v.contains('#') {
        Some("the value contains '#', which starts a comment in Slurm config files")
    } else if v.contains('"') {
        Some("the value contains a double quote")
    } else if v.contains('\\') {
        Some("the value contains a backslash, which Slurm's parser treats as an escape")
    } else if v.chars().any(|c| c.is_control()) {
        Some("the value contains a control character")
    } else {
        None
    }
}

/// Appends ` Key=Value` (or `Key=Value` at the start of a line).
pub(crate) fn push_kv(line: &mut String, key: &str, value: &str) {
    if !line.is_empty() {
        line.push(' ');
    }
    line.push_str(key);
    line.push('=');
    line.push_str(&conf_value(value));
}

/// Appends items to a comma-separated list, skipping empty items and items already
/// present (compared case-insensitively, as Slurm does for option lists).
pub(crate) fn merge_list(list: &mut Vec<String>, items: &str) {
    for item in items.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        if !list.iter().any(|have| have.eq_ignore_ascii_case(item)) {
            list.push(item.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_with_spaces_are_quoted() {
        assert_eq!(conf_value(" --pty $SHELL "), "\"--pty $SHELL\"");
        assert_eq!(conf_value("bf_continue"), "bf_continue");
    }

    #[test]
    fn unsafe_values_are_named() {
        assert!(unsafe_value("a#b").is_some());
        assert!(unsafe_value("a\nb").is_some());
        assert!(unsafe_value("say \"hi\"").is_some());
        assert!(unsafe_value("c:\\x").is_some());
        assert!(unsafe_value("  ").is_some());
        assert!(unsafe_value("bf_continue,bf_max_job_test=1000").is_none());
    }

    #[test]
    fn merged_lists_keep_order_and_drop_duplicates() {
        let mut l = vec!["idle_on_node_suspend".to_string()];
        merge_list(&mut l, "enable_configless, IDLE_ON_NODE_SUSPEND,,power_save_interval=5");
        assert_eq!(
            l,
            ["idle_on_node_suspend", "enable_configless", "power_save_interval=5"]
        );
    }
}
