//! Every example under examples/ applied and destroyed with the real terraform against the
//! emulator, as a user would run it: the example folder and the modules it uses are copied
//! (keeping their relative paths), `terraform get` fetches the local modules, and the only
//! inputs given are the ones the example asks for (AMI ids, roles, a subnet).
//!
//! Each test checks what the user sees (every declared output has a value, the numbers in
//! them), what the example promises (partitions, pools, regions, accounts), that a second plan
//! has nothing to do, that no security group admits the whole internet, and that destroy leaves
//! nothing behind in any account or region the example touched.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use acceptance_tests::{
    http, mirror_cli_config, package_release, provider_dir, repo_root, scratch_dir, xml_values, Emulator, HttpsFiles,
    TfOutput, Workspace,
};
use serde_json::{json, Value};

/// The repository the modules' READMEs name in their git sources.
const REPOSITORY: &str = "https://github.com/hpcforge/hpcforge.git";
const MODULES: &[&str] = &["gpu-partition", "lustre-scratch", "multi-region", "slurm-cluster"];

/// An AMI the emulator knows in every region and account.
const AMI: &str = "ami-03cf127a";
const RESEARCH_ROLE: &str = "arn:aws:iam::111111111111:role/hpcforge";
const TEACHING_ROLE: &str = "arn:aws:iam::222222222222:role/hpcforge";

/// The examples this file applies; `every_example_is_applied_by_a_test` keeps it complete.
const APPLIED: &[&str] = &[
    "capacity-failover",
    "gpu-research-cluster",
    "multi-account",
    "quickstart",
];

// ---------------------------------------------------------------------------------------------
// An example in a scratch workspace
// ---------------------------------------------------------------------------------------------

struct Example {
    ws: Workspace,
    name: String,
    vars: Vec<String>,
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("creating a folder in the workspace");
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("reading {}: {e}", from.display())) {
        let entry = entry.expect("directory entry");
        let name = entry.file_name();
        let name_s = name.to_string_lossy();
        if name_s == ".terraform" || name_s.ends_with(".tfstate") || name_s.ends_with(".tfstate.backup") {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            copy_tree(&path, &to.join(&name));
        } else {
            std::fs::copy(&path, to.join(&name)).expect("copying a file into the workspace");
        }
    }
}

/// The names of the variables an example declares.
fn declared_variables(dir: &Path) -> BTreeSet<String> {
    declared(dir, "variable")
}

/// The names of the `kind` blocks (variable, output) in an example's .tf files.
fn declared(dir: &Path, kind: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).expect("example folder").flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "tf") {
            let text = std::fs::read_to_string(&path).expect("reading a .tf file");
            for line in text.lines() {
                if let Some(rest) = line.strip_prefix(&format!("{kind} \"")) {
                    if let Some(name) = rest.split('"').next() {
                        out.insert(name.to_string());
                    }
                }
            }
        }
    }
    out
}

impl Example {
    /// Copies examples/<name> and modules/ into a fresh workspace and runs `terraform get`.
    /// `inputs` are offered to the example; only the variables it declares are passed.
    fn new(name: &str, emu: &Emulator, inputs: &[(&str, String)]) -> Example {
        let ws = Workspace::new(&format!("example-{name}"), emu);
        copy_tree(
            &repo_root().join("examples").join(name),
            &ws.dir.join("examples").join(name),
        );
        copy_tree(&repo_root().join("modules"), &ws.dir.join("modules"));
        let ex = Example::in_workspace(ws, name, inputs);
        ex.ok(&["get", "-no-color"]);
        ex
    }

    /// Copies examples/<name> alone, its module sources rewritten to the git form the modules'
    /// READMEs document (the repository being `clone`), and runs `terraform init`.
    fn from_git(name: &str, emu: &Emulator, inputs: &[(&str, String)], clone: &Path, mirror: &Path) -> Example {
        let ws = Workspace::new(&format!("example-git-{name}"), emu);
        let file = format!("file://{}", clone.display());
        Example::from_sources(ws, name, inputs, mirror, |m| {
            documented_git_source(m).replace(REPOSITORY, &file)
        })
    }

