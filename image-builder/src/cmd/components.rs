//! `hpc-image components`: the catalog, with each component's arguments.

use crate::catalog;

pub fn run() {
    for c in catalog::COMPONENTS {
        println!("{} {} — {}", c.name, c.version, c.summary);
        if !c.requires.is_empty() {
            println!("    requires: {}", c.requires.join(", "));
        }
        for a in c.args {
            println!(
                "    {} = {}  {}",
                a.name,
                a.default.map_or("(no default)".to_string(), |d| format!("{d:?}")),
                a.help
            );
        }
    }
}
