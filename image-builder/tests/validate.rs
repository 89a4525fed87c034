//! `hpc-image validate` on bad templates: each problem is reported with the file, the line,
//! the block and what to do, and the command exits non-zero; good templates pass.

use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hpc-image-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Runs `hpc-image validate` on `text`; (succeeded, combined output).
fn validate(name: &str, text: &str, extra: &[&str]) -> (bool, String) {
    let dir = scratch();
    let path = dir.join(format!("{name}.pkr.hcl"));
    std::fs::write(&path, text).expect("write template");
    let out = Command::new(env!("CARGO_BIN_EXE_hpc-image"))
        .arg("validate")
        .arg(&path)
        .args(extra)
        .current_dir(&dir)
        .env("HPC_NODE_BINARY", env!("CARGO_BIN_EXE_hpc-image"))
        .output()
        .expect("running hpc-image");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text.replace(&format!("{}/", dir.display()), ""))
}

fn bad(name: &str, text: &str, extra: &[&str], expect: &[&str]) {
    let (ok, out) = validate(name, text, extra);
    assert!(!ok, "{name}: validate should fail:\n{out}");
    for e in expect {
        assert!(out.contains(e), "{name}: expected {e:?} in:\n{out}");
    }
}

fn build(body: &str) -> String {
    format!("source \"local\" \"d\" {{}}\n\nbuild {{\n  sources = [\"source.local.d\"]\n{body}}}\n")
}

#[test]
fn syntax_errors_name_the_line_and_column() {
    bad(
        "syntax",
        "source \"local\" \"d\" {\n  suite = \n}\n",
        &[],
        &["syntax.pkr.hcl:2: syntax error at column 11"],
    );
}

#[test]
fn unknown_components_list_the_known_ones() {
    bad(
        "unknown-component",
        &build("  component \"slrum\" {}\n"),
        &[],
        &["unknown-component.pkr.hcl:5: in component \"slrum\": unknown component \"slrum\" (known: munge, slurm"],
    );
}

#[test]
fn unknown_component_arguments_name_the_known_ones() {
    bad(
        "unknown-arg",
        &build("  component \"munge\" {}\n  component \"slurm\" {\n    verison = \"22.05\"\n  }\n"),
        &[],
        &["unknown-arg.pkr.hcl:7: in component \"slurm\": unknown argument \"verison\" (component \"slurm\" takes version, accounting)"],
    );
}

#[test]
fn missing_requirements_say_what_to_add() {
    bad(
        "requires",
        &build("  component \"nvidia-driver\" {}\n  component \"nccl\" {\n    nccl_url = \"https://x/n.txz\"\n    nccl_sha256 = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\n    aws_ofi_nccl_url = \"https://x/o.tgz\"\n    aws_ofi_nccl_sha256 = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\n  }\n"),
        &[],
        &[
            "requires.pkr.hcl:6: in component \"nccl\": component \"nccl\" needs \"cuda\": add component \"cuda\" {} to the build",
            "needs \"efa\"",
        ],
    );
}

#[test]
fn downloads_without_checksums_are_refused() {
    bad(
        "no-checksum",
        &build("  component \"efa\" {\n    method = \"installer\"\n    installer_url = \"https://efa-installer.amazonaws.com/aws-efa-installer-1.38.0.tar.gz\"\n  }\n"),
        &[],
        &["no-checksum.pkr.hcl:5: in component \"efa\": efa with method = \"installer\" downloads installer_url: its checksum installer_sha256 is required"],
    );
}

#[test]
fn malformed_checksums_and_urls_are_refused() {
    bad(
        "bad-checksum",
        &build("  component \"lustre-client\" {\n    packages_url = \"ftp://x/l.tar\"\n    packages_sha256 = \"1234\"\n  }\n"),
        &[],
        &[
            "bad-checksum.pkr.hcl:6: in component \"lustre-client\": packages_url must be an https://, http:// or file:// URL",
            "bad-checksum.pkr.hcl:7: in component \"lustre-client\": packages_sha256 must be 64 hex digits",
        ],
    );
}

#[test]
fn variables_are_type_checked() {
    let text = format!(
        "variable \"size\" {{\n  type = number\n  default = 4\n}}\n{}",
        build("")
    );
    bad(
        "var-type",
        &text,
        &["-var", "size=big"],
        &["var-type.pkr.hcl:1: in variable \"size\": -var size: \"big\" is not a number"],
    );
    bad(
        "var-default",
        "variable \"n\" {\n  type = bool\n  default = \"yes\"\n}\nbuild {\n  sources = []\n}\n",
        &[],
        &["var-default.pkr.hcl:1: in variable \"n\": default does not match type bool"],
    );
}

