//! The `timeouts { create = "60m" ... }` block every long-running resource has.

use std::time::Duration;

use crate::diag::{AttributePath, Diagnostics};
use crate::schema::{Attribute, Block, BlockNesting, NestedBlock};
use crate::value::{Type, Value};

/// The `timeouts` block for the given operations (e.g. `["create", "update", "delete"]`).
pub fn block(operations: &[&str]) -> NestedBlock {
    NestedBlock::new(
        "timeouts",
        BlockNesting::Single,
        Block::new(
            operations
                .iter()
                .map(|op| {
                    Attribute::optional(op, Type::String).description(&format!(
                        "How long to wait for {op} to finish, as a duration like `30m` or `1h30m`."
                    ))
                })
                .collect(),
        ),
    )
}

/// Parses `1h30m`, `45s`, `90m`, `2h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration: use a number with a unit, like \"30m\", \"1h30m\" or \"45s\"");
    if text.is_empty() {
        return Err(bad());
    }
    let mut total = 0u64;
    let mut digits = String::new();
    for ch in text.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        let n: u64 = digits.parse().map_err(|_| bad())?;
        digits.clear();
        let unit = match ch {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        total = total
            .checked_add(n.checked_mul(unit).ok_or_else(bad)?)
            .ok_or_else(bad)?;
    }
    if !digits.is_empty() {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

/// The timeout for `op` from a resource's value, or `default` when unset.
pub fn get(resource: &Value, op: &str, default: Duration) -> Duration {
    resource
        .attr("timeouts")
        .attr(op)
        .as_str()
        .and_then(|s| parse_duration(s).ok())
        .unwrap_or(default)
}

/// Diagnostics for malformed durations in a configuration's `timeouts` block.
pub fn validate(config: &Value) -> Diagnostics {
    let mut diags = Diagnostics::new();
    if let Some(entries) = config.attr("timeouts").entries() {
        for (op, v) in entries {
            if let Some(s) = v.as_str() {
                if let Err(e) = parse_duration(s) {
                    diags.error_at(AttributePath::root("timeouts").attr(op), "Invalid timeout", e);
                }
            }
        }
    }
    diags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("45s"), Ok(Duration::from_secs(45)));
        for bad in ["", "10", "1d", "m", "1h30", "-5m"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
