//! The provider binary Terraform starts.

use std::process::ExitCode;
use std::sync::Arc;

use terraform_provider_hpc::provider::HpcProvider;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("--version") {
        println!("terraform-provider-hpc {}", env!("CARGO_PKG_VERSION"));
        return Ok(());
    }
    // Check before anything else so a person running the binary gets a plain answer.
    tfplugin::serve::check_environment(terraform_provider_hpc::ADDRESS, |k| std::env::var(k).ok())?;
    tfplugin::logging::init();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(tfplugin::serve::serve(
        terraform_provider_hpc::ADDRESS,
        Arc::new(HpcProvider),
    ))?;
    Ok(())
}