    /// Copies examples/<name> alone, its module sources rewritten to the registry addresses the
    /// modules' READMEs document, on the registry `registry` (`host:port`) whose certificate is
    /// `cert`, and runs `terraform init`.
    fn from_registry(
        name: &str,
        emu: &Emulator,
        inputs: &[(&str, String)],
        registry: &str,
        cert: &Path,
        mirror: &Path,
    ) -> Example {
        let ws =
            Workspace::new(&format!("example-registry-{name}"), emu).env("SSL_CERT_FILE", &cert.display().to_string());
        Example::from_sources(ws, name, inputs, mirror, |m| {
            format!("{registry}/{}", documented_registry_source(m))
        })
    }

    /// examples/<name> in `ws` with each `../../modules/<module>` source replaced by
    /// `source_of(module)`, the provider from the release `mirror`; `terraform init` run.
    fn from_sources(
        ws: Workspace,
        name: &str,
        inputs: &[(&str, String)],
        mirror: &Path,
        source_of: impl Fn(&str) -> String,
    ) -> Example {
        // Installed as users install it: the provider from a release mirror, not dev_overrides.
        ws.cli_config(&mirror_cli_config(mirror));
        let folder = ws.dir.join("examples").join(name);
        copy_tree(&repo_root().join("examples").join(name), &folder);
        for entry in std::fs::read_dir(&folder).expect("the copied example").flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "tf") {
                let mut text = std::fs::read_to_string(&path).expect("reading a .tf file");
                for module in MODULES {
                    text = text.replace(
                        &format!("\"../../modules/{module}\""),
                        &format!("\"{}\"", source_of(module)),
                    );
                }
                assert!(
                    !text.contains("../../modules/"),
                    "{} uses a module this test does not know",
                    path.display()
                );
                std::fs::write(&path, text).expect("writing a .tf file");
            }
        }
        let ex = Example::in_workspace(ws, name, inputs);
        ex.ok(&["init", "-input=false", "-no-color"]);
        ex
    }

    fn in_workspace(ws: Workspace, name: &str, inputs: &[(&str, String)]) -> Example {
        let declared = declared_variables(&repo_root().join("examples").join(name));
        // The emulator's API-only mode boots no machine, so no head node ever reports ready.
        let no_boot = [("wait_for_ready", "false".to_string())];
        let vars = inputs
            .iter()
            .chain(no_boot.iter())
            .filter(|(k, _)| declared.contains(*k))
            .map(|(k, v)| format!("-var={k}={v}"))
            .collect();
        Example {
            ws,
            name: name.to_string(),
            vars,
        }
    }

    fn tf(&self, args: &[&str], with_vars: bool) -> TfOutput {
        let chdir = format!("-chdir=examples/{}", self.name);
        let mut all: Vec<&str> = vec![&chdir];
        all.extend_from_slice(args);
        if with_vars {
            all.extend(self.vars.iter().map(String::as_str));
        }
        self.ws.tf(&all)
    }

    fn ok(&self, args: &[&str]) -> TfOutput {
        let out = self.tf(args, false);
        assert!(
            out.success,
            "terraform {} in examples/{} failed:\n{}",
            args.join(" "),
            self.name,
            out.text()
        );
        out
    }

    fn apply(&self) -> TfOutput {
        let out = self.tf(&["apply", "-auto-approve", "-input=false", "-no-color"], true);
        assert!(out.success, "applying examples/{} failed:\n{}", self.name, out.text());
        out
    }

    fn destroy(&self) {
        let out = self.tf(&["destroy", "-auto-approve", "-input=false", "-no-color"], true);
        assert!(out.success, "destroying examples/{} failed:\n{}", self.name, out.text());
    }

    fn assert_no_changes(&self) {
        let out = self.tf(&["plan", "-input=false", "-no-color", "-detailed-exitcode"], true);
        assert_eq!(
            out.code,
            Some(0),
            "a second plan of examples/{} wants changes:\n{}",
            self.name,
            out.text()
        );
    }

    /// `terraform output -json`, as name => value.
    fn outputs(&self) -> Value {
        let out = self.ok(&["output", "-json", "-no-color"]);
        let v: Value = serde_json::from_str(&out.stdout).expect("output -json is JSON");
        let map = v
            .as_object()
            .map(|m| m.iter().map(|(k, o)| (k.clone(), o["value"].clone())).collect())
            .unwrap_or_default();
        Value::Object(map)
    }

    /// Every output the example declares has a value; returns them.
    fn assert_outputs(&self) -> Value {
        let outputs = self.outputs();
        let declared = declared(&repo_root().join("examples").join(&self.name), "output");
        assert!(!declared.is_empty(), "examples/{} declares no outputs", self.name);
        for name in &declared {
            let v = &outputs[name.as_str()];
            assert!(
                !v.is_null() && v != &json!({}) && v != &json!([]),
                "output {name} of examples/{} is empty: {outputs:#}",
                self.name
            );
        }
        outputs
    }

    /// Every managed resource in state (root and child modules): (address, type, values).
    fn resources(&self) -> Vec<(String, String, Value)> {
        let out = self.ok(&["show", "-json", "-no-color"]);
        let state: Value = serde_json::from_str(&out.stdout).expect("show -json is JSON");
        let mut found = Vec::new();
        fn walk(module: &Value, found: &mut Vec<(String, String, Value)>) {
            for r in module["resources"].as_array().into_iter().flatten() {
                if r["mode"] == "managed" {
                    found.push((
                        r["address"].as_str().unwrap_or_default().to_string(),
                        r["type"].as_str().unwrap_or_default().to_string(),
                        r["values"].clone(),
                    ));
                }
            }
            for child in module["child_modules"].as_array().into_iter().flatten() {
                walk(child, found);
            }
        }
        walk(&state["values"]["root_module"], &mut found);
        found
    }

    fn resource(&self, address: &str) -> Value {
        self.resources()
            .into_iter()
            .find(|(a, _, _)| a == address)
            .map(|(_, _, v)| v)
            .unwrap_or_else(|| panic!("{address} is not in the state of examples/{}", self.name))
    }

    fn count_of(&self, ty: &str) -> usize {
        self.resources().iter().filter(|(_, t, _)| t == ty).count()
    }
}

