//! The components hpc-image ships: each versioned, with its arguments, what it needs, the
//! downloads it takes (URL + SHA-256, both required), and its install and check scripts
//! (components/<name>/, shared by the local and the amazon-ebs builders).

/// Prepended to every install and check script: logging, apt, verified downloads.
pub const LIB_SH: &str = include_str!("../components/lib.sh");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    String,
    Bool,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
}

#[derive(Debug, Clone, Copy)]
pub struct ArgSpec {
    pub name: &'static str,
    pub kind: ArgKind,
    /// None: no default (the argument may be required by a download).
    pub default: Option<&'static str>,
    pub help: &'static str,
}

/// A file to download, named by two arguments; needed when `when` holds (arg = value) or always.
#[derive(Debug, Clone, Copy)]
pub struct Download {
    pub url_arg: &'static str,
    pub sha256_arg: &'static str,
    pub when: Option<(&'static str, &'static str)>,
}

#[derive(Debug, Clone, Copy)]
pub struct Component {
    pub name: &'static str,
    /// The version of this component's scripts; part of every cache key and the manifest.
    pub version: &'static str,
    pub summary: &'static str,
    pub requires: &'static [&'static str],
    pub args: &'static [ArgSpec],
    pub downloads: &'static [Download],
    pub install: &'static str,
    pub check: &'static str,
}

const fn arg(name: &'static str, kind: ArgKind, default: Option<&'static str>, help: &'static str) -> ArgSpec {
    ArgSpec {
        name,
        kind,
        default,
        help,
    }
}

const fn always(url_arg: &'static str, sha256_arg: &'static str) -> Download {
    Download {
        url_arg,
        sha256_arg,
        when: None,
    }
}

const fn when_method(method: &'static str, url_arg: &'static str, sha256_arg: &'static str) -> Download {
    Download {
        url_arg,
        sha256_arg,
        when: Some(("method", method)),
    }
}

const DISTRO_OR_RUNFILE: ArgKind = ArgKind::Choice(&["distro", "runfile"]);

