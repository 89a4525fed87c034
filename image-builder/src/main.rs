//! The hpc-image command: parses the command line and runs the subcommand (see
//! `hpc-image --help`).

use std::process::ExitCode;

use hpc_image::cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::from_env();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hpc-image: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(hpc_image::cmd::run(&cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hpc-image: {e}");
            ExitCode::FAILURE
        }
    }
}
