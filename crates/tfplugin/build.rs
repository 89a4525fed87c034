//! Compiles the protocol's .proto files in pure Rust (protox): no system protoc needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/tfplugin6.proto", "proto/plugin.proto", "proto/health.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
