//! hpc-image: the image builder. Not built yet (issue 4); this binary says so plainly.

fn main() {
    eprintln!("hpc-image: not implemented yet; see issue 4 (bake, verify and publish HPC machine images)");
    std::process::exit(2);
}