pub const COMPONENTS: &[Component] = &[
    Component {
        name: "munge",
        version: "1.0.0",
        summary: "MUNGE authentication (no key baked in: the node agent installs the cluster's key)",
        requires: &[],
        args: &[],
        downloads: &[],
        install: include_str!("../components/munge/install.sh"),
        check: include_str!("../components/munge/check.sh"),
    },
    Component {
        name: "slurm",
        version: "1.0.0",
        summary: "Slurm slurmd, slurmctld and client (Debian 12: 22.05, Debian 13: 24.11, Debian 14: 26.05)",
        requires: &["munge"],
        args: &[
            arg(
                "version",
                ArgKind::String,
                Some("distro"),
                "\"distro\" or a Debian package version to pin",
            ),
            arg("accounting", ArgKind::Bool, Some("false"), "also install slurmdbd"),
        ],
        downloads: &[],
        install: include_str!("../components/slurm/install.sh"),
        check: include_str!("../components/slurm/check.sh"),
    },
    Component {
        name: "efa",
        version: "1.0.0",
        summary: "EFA userspace: rdma-core (libefa) and libfabric, or the AWS EFA installer",
        requires: &[],
        args: &[
            arg(
                "method",
                ArgKind::Choice(&["distro", "installer"]),
                Some("distro"),
                "distro packages or the AWS EFA installer",
            ),
            arg(
                "installer_url",
                ArgKind::String,
                None,
                "aws-efa-installer tarball URL (method = installer)",
            ),
            arg("installer_sha256", ArgKind::String, None, "its SHA-256"),
            arg(
                "kernel_module",
                ArgKind::Bool,
                Some("true"),
                "build the EFA kernel module (installer only)",
            ),
        ],
        downloads: &[when_method("installer", "installer_url", "installer_sha256")],
        install: include_str!("../components/efa/install.sh"),
        check: include_str!("../components/efa/check.sh"),
    },
    Component {
        name: "nvidia-driver",
        version: "1.0.0",
        summary: "NVIDIA driver, kernel module built by DKMS for the image's kernel",
        requires: &[],
        args: &[
            arg(
                "method",
                DISTRO_OR_RUNFILE,
                Some("distro"),
                "Debian non-free packages or NVIDIA's runfile",
            ),
            arg(
                "runfile_url",
                ArgKind::String,
                None,
                "NVIDIA-Linux-x86_64-*.run URL (method = runfile)",
            ),
            arg("runfile_sha256", ArgKind::String, None, "its SHA-256"),
        ],
        downloads: &[when_method("runfile", "runfile_url", "runfile_sha256")],
        install: include_str!("../components/nvidia-driver/install.sh"),
        check: include_str!("../components/nvidia-driver/check.sh"),
    },
    Component {
        name: "cuda",
        version: "1.0.0",
        summary: "CUDA toolkit",
        requires: &["nvidia-driver"],
        args: &[
            arg(
                "method",
                DISTRO_OR_RUNFILE,
                Some("distro"),
                "Debian's nvidia-cuda-toolkit or NVIDIA's runfile",
            ),
            arg(
                "runfile_url",
                ArgKind::String,
                None,
                "cuda_*_linux.run URL (method = runfile)",
            ),
            arg("runfile_sha256", ArgKind::String, None, "its SHA-256"),
        ],
        downloads: &[when_method("runfile", "runfile_url", "runfile_sha256")],
        install: include_str!("../components/cuda/install.sh"),
        check: include_str!("../components/cuda/check.sh"),
    },
    Component {
        name: "nccl",
        version: "1.0.0",
        summary: "NCCL and the aws-ofi-nccl plugin (NCCL over EFA)",
        requires: &["cuda", "efa"],
        args: &[
            arg(
                "nccl_url",
                ArgKind::String,
                None,
                "NCCL tarball (nccl_*_x86_64.txz) or .deb URL",
            ),
            arg("nccl_sha256", ArgKind::String, None, "its SHA-256"),
            arg(
                "aws_ofi_nccl_url",
                ArgKind::String,
                None,
                "aws-ofi-nccl release source tarball URL",
            ),
            arg("aws_ofi_nccl_sha256", ArgKind::String, None, "its SHA-256"),
        ],
        downloads: &[
            always("nccl_url", "nccl_sha256"),
            always("aws_ofi_nccl_url", "aws_ofi_nccl_sha256"),
        ],
        install: include_str!("../components/nccl/install.sh"),
        check: include_str!("../components/nccl/check.sh"),
    },
    Component {
        name: "lustre-client",
        version: "1.0.0",
        summary: "Lustre client for FSx for Lustre (packages built for the image's kernel)",
        requires: &[],
        args: &[
            arg(
                "packages_url",
                ArgKind::String,
                None,
                "tarball of Lustre client .debs for the image's kernel",
            ),
            arg("packages_sha256", ArgKind::String, None, "its SHA-256"),
        ],
        downloads: &[always("packages_url", "packages_sha256")],
        install: include_str!("../components/lustre-client/install.sh"),
        check: include_str!("../components/lustre-client/check.sh"),
    },
    Component {
        name: "dcgm",
        version: "1.0.0",
        summary: "NVIDIA DCGM (GPU health and diagnostics)",
        requires: &["nvidia-driver"],
        args: &[
            arg("deb_url", ArgKind::String, None, "datacenter-gpu-manager .deb URL"),
            arg("deb_sha256", ArgKind::String, None, "its SHA-256"),
        ],
        downloads: &[always("deb_url", "deb_sha256")],
        install: include_str!("../components/dcgm/install.sh"),
        check: include_str!("../components/dcgm/check.sh"),
    },
    Component {
        name: "enroot-pyxis",
        version: "1.0.0",
        summary: "enroot containers and the pyxis Slurm plugin (srun --container-image)",
        requires: &["slurm"],
        args: &[
            arg("enroot_url", ArgKind::String, None, "enroot .deb URL"),
            arg("enroot_sha256", ArgKind::String, None, "its SHA-256"),
            arg("enroot_caps_url", ArgKind::String, None, "enroot+caps .deb URL"),
            arg("enroot_caps_sha256", ArgKind::String, None, "its SHA-256"),
            arg("pyxis_url", ArgKind::String, None, "pyxis source tarball URL"),
            arg("pyxis_sha256", ArgKind::String, None, "its SHA-256"),
        ],
        downloads: &[
            always("enroot_url", "enroot_sha256"),
            always("enroot_caps_url", "enroot_caps_sha256"),
            always("pyxis_url", "pyxis_sha256"),
        ],
        install: include_str!("../components/enroot-pyxis/install.sh"),
        check: include_str!("../components/enroot-pyxis/check.sh"),
    },
    Component {
        name: "mfa",
        version: "1.1.0",
        summary: "PAM modules for a second SSH factor on login nodes (the cluster's `mfa` block picks one)",
        requires: &[],
        args: &[
            arg(
                "google_authenticator",
                ArgKind::Bool,
                Some("true"),
                "TOTP codes: pam_google_authenticator.so and its enrolment program",
            ),
            arg("duo", ArgKind::Bool, Some("true"), "Duo: pam_duo.so"),
        ],
        downloads: &[],
        install: include_str!("../components/mfa/install.sh"),
        check: include_str!("../components/mfa/check.sh"),
    },
    Component {
        name: "hpc-node",
        version: env!("CARGO_PKG_VERSION"),
        summary: "the hpcforge node agent (Slurm Resume/Suspend, config reconcile, health) and its units",
        requires: &[],
        args: &[arg(
            "binary",
            ArgKind::String,
            Some(""),
            "path of the hpc-node binary to bake (default: next to hpc-image, else target/release or target/debug)",
        )],
        downloads: &[],
        install: include_str!("../components/hpc-node/install.sh"),
        check: include_str!("../components/hpc-node/check.sh"),
    },
    Component {
        name: "health-checks",
        version: "1.0.0",
        summary: "Slurm HealthCheckProgram wrapper around `hpc-node health`",
        requires: &["hpc-node", "slurm"],
        args: &[],
        downloads: &[],
        install: include_str!("../components/health-checks/install.sh"),
        check: include_str!("../components/health-checks/check.sh"),
    },
];

