//! The hpc-node command: parses the command line and runs the subcommand (see `hpc-node --help`).

use std::process::ExitCode;

use clap::Parser as _;
use hpc_aws::{Aws, Settings};
use hpc_node::cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hpc-node: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let aws = Aws::connect(&Settings {
            region: cli.command.cluster().region.clone(),
            max_retries: 5,
            ..Settings::default()
        })
        .await?;
        hpc_node::cmd::run(&cli.command, &aws).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hpc-node: {e}");
            ExitCode::FAILURE
        }
    }
}
