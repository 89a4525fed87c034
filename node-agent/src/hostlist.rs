//! Slurm host lists as Slurm hands them to ResumeProgram: `gpu-p5-48xl-[1-3,7],cpu-c7i-2xl-4`.

/// Expands a host list into node names, in order. Ranges may be zero-padded (`[01-10]`).
pub fn expand(list: &str) -> Result<Vec<String>, String> {
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
    fn expands_what_slurm_sends() {
        assert_eq!(expand("a-1").as_deref(), Ok(&["a-1".to_string()][..]));
        assert_eq!(
            expand("gpu-[1-3,7],cpu-4").unwrap_or_default(),
            vec!["gpu-1", "gpu-2", "gpu-3", "gpu-7", "cpu-4"]
        );
        assert_eq!(expand("n[08-10]").unwrap_or_default(), vec!["n08", "n09", "n10"]);
        for bad in ["a-[1-", "a-[3-1]", "a-]1[", "a-[x]"] {
            assert!(expand(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn round_trips_the_model_host_lists() {
        let list = slurm_model::hostlist("gpu-p5-48xl", 1, 16);
        assert_eq!(expand(&list).map(|v| v.len()), Ok(16));
    }
}
