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
        line.insert("@timestamp".into(), format!("{}.{:06}", now.as_secs(), now.subsec_micros()).into());
        let mut out = serde_json::Value::Object(line).to_string();
        out.push('\n');
        let _ = std::io::stderr().lock().write_all(out.as_bytes());
    }
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
    let _ = tracing_subscriber::registry().with(HclogLayer { max: level }.with_filter(filter)).try_init();
}
