//! `hpc-image validate`: the template's problems, or its sources and steps in order.

use super::{load, Result};
use crate::cli::TemplateArgs;
use crate::plan::SourceConfig;

pub fn run(args: &TemplateArgs) -> Result<()> {
    let (t, plan) = load(args)?;
    let steps: Vec<&str> = plan.steps.iter().map(|s| s.id.as_str()).collect();
    let sources: Vec<String> = plan.sources.iter().map(SourceConfig::reference).collect();
    println!(
        "{}: ok — sources {}; steps in order: {}{}",
        t.path.display(),
        sources.join(", "),
        steps.join(" → "),
        match &plan.publish {
            Some(p) => format!("; publishes {:?} to {}", p.ami_name, p.regions.join(", ")),
            None => String::new(),
        }
    );
    Ok(())
}
