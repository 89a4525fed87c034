//! Slurm host list expressions: written for numbered node names, and read back as Slurm hands
//! them to ResumeProgram and SuspendProgram (`gpu-p5-48xl-[1-3,7],cpu-c7i-2xl-4`).
//!
//! Node numbers are never zero-padded: `gpu-1` .. `gpu-16`, written `gpu-[1-16]`.
//! Padding would rename every node when a node set grows past a power of ten
//! (`gpu-9` becoming `gpu-09`), which would orphan running instances and their jobs.

/// The host list of nodes `<prefix>-<first>` ..= `<prefix>-<last>`.
///
/// `hostlist("gpu-p1-p548xl", 1, 16)` is `gpu-p1-p548xl-[1-16]`; a single node is written
/// without brackets: `hostlist("x", 1, 1)` is `x-1`. If `first > last` the bounds are
/// swapped.
pub fn hostlist(prefix: &str, first: u32, last: u32) -> String {
    let (lo, hi) = if first <= last { (first, last) } else { (last, first) };
    if lo == hi {
        format!("{prefix}-{lo}")
    } else {
        format!("{prefix}-[{lo}-{hi}]")
    }
}

/// The name of node `n` of a node set: `<prefix>-<n>`.
pub fn node_name(prefix: &str, n: u32) -> String {
    format!("{prefix}-{n}")
}

/// Number of decimal digits of `n` (at least 1).
pub(crate) fn digits(n: u32) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Expands a host list into node names, in order. Ranges may be zero-padded (`[01-10]`).
pub fn expand_hostlist(list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for item in split_top(list)? {
        match (item.find('['), item.rfind(']')) {
            (None, None) => out.push(item.to_string()),
            (Some(open), Some(close)) if close > open && close == item.len() - 1 => {
                let prefix = &item[..open];
                for part in item[open + 1..close].split(',') {
                    let (lo, hi) = part.split_once('-').unwrap_or((part, part));
                    let width = lo.len();
                    let (a, b): (u64, u64) = match (lo.parse(), hi.parse()) {
                        (Ok(a), Ok(b)) if a <= b => (a, b),
                        _ => return Err(format!("{item:?}: bad range {part:?}")),
                    };
                    if b - a > 100_000 {
                        return Err(format!("{item:?}: range {part:?} is too large"));
                    }
                    for n in a..=b {
                        out.push(format!("{prefix}{n:0width$}"));
                    }
                }
            }
            _ => return Err(format!("{item:?} is not a host list")),
        }
    }
    Ok(out)
}

/// Splits at commas outside brackets.
fn split_top(list: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(format!("{list:?}: unbalanced brackets"));
        }
    }
    if depth != 0 {
        return Err(format!("{list:?}: unbalanced brackets"));
    }
    parts.push(&list[start..]);
    Ok(parts.into_iter().map(str::trim).filter(|p| !p.is_empty()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_uses_brackets() {
        assert_eq!(hostlist("gpu-p1-p548xl", 1, 16), "gpu-p1-p548xl-[1-16]");
    }

    #[test]
    fn single_node_has_no_brackets() {
        assert_eq!(hostlist("x", 1, 1), "x-1");
        assert_eq!(hostlist("x", 7, 7), "x-7");
    }

    #[test]
    fn numbers_are_not_padded_across_powers_of_ten() {
        assert_eq!(hostlist("c", 9, 10), "c-[9-10]");
        assert_eq!(hostlist("c", 1, 4096), "c-[1-4096]");
        assert_eq!(node_name("c", 9), "c-9");
    }

    #[test]
    fn reversed_bounds_are_swapped() {
        assert_eq!(hostlist("c", 5, 2), "c-[2-5]");
    }

    #[test]
    fn large_ranges_stay_one_expression() {
        assert_eq!(hostlist("cpu", 3, u32::MAX), format!("cpu-[3-{}]", u32::MAX));
    }

    #[test]
    fn digit_counts() {
        assert_eq!(digits(0), 1);
        assert_eq!(digits(9), 1);
        assert_eq!(digits(10), 2);
        assert_eq!(digits(4096), 4);
        assert_eq!(digits(u32::MAX), 10);
    }

    #[test]
    fn expands_what_slurm_sends() {
        assert_eq!(expand_hostlist("a-1").as_deref(), Ok(&["a-1".to_string()][..]));
        assert_eq!(
            expand_hostlist("gpu-[1-3,7],cpu-4").unwrap_or_default(),
            vec!["gpu-1", "gpu-2", "gpu-3", "gpu-7", "cpu-4"]
        );
        assert_eq!(
            expand_hostlist("n[08-10]").unwrap_or_default(),
            vec!["n08", "n09", "n10"]
        );
        for bad in ["a-[1-", "a-[3-1]", "a-]1[", "a-[x]"] {
            assert!(expand_hostlist(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn round_trips_the_model_host_lists() {
        let list = hostlist("gpu-p5-48xl", 1, 16);
        assert_eq!(expand_hostlist(&list).map(|v| v.len()), Ok(16));
    }
}
