//! Slurm host list expressions for numbered node names.
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
}