// ---------------------------------------------------------------------------------------------
// What is in the emulator, per account and region
// ---------------------------------------------------------------------------------------------

/// Who is asking: the access key (its account) and the region.
struct Scope {
    key: String,
    region: &'static str,
}

impl Scope {
    fn own(region: &'static str) -> Scope {
        Scope {
            key: "testing".into(),
            region,
        }
    }

    fn auth(&self, service: &str) -> String {
        format!(
            "AWS4-HMAC-SHA256 Credential={}/20260101/{}/{service}/aws4_request, SignedHeaders=host, Signature=0",
            self.key, self.region
        )
    }
}

fn ec2(emu: &Emulator, scope: &Scope, query: &str) -> String {
    let r = http(
        emu.port,
        "POST",
        "/",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Authorization", &scope.auth("ec2")),
        ],
        &format!("{query}&Version=2016-11-15"),
    );
    assert_eq!(r.status, 200, "EC2 {query} in {}: {}", scope.region, r.body);
    r.body
}

fn json_call(emu: &Emulator, scope: &Scope, service: &str, target: &str, body: Value) -> Value {
    let r = http(
        emu.port,
        "POST",
        "/",
        &[
            ("Content-Type", "application/x-amz-json-1.1"),
            ("X-Amz-Target", target),
            ("Authorization", &scope.auth(service)),
        ],
        &body.to_string(),
    );
    assert_eq!(r.status, 200, "{target} in {}: {}", scope.region, r.body);
    serde_json::from_str(&r.body).unwrap_or(Value::Null)
}

