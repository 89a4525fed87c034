//! Slurm time limits (`MaxTime=`, `DefaultTime=`).

use std::fmt;

/// A parsed Slurm time limit, in whole minutes as slurmctld stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TimeLimit {
    /// A finite limit in minutes (seconds round up, as Slurm does).
    Minutes(u32),
    /// `UNLIMITED` or `INFINITE`.
    Unlimited,
}

/// The largest finite limit Slurm stores (its "infinite" marker is `u32::MAX`).
const MAX_MINUTES: u64 = u32::MAX as u64 - 1;

impl TimeLimit {
    /// Parses the formats Slurm accepts: `minutes`, `minutes:seconds`,
    /// `hours:minutes:seconds`, `days-hours`, `days-hours:minutes`,
    /// `days-hours:minutes:seconds`, `UNLIMITED`, `INFINITE` (case-insensitive).
    ///
    /// Fields after the first must be in range (hours < 24 after a day count, minutes
    /// and seconds < 60). The error says what is wrong with the text.
    pub fn parse(text: &str) -> Result<TimeLimit, String> {
        let s = text.trim();
        if s.eq_ignore_ascii_case("UNLIMITED") || s.eq_ignore_ascii_case("INFINITE") {
            return Ok(TimeLimit::Unlimited);
        }
        if s.is_empty() {
            return Err("the time limit is empty".into());
        }
        let (days, clock) = match s.split_once('-') {
            Some((d, rest)) => (Some(number(d, "days")?), rest),
            None => (None, s),
        };
        let fields = clock.split(':').collect::<Vec<_>>();
        let seconds: u64 = match (days, fields.as_slice()) {
            (None, [m]) => number(m, "minutes")? * 60,
            (None, [m, sec]) => number(m, "minutes")? * 60 + bounded(sec, "seconds", 60)?,
            (None, [h, m, sec]) => {
                number(h, "hours")? * 3600 + bounded(m, "minutes", 60)? * 60 + bounded(sec, "seconds", 60)?
            }
            (Some(d), [h]) => d * 86_400 + bounded(h, "hours", 24)? * 3600,
            (Some(d), [h, m]) => d * 86_400 + bounded(h, "hours", 24)? * 3600 + bounded(m, "minutes", 60)? * 60,
            (Some(d), [h, m, sec]) => {
                d * 86_400
                    + bounded(h, "hours", 24)? * 3600
                    + bounded(m, "minutes", 60)? * 60
                    + bounded(sec, "seconds", 60)?
            }
            _ => return Err(format!("{s:?} has too many ':' fields")),
        };
        let minutes = seconds.div_ceil(60);
        if minutes == 0 {
            return Err("a time limit of 0 stops every job; leave it unset or use UNLIMITED".into());
        }
        if minutes > MAX_MINUTES {
            return Err(format!("{s:?} is longer than Slurm can store; use UNLIMITED"));
        }
        Ok(TimeLimit::Minutes(u32::try_from(minutes).unwrap_or(u32::MAX - 1)))
    }
}

impl fmt::Display for TimeLimit {
    /// The form `scontrol show partition` prints: `UNLIMITED`, `HH:MM:SS` or
    /// `D-HH:MM:SS`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TimeLimit::Unlimited => f.write_str("UNLIMITED"),
            TimeLimit::Minutes(m) => {
                let (days, hours, minutes) = (m / 1440, (m % 1440) / 60, m % 60);
                if days > 0 {
                    write!(f, "{days}-{hours:02}:{minutes:02}:00")
                } else {
                    write!(f, "{hours:02}:{minutes:02}:00")
                }
            }
        }
    }
}

fn number(field: &str, what: &str) -> Result<u64, String> {
    if field.is_empty() || !field.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("{what} must be a number, not {field:?}"));
    }
    // At most 10 digits keeps every product below u64::MAX; larger values fail the
    // range check later anyway.
    if field.len() > 10 {
        return Err(format!("{what} value {field} is too large"));
    }
    field.parse::<u64>().map_err(|e| format!("{what} {field:?}: {e}"))
}

fn bounded(field: &str, what: &str, below: u64) -> Result<u64, String> {
    let n = number(field, what)?;
    if n >= below {
        return Err(format!("{what} must be below {below}, not {n}"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minutes(s: &str) -> u32 {
        match TimeLimit::parse(s) {
            Ok(TimeLimit::Minutes(m)) => m,
            other => panic!("{s:?} parsed to {other:?}"),
        }
    }

    #[test]
    fn accepts_every_slurm_format() {
        assert_eq!(minutes("90"), 90);
        assert_eq!(minutes("90:30"), 91, "seconds round up like Slurm");
        assert_eq!(minutes("10:00"), 10);
        assert_eq!(minutes("1:30:00"), 90);
        assert_eq!(minutes("2-12"), 2 * 1440 + 12 * 60);
        assert_eq!(minutes("2-12:30"), 2 * 1440 + 12 * 60 + 30);
        assert_eq!(minutes("2-12:30:01"), 2 * 1440 + 12 * 60 + 31);
        assert_eq!(minutes("0-00:01"), 1);
        assert_eq!(TimeLimit::parse("UNLIMITED"), Ok(TimeLimit::Unlimited));
        assert_eq!(TimeLimit::parse("infinite"), Ok(TimeLimit::Unlimited));
    }

    #[test]
    fn rejects_malformed_limits() {
        for bad in [
            "",
            "abc",
            "1h",
            "-5",
            "1-",
            "1-2-3",
            "1:2:3:4",
            "1-2:3:4:5",
            "5:60",
            "1:60:00",
            "1-24",
            "1-2:60",
            "0",
            "0:00",
            "12345678901",
        ] {
            assert!(TimeLimit::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn unlimited_is_longer_than_any_finite_limit() {
        assert!(TimeLimit::Unlimited > TimeLimit::Minutes(u32::MAX - 1));
    }

    #[test]
    fn displays_like_scontrol() {
        assert_eq!(TimeLimit::Minutes(60).to_string(), "01:00:00");
        assert_eq!(TimeLimit::Minutes(2 * 1440 + 90).to_string(), "2-01:30:00");
        assert_eq!(TimeLimit::Unlimited.to_string(), "UNLIMITED");
    }
}