#[test]
fn undefined_variables_are_reported_where_used() {
    bad(
        "undefined-var",
        "source \"local\" \"d\" {\n  suite = var.distro\n}\nbuild {\n  sources = [\"source.local.d\"]\n}\n",
        &[],
        &[
            "undefined-var.pkr.hcl:2: in source \"local\" \"d\": argument \"suite\"",
            "declare it in a `variable` block",
        ],
    );
}

#[test]
fn unknown_builders_and_undeclared_sources_are_reported() {
    bad(
        "builder",
        "source \"docker\" \"d\" {}\nbuild {\n  sources = [\"source.local.x\"]\n}\n",
        &[],
        &[
            "builder.pkr.hcl:1: in source \"docker\" \"d\": unknown builder \"docker\": use \"local\" or \"amazon-ebs\"",
            "builder.pkr.hcl:2: in build: sources names \"source.local.x\", which is not declared",
        ],
    );
}

#[test]
fn source_settings_are_checked() {
    bad(
        "local-settings",
        "source \"local\" \"d\" {\n  suite = \"buster\"\n  disk_size = \"lots\"\n  colour = \"blue\"\n}\nbuild {\n  sources = [\"source.local.d\"]\n}\n",
        &[],
        &[
            "local-settings.pkr.hcl:2: in source \"local\" \"d\": suite \"buster\" is not supported",
            "local-settings.pkr.hcl:3: in source \"local\" \"d\": disk_size \"lots\" is not a size",
            "local-settings.pkr.hcl:4: in source \"local\" \"d\": unknown argument \"colour\"",
        ],
    );
}

#[test]
fn the_amazon_ebs_builder_never_opens_ssh_to_the_internet() {
    bad(
        "open-ssh",
        "source \"amazon-ebs\" \"e\" {\n  region = \"us-east-1\"\n  source_ami = \"ami-1\"\n  ssh_cidrs = [\"0.0.0.0/0\"]\n}\nbuild {\n  sources = [\"source.amazon-ebs.e\"]\n}\n",
        &[],
        &["open-ssh.pkr.hcl:4: in source \"amazon-ebs\" \"e\": ssh_cidrs must not contain 0.0.0.0/0"],
    );
}

#[test]
fn publish_settings_are_checked() {
    bad(
        "publish",
        &format!(
            "{}publish {{\n  ami_name = \"x\"\n  regions = [\"us-east-1\"]\n  share_with_accounts = [\"1234\", \"111122223333\"]\n}}\n",
            build("")
        ),
        &[],
        &[
            "publish.pkr.hcl:7: in publish: ami_name must be 3-128 characters",
            "publish.pkr.hcl:9: in publish: \"1234\" is not a 12-digit AWS account id",
            "needs kms_key_id",
        ],
    );
}

#[test]
fn provisioner_files_must_exist_and_components_appear_once() {
    bad(
        "provisioners",
        &build("  component \"munge\" {}\n  provisioner \"file\" {\n    source = \"missing.conf\"\n    destination = \"etc/x\"\n  }\n  component \"munge\" {}\n"),
        &[],
        &[
            "provisioners.pkr.hcl:7: in provisioner \"file\": source missing.conf is not a file",
            "provisioners.pkr.hcl:8: in provisioner \"file\": destination must be an absolute path",
            "provisioners.pkr.hcl:10: in component \"munge\": component \"munge\" is listed twice (first on line 5)",
        ],
    );
}

#[test]
fn all_problems_are_reported_at_once() {
    let (ok, out) = validate(
        "many",
        "source \"local\" \"d\" {\n  suite = \"sid\"\n}\nbuild {\n  sources = [\"source.local.d\"]\n  component \"cuda\" {}\n  component \"gpu-magic\" {}\n}\nwhatever {}\n",
        &[],
    );
    assert!(!ok);
    assert!(out.contains("4 problem(s) in the template"), "{out}");
}

#[test]
fn shipped_templates_validate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
    let (ok, out) = {
        let o = Command::new(env!("CARGO_BIN_EXE_hpc-image"))
            .arg("validate")
            .arg(root.join("debian-slurm.pkr.hcl"))
            .env("HPC_NODE_BINARY", env!("CARGO_BIN_EXE_hpc-image"))
            .output()
            .expect("run");
        (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    assert!(ok, "{out}");
    assert!(
        out.contains("munge → slurm → efa → mfa → hpc-node → health-checks"),
        "{out}"
    );
}