/// What hpcforge made that is still there: one line per thing, empty when nothing is left.
fn made(emu: &Emulator, scope: &Scope) -> Vec<String> {
    let mut left = Vec::new();
    let vpcs = ec2(emu, scope, "Action=DescribeVpcs");
    let non_default = xml_values(&vpcs, "isDefault").iter().filter(|d| *d == "false").count();
    if non_default > 0 {
        left.push(format!("{non_default} non-default VPC(s)"));
    }
    let instances = ec2(
        emu,
        scope,
        "Action=DescribeInstances&Filter.1.Name=instance-state-name&Filter.1.Value.1=running&Filter.1.Value.2=pending",
    );
    for id in xml_values(&instances, "instanceId") {
        left.push(format!("instance {id}"));
    }
    let lts = ec2(emu, scope, "Action=DescribeLaunchTemplates");
    for name in xml_values(&lts, "launchTemplateName") {
        left.push(format!("launch template {name}"));
    }
    let pgs = ec2(emu, scope, "Action=DescribePlacementGroups");
    for name in xml_values(&pgs, "groupName") {
        left.push(format!("placement group {name}"));
    }
    let sgs = ec2(emu, scope, "Action=DescribeSecurityGroups");
    for name in xml_values(&sgs, "groupName").into_iter().filter(|n| n != "default") {
        left.push(format!("security group {name}"));
    }
    let fsx = json_call(
        emu,
        scope,
        "fsx",
        "AWSSimbaAPIService_v20180301.DescribeFileSystems",
        json!({}),
    );
    for fs in fsx["FileSystems"].as_array().into_iter().flatten() {
        left.push(format!("file system {}", fs["FileSystemId"]));
    }
    let params = json_call(
        emu,
        scope,
        "ssm",
        "AmazonSSM.GetParametersByPath",
        json!({"Path": "/hpcforge", "Recursive": true}),
    );
    for p in params["Parameters"].as_array().into_iter().flatten() {
        left.push(format!("SSM parameter {}", p["Name"]));
    }
    let secrets = json_call(emu, scope, "secretsmanager", "secretsmanager.ListSecrets", json!({}));
    for s in secrets["SecretList"].as_array().into_iter().flatten() {
        if s["DeletedDate"].is_null() {
            left.push(format!("secret {}", s["Name"]));
        }
    }
    left
}

/// Ingress rules (of any security group) open to the whole internet.
fn open_to_the_internet(emu: &Emulator, scope: &Scope) -> Vec<String> {
    let sgs = ec2(emu, scope, "Action=DescribeSecurityGroups");
    // <ipPermissions> is ingress; egress is <ipPermissionsEgress>.
    xml_values(&sgs, "ipPermissions")
        .into_iter()
        .filter(|p| p.contains("0.0.0.0/0") || p.contains("::/0"))
        .collect()
}

fn assert_nothing_left(emu: &Emulator, scopes: &[&Scope], example: &str) {
    for scope in scopes {
        let left = made(emu, scope);
        assert!(
            left.is_empty(),
            "destroying examples/{example} left in {} ({}): {left:#?}",
            scope.region,
            scope.key
        );
    }
}

fn assert_no_open_ingress(emu: &Emulator, scopes: &[&Scope]) {
    for scope in scopes {
        let open = open_to_the_internet(emu, scope);
        assert!(open.is_empty(), "ingress from anywhere in {}: {open:?}", scope.region);
    }
}

