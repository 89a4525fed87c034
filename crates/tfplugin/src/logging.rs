//! Logs in the JSON shape Terraform's plugin client reads from a provider's stderr, so
//! they show up under TF_LOG / TF_LOG_PROVIDER at the right level.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

struct HclogLayer {
    max: Level,
}

#[derive(Default)]
struct Fields {
    message: String,
    extra: serde_json::Map<String, serde_json::Value>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.extra.insert(field.name().to_string(), value.into());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut s = String::new();
        let _ = write!(s, "{value:?}");
        if field.name() == "message" {
            self.message = s;
        } else {
            self.extra.insert(field.name().to_string(), s.into());
        }
    }
}

impl<S: Subscriber> Layer<S> for HclogLayer {
    fn enabled(&self, metadata: &tracing::Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        metadata.level() <= &self.max
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().level() > &self.max {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warn",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let mut line = fields.extra;
        line.insert("@level".into(), level.into());
        line.insert("@message".into(), fields.message.into());
        line.insert("@module".into(), event.metadata().target().into());
        line.insert("@timestamp".into(), rfc3339(now.as_secs(), now.subsec_micros()).into());
        let mut out = serde_json::Value::Object(line).to_string();
        out.push('\n');
        let _ = std::io::stderr().lock().write_all(out.as_bytes());
    }
}

/// `2026-12-02T15:04:05.000000Z`: the timestamp form go-hclog writes and Terraform parses.
fn rfc3339(secs: u64, micros: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Installs the logger. The level comes from TF_LOG_PROVIDER or TF_LOG (default: info,
/// which Terraform hides unless asked). AWS SDK internals are capped at info.
pub fn init() {
    let level = std::env::var("TF_LOG_PROVIDER")
        .or_else(|_| std::env::var("TF_LOG"))
        .ok()
        .and_then(|l| match l.to_ascii_lowercase().as_str() {
            "trace" | "json" => Some(Level::TRACE),
            "debug" => Some(Level::DEBUG),
            "info" => Some(Level::INFO),
            "warn" => Some(Level::WARN),
            "error" => Some(Level::ERROR),
            _ => None,
        })
        .unwrap_or(Level::INFO);
    let filter = tracing_subscriber::filter::filter_fn(|m| {
        !(m.target().starts_with("aws_") || m.target().starts_with("hyper") || m.target().starts_with("h2"))
            || m.level() <= &Level::INFO
    });
    let _ = tracing_subscriber::registry()
        .with(HclogLayer { max: level }.with_filter(filter))
        .try_init();
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(super::rfc3339(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(super::rfc3339(1_796_224_930, 944_999), "2026-12-02T15:22:10.944999Z");
        assert_eq!(super::rfc3339(951_782_400, 1), "2000-02-29T00:00:00.000001Z");
    }
}