pub fn find(name: &str) -> Option<&'static Component> {
    COMPONENTS.iter().find(|c| c.name == name)
}

/// Names of all components, for "did you mean" style messages.
pub fn names() -> Vec<&'static str> {
    COMPONENTS.iter().map(|c| c.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_name_known_components() {
        for c in COMPONENTS {
            for r in c.requires {
                assert!(find(r).is_some(), "{} requires unknown {r}", c.name);
            }
        }
    }

    #[test]
    fn images_install_the_programs_slurm_conf_names() {
        let agent = find("hpc-node").expect("hpc-node");
        assert!(agent.install.contains("for cmd in resume suspend resume-fail"));
        assert!(agent.install.contains("\"/usr/local/sbin/hpc-node-$cmd\""));
        for (cmd, path) in [
            ("resume", hpc_desired_state::RESUME_PROGRAM),
            ("suspend", hpc_desired_state::SUSPEND_PROGRAM),
            ("resume-fail", hpc_desired_state::RESUME_FAIL_PROGRAM),
        ] {
            assert_eq!(path, format!("/usr/local/sbin/hpc-node-{cmd}"));
        }
        let health = find("health-checks").expect("health-checks");
        assert!(health
            .install
            .contains(&format!("cat >{} <<", hpc_desired_state::HEALTH_CHECK_PROGRAM)));
    }

    #[test]
    fn downloads_name_declared_arguments_without_defaults() {
        for c in COMPONENTS {
            for d in c.downloads {
                for a in [d.url_arg, d.sha256_arg] {
                    let spec = c.args.iter().find(|s| s.name == a);
                    assert!(spec.is_some_and(|s| s.default.is_none()), "{}: {a}", c.name);
                }
            }
            assert!(!c.install.trim().is_empty() && !c.check.trim().is_empty(), "{}", c.name);
        }
    }
}