fn running_with_tag(emu: &Emulator, scope: &Scope, key: &str, value: &str) -> usize {
    let xml = ec2(
        emu,
        scope,
        &format!(
            "Action=DescribeInstances&Filter.1.Name=tag:{key}&Filter.1.Value.1={value}&Filter.2.Name=instance-state-name&Filter.2.Value.1=running&Filter.2.Value.2=pending"
        ),
    );
    xml_values(&xml, "instanceId").len()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

#[test]
fn every_example_is_applied_by_a_test() {
    let mut runnable: Vec<String> = std::fs::read_dir(repo_root().join("examples"))
        .expect("examples/")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        // tfplugindocs snippets: validated by scripts/tf-validate.sh, shown in docs/.
        .filter(|n| !["provider", "resources", "data-sources"].contains(&n.as_str()))
        .collect();
    runnable.sort();
    assert_eq!(
        runnable, APPLIED,
        "every complete example needs a test in acceptance-tests/tests/examples.rs"
    );
}

#[test]
fn quickstart_applies_and_destroys() {
    let emu = Emulator::start();
    let east = Scope::own("us-east-1");
    let ex = Example::new(
        "quickstart",
        &emu,
        &[("subnet_id", emu.default_subnet()), ("ami_id", AMI.into())],
    );
    ex.apply();
    let outputs = ex.assert_outputs();
    if let Some(fs) = outputs["file_system_id"].as_str() {
        assert!(fs.starts_with("fs-"), "{outputs:#}");
        let ids: Vec<Value> = emu.file_systems().iter().map(|f| f["FileSystemId"].clone()).collect();
        assert!(ids.contains(&json!(fs)), "{fs} is not in the emulator: {ids:?}");
    }
    if let Some(mount) = outputs["mount_command"].as_str() {
        assert!(mount.contains("mount -t lustre"), "{mount}");
    }
    assert!(ex.count_of("hpc_lustre_fs") >= 1, "{:?}", ex.resources());
    assert!(
        !made(&emu, &east).is_empty(),
        "the leftover check sees what the example made"
    );
    assert_no_open_ingress(&emu, &[&east]);
    ex.assert_no_changes();
    ex.destroy();
    assert_nothing_left(&emu, &[&east], "quickstart");
}

#[test]
fn gpu_research_cluster_applies_and_destroys() {
    let emu = Emulator::start();
    let east = Scope::own("us-east-1");
    let ex = Example::new("gpu-research-cluster", &emu, &[("ami_id", AMI.into())]);
    ex.apply();
    let outputs = ex.assert_outputs();

    // Partitions: the module's CPU and high-memory ones and the GPU module's.
    let partitions = &outputs["partitions"];
    let names: BTreeSet<&str> = partitions
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(names, BTreeSet::from(["cpu", "gpu", "himem"]), "{outputs:#}");
    assert_eq!(partitions["gpu"]["max_gpus"], 32, "4 x p5.48xlarge: {outputs:#}");
    assert_eq!(strings(&partitions["gpu"]["node_names"]), ["gpu-p5-48xl-[1-4]"]);
    assert_eq!(
        strings(&partitions["cpu"]["node_names"]),
        ["cpu-c7i-8xl-[1-16]", "cpu-c7i-4xl-[1-16]"]
    );
    let total = outputs["estimated_max_hourly_cost"].as_f64().expect("a cost");
    assert!(total > 220.0 && total <= 800.0, "within the guardrail: {total}");

    // The GPU partition fails over across the three zones, a placement group in each.
    let pools = outputs["gpu_pools"]["pools"].as_array().cloned().unwrap_or_default();
    assert_eq!(pools.len(), 3, "{outputs:#}");
    let subnets: BTreeSet<String> = pools.iter().flat_map(|p| strings(&p["subnet_ids"])).collect();
    assert_eq!(subnets.len(), 3, "one zone per pool: {pools:?}");
    assert_eq!(strings(&outputs["gpu_pools"]["placement_groups"]).len(), 3);
    let gpu = ex.resource("module.gpu.hpc_partition.this");
    let rendered = gpu["rendered_partition"].as_str().unwrap_or_default();
    assert!(
        rendered.contains("Gres=gpu:h100:8")
            && rendered.contains("DefCPUPerGPU=24")
            && rendered.contains("DefMemPerGPU="),
        "{rendered}"
    );
    assert_eq!(gpu["efa_enabled"], true);

    // Both file systems exist, mounted where the outputs say; the persistent one is linked to S3.
    assert_eq!(emu.file_systems().len(), 2, "{:?}", emu.file_systems());
    let mounts = outputs["mounts"].as_object().cloned().unwrap_or_default();
    assert!(
        mounts["/fsx"].as_str().is_some_and(|m| m.ends_with(" /fsx"))
            && mounts["/scratch"].as_str().is_some_and(|m| m.ends_with(" /scratch")),
        "{mounts:?}"
    );
    let fsx = ex.resource("module.cluster.module.lustre[0].hpc_lustre_fs.this");
    assert_eq!(fsx["deployment_type"], "PERSISTENT_2");
    assert_eq!(
        fsx["data_repository"][0]["data_repository_path"],
        "s3://hpcforge-research-data/datasets/"
    );
    let policy = if fsx["release_policy"].is_array() {
        &fsx["release_policy"][0]
    } else {
        &fsx["release_policy"]
    };
    assert_eq!(policy["unaccessed_days"], 14, "{fsx}");
    let cluster = ex.resource("module.cluster.hpc_cluster.this");
    let mount_points: Vec<&str> = cluster["storage"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["mount_point"].as_str())
        .collect();
    assert_eq!(
        mount_points,
        ["/fsx", "/scratch"],
        "both file systems mounted on every node"
    );

    // Research defaults: local accounting, a login node, GPU-friendly health checks.
    let conf = outputs["slurm_conf"].as_str().unwrap_or_default();
    assert!(conf.contains("ClusterName=gpu-research"), "{conf}");
    assert!(
        conf.contains("AccountingStorageType=accounting_storage/slurmdbd"),
        "{conf}"
    );
    assert!(conf.contains("HealthCheckNodeState=IDLE,CYCLE"), "{conf}");
    assert_eq!(strings(&outputs["login_node_private_ips"]).len(), 1);
    assert_eq!(
        running_with_tag(&emu, &east, "hpcforge:cluster", "gpu-research"),
        2,
        "head and login node"
    );
    assert_no_open_ingress(&emu, &[&east]);

    ex.assert_no_changes();
    ex.destroy();
    assert_nothing_left(&emu, &[&east], "gpu-research-cluster");
}

#[test]
fn capacity_failover_applies_and_destroys_in_both_regions() {
    let emu = Emulator::start();
    let east = Scope::own("us-east-1");
    let west = Scope::own("us-west-2");
    let ex = Example::new(
        "capacity-failover",
        &emu,
        &[("ami_id", AMI.into()), ("second_region_ami_id", AMI.into())],
    );
    ex.apply();
    let outputs = ex.assert_outputs();

    // CPU: three home zones, then two zones of the second region, on demand; then all of it as Spot.
    let cpu = outputs["failover_order"]["cpu"].as_array().cloned().unwrap_or_default();
    let order: Vec<(String, String)> = cpu
        .iter()
        .map(|p| {
            (
                p["region"].as_str().unwrap_or_default().to_string(),
                p["capacity_type"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let expect = |t: &str| {
        let mut v = vec![("us-east-1".to_string(), t.to_string()); 3];
        v.extend(vec![("us-west-2".to_string(), t.to_string()); 2]);
        v
    };
    let mut wanted = expect("on_demand");
    wanted.extend(expect("spot"));
    assert_eq!(order, wanted, "{outputs:#}");
    let gpu = outputs["failover_order"]["gpu"].as_array().cloned().unwrap_or_default();
    assert_eq!(gpu.len(), 5, "GPU: five zones, on demand only: {gpu:?}");
    assert!(gpu.iter().all(|p| p["capacity_type"] == "on_demand"));
    assert_eq!(outputs["partitions"]["gpu"]["max_gpus"], 16);

    // Launch templates and placement groups exist in the second region too.
    let west_lts = xml_values(
        &ec2(&emu, &west, "Action=DescribeLaunchTemplates"),
        "launchTemplateName",
    );
    assert_eq!(
        west_lts.len(),
        2 * 2 * 2 + 2,
        "cpu: 2 pools x 2 types x (on demand + spot), gpu: 2 pools: {west_lts:?}"
    );
    let west_pgs = xml_values(&ec2(&emu, &west, "Action=DescribePlacementGroups"), "groupName");
    assert_eq!(west_pgs.len(), 2, "the GPU pools of the second region: {west_pgs:?}");
    assert_eq!(ex.count_of("hpc_network"), 2, "a network in each region");
    assert_eq!(running_with_tag(&emu, &east, "hpcforge:cluster", "failover"), 2);
    assert_no_open_ingress(&emu, &[&east, &west]);
    // The two VPCs are joined: an active connection, seen from both regions.
    for scope in [&east, &west] {
        let pcx = ec2(&emu, scope, "Action=DescribeVpcPeeringConnections");
        assert_eq!(xml_values(&pcx, "code"), vec!["active"], "{pcx}");
    }

    ex.assert_no_changes();
    ex.destroy();
    assert_nothing_left(&emu, &[&east, &west], "capacity-failover");
    let pcx = ec2(&emu, &east, "Action=DescribeVpcPeeringConnections");
    assert_eq!(xml_values(&pcx, "code"), vec!["deleted"], "{pcx}");
}

#[test]
fn multi_account_applies_and_destroys_in_each_account() {
    let emu = Emulator::start();
    let research = Scope {
        key: emu.assume_role(RESEARCH_ROLE),
        region: "us-east-1",
    };
    let teaching = Scope {
        key: emu.assume_role(TEACHING_ROLE),
        region: "us-east-1",
    };
    let own = Scope::own("us-east-1");
    let ex = Example::new(
        "multi-account",
        &emu,
        &[
            ("research_role_arn", RESEARCH_ROLE.into()),
            ("teaching_role_arn", TEACHING_ROLE.into()),
            ("teaching_external_id", "course-42".into()),
            ("research_ami_id", AMI.into()),
            ("teaching_ami_id", AMI.into()),
        ],
    );
    emu.reset_calls();
    ex.apply();
    let outputs = ex.assert_outputs();
    assert_eq!(outputs["clusters"]["research"]["cluster_name"], "research");
    assert_eq!(outputs["clusters"]["teaching"]["cluster_name"], "teaching");
    assert_eq!(
        strings(&outputs["clusters"]["teaching"]["login_node_private_ips"]).len(),
        2
    );
    assert!(outputs["research_scratch_mount"]
        .as_str()
        .is_some_and(|m| m.ends_with(" /scratch")));

    // Each cluster lives in its own account, nothing in the caller's.
    let fs = ex.resource("module.research.module.lustre[0].hpc_lustre_fs.this");
    assert_eq!(fs["owner_id"], "111111111111", "{fs}");
    assert_eq!(
        running_with_tag(&emu, &research, "hpcforge:cluster", "research"),
        2,
        "head + login"
    );
    assert_eq!(
        running_with_tag(&emu, &teaching, "hpcforge:cluster", "teaching"),
        3,
        "head + 2 login"
    );
    assert_eq!(running_with_tag(&emu, &research, "hpcforge:cluster", "teaching"), 0);
    assert_eq!(running_with_tag(&emu, &teaching, "hpcforge:cluster", "research"), 0);
    assert!(
        made(&emu, &own).is_empty(),
        "nothing in the caller's account: {:?}",
        made(&emu, &own)
    );
    let assumed = emu.calls().get("sts:AssumeRole").copied().unwrap_or(0);
    assert!(assumed >= 2, "each alias assumed its role: {:?}", emu.calls());
    assert_no_open_ingress(&emu, &[&research, &teaching]);

    ex.assert_no_changes();
    ex.destroy();
    assert_nothing_left(&emu, &[&research, &teaching, &own], "multi-account");
}

// ---------------------------------------------------------------------------------------------
// Modules consumed by their documented source
// ---------------------------------------------------------------------------------------------

/// The git source modules/<module>/README.md documents; it must pin this release's tag.
fn documented_git_source(module: &str) -> String {
    let readme =
        std::fs::read_to_string(repo_root().join("modules").join(module).join("README.md")).expect("a module README");
    let want = format!("git::{REPOSITORY}//modules/{module}?ref=v{}", env!("CARGO_PKG_VERSION"));
    assert!(
        readme.contains(&format!("source = \"{want}\"")),
        "modules/{module}/README.md does not show the source `{want}`"
    );
    want
}

/// The registry address modules/<module>/README.md documents (without a host: the public
/// registry's), with this release's version pinned beside it.
fn documented_registry_source(module: &str) -> String {
    let readme =
        std::fs::read_to_string(repo_root().join("modules").join(module).join("README.md")).expect("a module README");
    let address = if module == "slurm-cluster" {
        "hpcforge/slurm/hpc".to_string()
    } else {
        format!("hpcforge/slurm/hpc//modules/{module}")
    };
    let pinned = format!("source  = \"{address}\"\n  version = \"{}\"", env!("CARGO_PKG_VERSION"));
    assert!(
        readme.contains(&pinned),
        "modules/{module}/README.md does not show the registry source:\n{pinned}"
    );
    address
}

/// A git repository holding this tree's modules/, tagged as the modules' READMEs pin it.
fn modules_repository() -> PathBuf {
    let repo = scratch_dir("modules-repo");
    copy_tree(&repo_root().join("modules"), &repo.join("modules"));
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=hpcforge", "-c", "user.email=release@hpcforge.invalid"])
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("running git (apt-get install git)");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "-q"]);
    git(&["add", "modules"]);
    git(&["commit", "-q", "-m", "modules"]);
    git(&["tag", &format!("v{}", env!("CARGO_PKG_VERSION"))]);
    repo
}

#[test]
fn every_module_readme_shows_a_source_a_user_can_paste() {
    for module in MODULES {
        documented_git_source(module);
        documented_registry_source(module);
    }
    let listed: Vec<String> = std::fs::read_dir(repo_root().join("modules"))
        .expect("modules/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for m in &listed {
        assert!(MODULES.contains(&m.as_str()), "modules/{m} is not in MODULES");
    }
}

#[test]
fn modules_install_from_their_git_source_validate_and_plan() {
    let emu = Emulator::start();
    let clone = modules_repository();
    let mirror = package_release(
        &scratch_dir("modules-release"),
        env!("CARGO_PKG_VERSION"),
        &[("linux_amd64", &provider_dir().join("terraform-provider-hpc"))],
        None,
    );
    let examples: [(&str, Vec<(&str, String)>); 2] = [
        ("gpu-research-cluster", vec![("ami_id", AMI.into())]),
        (
            "capacity-failover",
            vec![("ami_id", AMI.into()), ("second_region_ami_id", AMI.into())],
        ),
    ];
    for (name, inputs) in examples {
        let ex = Example::from_git(name, &emu, &inputs, &clone, &mirror);
        let modules = std::fs::read_to_string(
            ex.ws
                .dir
                .join("examples")
                .join(name)
                .join(".terraform/modules/modules.json"),
        )
        .expect("init recorded no modules");
        assert!(
            modules.contains("git::file://"),
            "{name}: modules not from git: {modules}"
        );
        ex.ok(&["validate", "-no-color"]);
        let plan = ex.tf(&["plan", "-input=false", "-no-color"], true);
        assert!(
            plan.success,
            "planning examples/{name} with modules from git failed:\n{}",
            plan.text()
        );
        assert!(
            plan.stdout.contains("hpc_cluster.this will be created"),
            "{}",
            plan.text()
        );
    }
}

#[test]
fn modules_install_from_the_registry_package_validate_and_plan() {
    let emu = Emulator::start();
    let dist = scratch_dir("modules-registry");
    let mirror = package_release(
        &dist,
        env!("CARGO_PKG_VERSION"),
        &[("linux_amd64", &provider_dir().join("terraform-provider-hpc"))],
        None,
    );
    // The module registry protocol over HTTPS on loopback, as a registry serves the package.
    let https = HttpsFiles::serve(&dist.join("registry"), &dist);
    let host = https
        .url
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .to_string();
    let ex = Example::from_registry(
        "gpu-research-cluster",
        &emu,
        &[("ami_id", AMI.into())],
        &host,
        &https.cert,
        &mirror,
    );
    let modules = std::fs::read_to_string(
        ex.ws
            .dir
            .join("examples/gpu-research-cluster/.terraform/modules/modules.json"),
    )
    .expect("init recorded no modules");
    let recorded: Value = serde_json::from_str(&modules).expect("modules.json");
    let sources: Vec<&str> = recorded["Modules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["Source"].as_str())
        .collect();
    for want in [
        format!("{host}/hpcforge/slurm/hpc"),
        format!("{host}/hpcforge/slurm/hpc//modules/gpu-partition"),
    ] {
        assert!(sources.contains(&want.as_str()), "{want} not installed: {sources:?}");
    }
    ex.ok(&["validate", "-no-color"]);
    let plan = ex.tf(&["plan", "-input=false", "-no-color"], true);
    assert!(
        plan.success,
        "planning with modules from the registry failed:\n{}",
        plan.text()
    );
    assert!(
        plan.stdout.contains("hpc_cluster.this will be created"),
        "{}",
        plan.text()
    );
}
