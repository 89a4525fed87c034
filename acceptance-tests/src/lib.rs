//! Acceptance-test harness: the real `terraform` binary drives terraform-provider-hpc
//! (through a dev_overrides CLI config) against the local AWS emulator.
//!
//! - [`Emulator`]: starts `acceptance-tests/emulator/serve` on a free port, talks to its
//!   control API (call counters, fault injection) and, for out-of-band changes, to the
//!   emulated AWS APIs directly.
//! - [`Workspace`]: a scratch Terraform root module with the CLI config and AWS env set up.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub mod boot;
pub mod fixtures;

pub use hpc_test_daemons::{free_port, program, Daemon, MariaDb, Munge};

pub const REGION: &str = "us-east-1";
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);
/// The same guard for a workspace whose applies wait for booted machines (a head node replaced,
/// a login node rolled): booted tests run side by side, and one such apply outran 300 s while
/// another booted cluster upgraded Slurm beside it.
const BOOTED_COMMAND_TIMEOUT: Duration = Duration::from_secs(600);

pub fn repo_root() -> PathBuf {
    // `cargo test` sets the package's directory when it runs a test; the compile-time value
    // can name another checkout that shares the target directory (a CI clone).
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// The provider built for linux_arm64 by `make build-arm64`, beside the host's build:
/// `$HPC_PROVIDER_ARM64`, else `<target>/aarch64-unknown-linux-gnu/debug/` next to
/// [`provider_dir`]'s `<target>/debug/`.
pub fn arm64_provider() -> PathBuf {
    let path = std::env::var_os("HPC_PROVIDER_ARM64")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            provider_dir()
                .parent()
                .unwrap_or(provider_dir())
                .join("aarch64-unknown-linux-gnu/debug/terraform-provider-hpc")
        });
    assert!(
        path.is_file(),
        "{} is missing: build the provider for linux_arm64 with `make build-arm64` (it needs \
         `rustup target add aarch64-unknown-linux-gnu` and `apt-get install gcc-aarch64-linux-gnu \
         libc6-dev-arm64-cross qemu-user`), or set HPC_PROVIDER_ARM64 to one",
        path.display()
    );
    path
}

/// The folder holding a freshly built terraform-provider-hpc (built once per test run).
pub fn provider_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Ok(dir) = std::env::var("HPC_PROVIDER_DIR") {
            return PathBuf::from(dir);
        }
        let root = repo_root();
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "build",
                "-q",
                "-p",
                "terraform-provider-hpc",
                "-p",
                "hpc-node",
                "-p",
                "hpc-image",
            ])
            .current_dir(&root)
            .status()
            .expect("running cargo build for the provider");
        assert!(status.success(), "building terraform-provider-hpc failed");
        let target = std::env::var("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| root.join("target"));
        target.join("debug")
    })
}

/// The hpc-image binary built beside the provider.
pub fn hpc_image_bin() -> PathBuf {
    provider_dir().join("hpc-image")
}

/// The hpc-node binary built beside the provider.
pub fn hpc_node_bin() -> PathBuf {
    provider_dir().join("hpc-node")
}

/// hpc-image run in `dir`, baking the hpc-node built here, with AWS pointed at `emu` (when
/// given) and none of the host's AWS configuration.
pub fn hpc_image_command(dir: &Path, emu: Option<&Emulator>) -> Command {
    let mut cmd = Command::new(hpc_image_bin());
    cmd.current_dir(dir)
        .env("HPC_NODE_BINARY", hpc_node_bin())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", dir.join("no-aws-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-aws-credentials"))
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_REGION");
    if let Some(emu) = emu {
        cmd.env("AWS_ENDPOINT_URL", emu.url());
    }
    cmd
}

/// A command's stdout and stderr, for assertion messages.
pub fn output_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// What of root and `tools` (`(tool, Debian package)`) this machine lacks, named so a run by
/// hand says what to install.
pub fn missing_root_and_tools(why_root: &str, tools: &[(&str, &str)]) -> Vec<String> {
    let mut missing = Vec::new();
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if uid.ok().as_deref() != Some("0") {
        missing.push(format!("root ({why_root})"));
    }
    missing.extend(missing_tools(tools));
    missing
}

/// Packages `binaries` (platform such as `linux_amd64`, built provider) as release `version` of
/// the provider with scripts/release.py (what `make release` calls) into `dist/release/` and the
/// provider mirror `dist/mirror/`; signed with `signing` (GNUPGHOME, key id) or unsigned.
/// Returns the mirror folder.
pub fn package_release(
    dist: &Path,
    version: &str,
    binaries: &[(&str, &Path)],
    signing: Option<(&Path, &str)>,
) -> PathBuf {
    let mut cmd = Command::new("python3");
    cmd.arg(repo_root().join("scripts/release.py"))
        .args(["--version", version])
        .arg("--out")
        .arg(dist);
    for (platform, binary) in binaries {
        cmd.arg("--binary").arg(format!("{platform}={}", binary.display()));
    }
    match signing {
        Some((gnupg, key)) => cmd.env("GNUPGHOME", gnupg).args(["--gpg-key", key]),
        None => cmd.arg("--unsigned"),
    };
    let out = cmd.output().expect("running scripts/release.py (python3)");
    assert!(
        out.status.success(),
        "scripts/release.py failed:\n{}",
        output_text(&out)
    );
    dist.join("mirror")
}

/// A CLI configuration installing hpcforge/hpc from the filesystem mirror `mirror` and every
/// other provider as usual.
pub fn mirror_cli_config(mirror: &Path) -> String {
    format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [\"registry.terraform.io/hpcforge/hpc\"]\n  }}\n  direct {{\n    exclude = [\"registry.terraform.io/hpcforge/hpc\"]\n  }}\n}}\n",
        mirror.display()
    )
}

/// The `(tool, apt package)` pairs whose tool is not installed, as "tool (apt-get install package)".
pub fn missing_tools(tools: &[(&str, &str)]) -> Vec<String> {
    let mut missing = Vec::new();
    for (tool, package) in tools {
        let found = Command::new("sh")
            .args([
                "-c",
                &format!("command -v {tool} || test -x /usr/sbin/{tool} || test -x /sbin/{tool}"),
            ])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            missing.push(format!("{tool} (apt-get install {package})"));
        }
    }
    missing
}

fn require_terraform() {
    static CHECK: OnceLock<()> = OnceLock::new();
    CHECK.get_or_init(|| {
        let ok = Command::new("terraform")
            .arg("version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success());
        assert!(
            matches!(ok, Ok(true)),
            "the `terraform` binary is not on PATH: install Terraform >= 1.11 (.ci/run does), then rerun"
        );
    });
}

// ---------------------------------------------------------------------------------------------
// A tiny HTTP/1.1 client (the emulator closes every connection after one response)
// ---------------------------------------------------------------------------------------------

pub struct HttpResponse {
    pub status: u16,
    pub body: String,
}

pub fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> HttpResponse {
    let mut stream =
        TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("connecting to emulator :{port}: {e}"));
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).expect("writing HTTP request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("reading HTTP response");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    let body = if chunked { dechunk(rest) } else { rest.to_string() };
    HttpResponse { status, body }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The emulator
// ---------------------------------------------------------------------------------------------

/// The first id with this prefix in an XML answer.
fn first_id(xml: &str, prefix: &str) -> String {
    let start = xml.find(prefix).unwrap_or_else(|| panic!("no {prefix} id in: {xml}"));
    xml[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect()
}

pub struct Emulator {
    child: Child,
    pub port: u16,
}

impl Emulator {
    /// Starts a fresh emulator (its own moto state, counters and faults).
    pub fn start() -> Emulator {
        Self::start_with(&[])
    }

    /// Starts a fresh emulator with extra `serve` arguments (e.g. boot mode's).
    pub fn start_with(extra: &[&str]) -> Emulator {
        let dir = repo_root().join("acceptance-tests/emulator");
        let port_file = scratch_dir("emulator").join("port");
        let mut child = Command::new(dir.join("serve"))
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .args([
                "--fsx-create-delay",
                "0.5",
                "--fsx-update-delay",
                "0.5",
                "--fsx-delete-delay",
                "0.5",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting acceptance-tests/emulator/serve");
        let deadline = Instant::now() + Duration::from_secs(60);
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|s| s.trim().parse::<u16>().ok())
            {
                break p;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                panic!("the emulator exited ({status}) before listening:\n{err}\n(run `make emulator-venv` if its venv is missing)");
            }
            assert!(Instant::now() < deadline, "the emulator did not start within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        };
        let emu = Emulator { child, port };
        let health = http(emu.port, "GET", "/_emulator/health", &[], "");
        assert_eq!(health.status, 200, "emulator health: {}", health.body);
        emu
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn control(&self, method: &str, path: &str, body: &Value) -> Value {
        let r = http(
            self.port,
            method,
            path,
            &[("Content-Type", "application/json")],
            &body.to_string(),
        );
        assert!(
            (200..300).contains(&r.status),
            "{method} {path}: HTTP {}: {}",
            r.status,
            r.body
        );
        serde_json::from_str(&r.body).unwrap_or(Value::Null)
    }

    /// Calls per `service:Action` since start or the last reset.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        let v = self.control("GET", "/_emulator/calls", &Value::Null);
        v["calls"]
            .as_object()
            .map(|m| m.iter().map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0))).collect())
            .unwrap_or_default()
    }

    /// The most `service:Action` calls the emulator was answering at once since start or the
    /// last reset (0 when none came).
    pub fn peak_in_flight(&self, key: &str) -> u64 {
        let v = self.control("GET", "/_emulator/calls", &Value::Null);
        v["peak_in_flight"][key].as_u64().unwrap_or(0)
    }

    /// Calls that change something (everything but Describe*, List*, Get*).
    pub fn mutating_calls(&self) -> BTreeMap<String, u64> {
        self.calls()
            .into_iter()
            .filter(|(k, _)| {
                let action = k.split(':').nth(1).unwrap_or("");
                !(action.starts_with("Describe") || action.starts_with("List") || action.starts_with("Get"))
            })
            .collect()
    }

    pub fn reset_calls(&self) {
        self.control("POST", "/_emulator/calls/reset", &json!({}));
    }

    pub fn add_fault(&self, rule: Value) {
        self.control("POST", "/_emulator/faults", &rule);
    }

    /// Changes the emulator's run-time settings (delays, EC2's launch rate, ...).
    pub fn configure(&self, changes: Value) {
        self.control("POST", "/_emulator/config", &changes);
    }

    /// Sets the default account's EC2 vCPU quotas (Service Quotas codes to vCPUs) in `region`.
    pub fn set_quotas(&self, region: &str, quotas: Value) {
        self.control(
            "POST",
            "/_emulator/quotas",
            &json!({ "region": region, "quotas": quotas }),
        );
    }

    /// Seeds the random draws of `ratio` fault rules.
    pub fn seed(&self, seed: u64) {
        self.control("POST", "/_emulator/config", &json!({ "seed": seed }));
    }

    /// How many times each fault rule fired, in the order added.
    pub fn faults_fired(&self) -> Vec<u64> {
        let v = self.control("GET", "/_emulator/faults", &Value::Null);
        v["faults"]
            .as_array()
            .map(|a| a.iter().map(|f| f["fired"].as_u64().unwrap_or(0)).collect())
            .unwrap_or_default()
    }

    /// Boot mode: a spot interruption of `instance` (the notice on its IMDS now, the instance
    /// ended after `delay_s`).
    pub fn interrupt(&self, instance: &str, delay_s: u64) {
        self.control(
            "POST",
            &format!("/_emulator/instances/{instance}/interrupt"),
            &json!({ "delay_s": delay_s }),
        );
    }

    /// Boot mode: the host under `instance` fails; its machine dies at once, without a shutdown,
    /// and EC2 ends the instance (`Server.InternalError`).
    pub fn fail(&self, instance: &str) {
        self.control("POST", &format!("/_emulator/instances/{instance}/fail"), &Value::Null);
    }

    pub fn clear_faults(&self) {
        self.control("DELETE", "/_emulator/faults", &Value::Null);
    }

    /// A raw query-protocol call (IAM, STS ...) as the default account; returns the XML body.
    pub fn query(&self, service: &str, version: &str, query: &str) -> String {
        let r = http(
            self.port,
            "POST",
            "/",
            &[
                ("Content-Type", "application/x-www-form-urlencoded"),
                ("Authorization", &Self::auth(service, "testing")),
            ],
            &format!("{query}&Version={version}"),
        );
        assert_eq!(r.status, 200, "{service} {query}: {}", r.body);
        r.body
    }

    /// A JSON-protocol call (`X-Amz-Target: <target>`) and its decoded answer.
    pub fn json_call(&self, service: &str, target: &str, body: &Value) -> Value {
        self.json_call_in("us-east-1", service, target, body)
    }

    /// A JSON-protocol call in `region` and its decoded answer.
    pub fn json_call_in(&self, region: &str, service: &str, target: &str, body: &Value) -> Value {
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential=testing/20260101/{region}/{service}/aws4_request, SignedHeaders=host, Signature=0"
        );
        let r = http(
            self.port,
            "POST",
            "/",
            &[
                ("Content-Type", "application/x-amz-json-1.1"),
                ("X-Amz-Target", target),
                ("Authorization", auth.as_str()),
            ],
            &body.to_string(),
        );
        serde_json::from_str(&r.body).unwrap_or(Value::Null)
    }

    /// An SSM parameter's value parsed as JSON (None when absent or not JSON).
    pub fn parameter_json(&self, name: &str) -> Option<Value> {
        let v = self.json_call("ssm", "AmazonSSM.GetParameter", &serde_json::json!({ "Name": name }));
        serde_json::from_str(v["Parameter"]["Value"].as_str()?).ok()
    }

    /// Creates an encrypted EFS file system; returns its id.
    pub fn create_efs(&self, token: &str) -> String {
        let (status, v) = self.efs(
            "POST",
            "/2015-02-01/file-systems",
            &serde_json::json!({ "CreationToken": token, "Encrypted": true }),
        );
        v["FileSystemId"]
            .as_str()
            .unwrap_or_else(|| panic!("CreateFileSystem: {status} {v}"))
            .to_string()
    }

    /// An EFS API call (REST JSON, default account): the status and the answer.
    pub fn efs(&self, method: &str, path: &str, body: &Value) -> (u16, Value) {
        let auth = "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/elasticfilesystem/aws4_request, SignedHeaders=host, Signature=0";
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let r = http(
            self.port,
            method,
            path,
            &[("Content-Type", "application/json"), ("Authorization", auth)],
            &body,
        );
        (r.status, serde_json::from_str(&r.body).unwrap_or(Value::Null))
    }

    pub fn machines(&self) -> Vec<Value> {
        self.control("GET", "/_emulator/instances", &Value::Null)["instances"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn auth(service: &str, access_key: &str) -> String {
        format!(
            "AWS4-HMAC-SHA256 Credential={access_key}/20260101/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=0"
        )
    }

    /// A raw FSx API call (JSON 1.1), for changes made behind Terraform's back.
    pub fn fsx(&self, action: &str, body: Value) -> (u16, Value) {
        let target = format!("AWSSimbaAPIService_v20180301.{action}");
        let auth = Self::auth("fsx", "testing");
        let r = http(
            self.port,
            "POST",
            "/",
            &[
                ("Content-Type", "application/x-amz-json-1.1"),
                ("X-Amz-Target", &target),
                ("Authorization", &auth),
            ],
            &body.to_string(),
        );
        (r.status, serde_json::from_str(&r.body).unwrap_or(Value::Null))
    }

    /// Lustre file systems in the default account.
    pub fn file_systems(&self) -> Vec<Value> {
        let (status, v) = self.fsx("DescribeFileSystems", json!({}));
        assert_eq!(status, 200, "DescribeFileSystems: {v}");
        v["FileSystems"].as_array().cloned().unwrap_or_default()
    }

    /// Temporary credentials (access key id) for a role in another account, from STS.
    pub fn assume_role(&self, role_arn: &str) -> String {
        let auth = Self::auth("sts", "testing");
        let body = format!("Action=AssumeRole&Version=2011-06-15&RoleArn={role_arn}&RoleSessionName=acceptance");
        let r = http(
            self.port,
            "POST",
            "/",
            &[
                ("Content-Type", "application/x-www-form-urlencoded"),
                ("Authorization", &auth),
            ],
            &body,
        );
        assert_eq!(r.status, 200, "AssumeRole {role_arn}: {}", r.body);
        let start = r
            .body
            .find("<AccessKeyId>")
            .map(|i| i + "<AccessKeyId>".len())
            .expect("AccessKeyId");
        r.body[start..].chars().take_while(|c| *c != '<').collect()
    }

    /// A raw EC2 query call as the default account; returns the XML body.
    pub fn ec2(&self, query: &str) -> String {
        self.ec2_as("testing", query)
    }

    /// A raw EC2 query call in another region; returns the XML body.
    pub fn ec2_in(&self, region: &str, query: &str) -> String {
        self.ec2_call(&Self::auth("ec2", "testing").replace(REGION, region), query)
    }

    /// A raw EC2 query call with the given access key id (its account).
    pub fn ec2_as(&self, access_key: &str, query: &str) -> String {
        self.ec2_call(&Self::auth("ec2", access_key), query)
    }

    fn ec2_call(&self, auth: &str, query: &str) -> String {
        let body = format!("{query}&Version=2016-11-15");
        let r = http(
            self.port,
            "POST",
            "/",
            &[
                ("Content-Type", "application/x-www-form-urlencoded"),
                ("Authorization", auth),
            ],
            &body,
        );
        assert_eq!(r.status, 200, "EC2 {query}: {}", r.body);
        r.body
    }

    /// One of the default subnets of another region (default account).
    /// A public image of us-east-1 other than `ami` (a second image to change to).
    pub fn image_other_than(&self, ami: &str) -> String {
        let images = self.ec2("Action=DescribeImages&Owner.1=amazon");
        images
            .match_indices("<imageId>")
            .map(|(i, _)| images[i + 9..].chars().take_while(|c| *c != '<').collect::<String>())
            .find(|id| id != ami)
            .unwrap_or_else(|| panic!("no image other than {ami}: {images}"))
    }

    pub fn default_subnet_in(&self, region: &str) -> String {
        first_id(&self.ec2_in(region, "Action=DescribeSubnets"), "subnet-")
    }

    /// The default VPC's default security group of a region (default account).
    pub fn default_security_group_in(&self, region: &str) -> String {
        let xml = self.ec2_in(
            region,
            "Action=DescribeSecurityGroups&Filter.1.Name=group-name&Filter.1.Value.1=default",
        );
        first_id(&xml, "sg-")
    }

    /// An On-Demand Capacity Reservation (targeted) of `count` instances; returns its id.
    pub fn capacity_reservation(&self, instance_type: &str, zone: &str, count: u32) -> String {
        xml_text(
            &self.ec2(&format!(
                "Action=CreateCapacityReservation&InstanceType={instance_type}&AvailabilityZone={zone}\
                 &InstanceCount={count}&InstancePlatform=Linux/UNIX&InstanceMatchCriteria=targeted"
            )),
            "capacityReservationId",
        )
    }

    /// A Capacity Block of `count` instances for a day from `start` (RFC 3339; a past time means
    /// now), bought as users do (offering, then purchase); returns its reservation id.
    pub fn capacity_block(&self, instance_type: &str, count: u32, start: &str) -> String {
        let offering = xml_text(
            &self.ec2(&format!(
                "Action=DescribeCapacityBlockOfferings&InstanceType={instance_type}&InstanceCount={count}\
                 &CapacityDurationHours=24&StartDateRange={start}"
            )),
            "capacityBlockOfferingId",
        );
        xml_text(
            &self.ec2(&format!(
                "Action=PurchaseCapacityBlock&CapacityBlockOfferingId={offering}&InstancePlatform=Linux/UNIX"
            )),
            "capacityReservationId",
        )
    }

    /// One of the region's default subnets in the default account.
    pub fn default_subnet(&self) -> String {
        self.default_subnet_as("testing")
    }

    /// One of the region's default subnets in the account of `access_key`.
    pub fn default_subnet_as(&self, access_key: &str) -> String {
        let xml = self.ec2_as(access_key, "Action=DescribeSubnets");
        let start = xml.find("subnet-").expect("the emulator has default subnets");
        xml[start..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect()
    }
}

impl Drop for Emulator {
    /// SIGTERM first, so a booting emulator ends its machines and namespaces; SIGKILL after 90 s.
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Terraform workspaces
// ---------------------------------------------------------------------------------------------

/// The text of the first `<tag>` in an EC2 XML answer (panics naming the tag when absent).
pub fn xml_text(xml: &str, tag: &str) -> String {
    let open = format!("<{tag}>");
    let start = xml.find(&open).unwrap_or_else(|| panic!("no <{tag}> in {xml}")) + open.len();
    xml[start..].chars().take_while(|c| *c != '<').collect()
}

/// Every value of `<tag>…</tag>` in an XML answer, in order.
pub fn xml_values(xml: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    xml.split(&open)
        .skip(1)
        .filter_map(|s| s.split(&close).next().map(str::to_string))
        .collect()
}

pub fn scratch_dir(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir()
        .join("hpcforge-acceptance")
        .join(format!("{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating scratch dir");
    dir
}

#[derive(Debug)]
pub struct TfOutput {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl TfOutput {
    /// stdout and stderr together, as a person would read them.
    pub fn text(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

pub struct Workspace {
    pub dir: PathBuf,
    endpoint: String,
    extra_env: Vec<(String, String)>,
    /// How long one terraform command may take before the test fails with what it said.
    command_timeout: Duration,
}

/// The provider block every test uses unless it writes its own.
pub const PROVIDER: &str = r#"
terraform {
  required_providers {
    hpc = { source = "hpcforge/hpc" }
  }
}

provider "hpc" {
  region = "us-east-1"
  default_tags {
    tags = { project = "acceptance" }
  }
}
"#;

impl Workspace {
    pub fn new(name: &str, emu: &Emulator) -> Workspace {
        require_terraform();
        let dir = scratch_dir(name);
        let cli = format!(
            "provider_installation {{\n  dev_overrides {{\n    \"hpcforge/hpc\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
            provider_dir().display()
        );
        std::fs::write(dir.join("cli.tfrc"), cli).expect("writing cli.tfrc");
        Workspace {
            dir,
            endpoint: emu.url(),
            extra_env: Vec::new(),
            command_timeout: COMMAND_TIMEOUT,
        }
    }

    /// A workspace for a booted cluster: its terraform commands may take [`BOOTED_COMMAND_TIMEOUT`].
    pub fn booting(name: &str, emu: &Emulator) -> Workspace {
        let mut ws = Workspace::new(name, emu);
        ws.command_timeout = BOOTED_COMMAND_TIMEOUT;
        ws
    }

    /// Replaces the CLI config (dev_overrides by default), e.g. with a provider mirror.
    pub fn cli_config(&self, text: &str) {
        std::fs::write(self.dir.join("cli.tfrc"), text).expect("writing cli.tfrc");
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.extra_env.push((key.to_string(), value.to_string()));
        self
    }

    /// Writes main.tf: the standard provider block followed by `body`.
    pub fn write(&self, body: &str) {
        self.write_raw(&format!("{PROVIDER}\n{body}"));
    }

    /// Writes main.tf exactly as given.
    pub fn write_raw(&self, text: &str) {
        std::fs::write(self.dir.join("main.tf"), text).expect("writing main.tf");
    }

    /// The terraform command with this workspace's CLI config and AWS environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("terraform");
        cmd.args(args)
            .current_dir(&self.dir)
            .env("TF_CLI_CONFIG_FILE", self.dir.join("cli.tfrc"))
            .env("TF_IN_AUTOMATION", "1")
            .env("CHECKPOINT_DISABLE", "1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_REGION")
            .env_remove("TF_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd
    }

    pub fn tf(&self, args: &[&str]) -> TfOutput {
        let mut cmd = self.command(args);
        let child = cmd.spawn().expect("running terraform");
        let out = wait_with_timeout(child, self.command_timeout, args);
        TfOutput {
            success: out.status.success(),
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs `terraform apply` and SIGKILLs the provider while its next `call` (e.g.
    /// `fsx:CreateFileSystem`) is in flight: the emulator holds that call's answer for 2 s, the
    /// kill lands as soon as the call arrives, and the call then completes in the emulator as it
    /// would in AWS. Asserts the apply fails.
    pub fn apply_killed_after(&self, emu: &Emulator, call: &str) {
        const IN_FLIGHT: Duration = Duration::from_secs(2);
        let (service, action) = call.split_once(':').expect("a call is service:Action");
        emu.add_fault(json!({
            "service": service, "action": action, "latency_ms": IN_FLIGHT.as_millis() as u64, "count": 1
        }));
        let count = || emu.calls().get(call).copied().unwrap_or(0);
        let before = count();
        let mut child = self
            .command(&["apply", "-auto-approve", "-no-color", "-input=false"])
            .spawn()
            .expect("terraform apply");
        let deadline = Instant::now() + Duration::from_secs(120);
        while count() <= before {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("terraform apply ended ({status}) before {call}");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{call} was not called within 120 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // /proc's command name is cut to 15 characters.
        assert!(
            kill_children(child.id(), "terraform-provi") >= 1,
            "no provider process to kill"
        );
        let status = child.wait().expect("terraform exits");
        assert!(!status.success(), "the apply whose provider was killed succeeded");
        std::thread::sleep(IN_FLIGHT + Duration::from_millis(500));
    }

    /// Runs terraform and fails the test with its output if it fails.
    pub fn ok(&self, args: &[&str]) -> TfOutput {
        let out = self.tf(args);
        assert!(out.success, "terraform {} failed:\n{}", args.join(" "), out.text());
        out
    }

    pub fn apply(&self) -> TfOutput {
        self.ok(&["apply", "-auto-approve", "-input=false", "-no-color"])
    }

    pub fn destroy(&self) -> TfOutput {
        self.ok(&["destroy", "-auto-approve", "-input=false", "-no-color"])
    }

    pub fn plan(&self) -> TfOutput {
        self.tf(&["plan", "-input=false", "-no-color", "-detailed-exitcode"])
    }

    /// Asserts the next plan has no changes.
    pub fn assert_no_changes(&self) {
        let out = self.plan();
        assert_eq!(out.code, Some(0), "expected no changes, got:\n{}", out.text());
    }

    /// `terraform show -json` of the state.
    pub fn state(&self) -> Value {
        let out = self.ok(&["show", "-json", "-no-color"]);
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("show -json is not JSON: {e}\n{}", out.stdout))
    }

    /// The `values` of one resource in state, e.g. `hpc_lustre_fs.main`.
    pub fn resource(&self, address: &str) -> Value {
        let state = self.state();
        state["values"]["root_module"]["resources"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["address"] == address))
            .map(|r| r["values"].clone())
            .unwrap_or_else(|| panic!("{address} is not in state: {state}"))
    }

    /// The raw state file (to check secrets never reach it).
    pub fn raw_state(&self) -> String {
        std::fs::read_to_string(self.dir.join("terraform.tfstate")).unwrap_or_default()
    }
}

/// Sends SIGKILL to the children of `parent` whose command name starts with `name`
/// (from /proc); returns how many were killed. Only this test's processes are touched.
pub fn kill_children(parent: u32, name: &str) -> usize {
    let mut killed = 0;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) && comm.starts_with(name) {
            let ok = Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                killed += 1;
            }
        }
    }
    killed
}

/// What a pipe has given so far, read on another thread (so a command that outlives its limit
/// still shows what it said before it was stopped).
struct Collected(std::sync::Arc<std::sync::Mutex<Vec<u8>>>, std::thread::JoinHandle<()>);

fn collect(pipe: Option<impl Read + Send + 'static>) -> Collected {
    let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let filled = buf.clone();
    let reader = std::thread::spawn(move || {
        let Some(mut pipe) = pipe else { return };
        let mut chunk = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            filled
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend_from_slice(&chunk[..n]);
        }
    });
    Collected(buf, reader)
}

impl Collected {
    fn so_far(&self) -> Vec<u8> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn all(self) -> Vec<u8> {
        let Collected(buf, reader) = self;
        let _ = reader.join();
        let all = std::mem::take(&mut *buf.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        all
    }
}

fn wait_with_timeout(mut child: Child, timeout: Duration, args: &[&str]) -> Output {
    let stdout = collect(child.stdout.take());
    let stderr = collect(child.stderr.take());
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > timeout => {
                let _ = child.kill();
                let said = format!(
                    "{}{}",
                    String::from_utf8_lossy(&stdout.so_far()),
                    String::from_utf8_lossy(&stderr.so_far())
                );
                let tail: Vec<&str> = said.lines().rev().take(60).collect();
                panic!(
                    "terraform {} did not finish within {}s; its last lines:\n{}",
                    args.join(" "),
                    timeout.as_secs(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("waiting for terraform: {e}"),
        }
    };
    eprintln!("terraform {}: {} s", args.join(" "), started.elapsed().as_secs());
    Output {
        status,
        stdout: stdout.all(),
        stderr: stderr.all(),
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The mirror folder served over HTTPS on loopback with a self-signed certificate; killed on drop.
pub struct HttpsFiles {
    child: Child,
    /// `https://127.0.0.1:<port>/`
    pub url: String,
    /// The self-signed certificate to trust (SSL_CERT_FILE).
    pub cert: PathBuf,
}

impl HttpsFiles {
    pub fn serve(folder: &Path, dir: &Path) -> HttpsFiles {
        let (cert, key) = (dir.join("mirror-cert.pem"), dir.join("mirror-key.pem"));
        let made = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=127.0.0.1",
            ])
            .args(["-addext", "subjectAltName=IP:127.0.0.1"])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("running openssl (apt-get install openssl)");
        assert!(made.status.success(), "openssl req failed:\n{}", output_text(&made));
        let mut child = Command::new("python3")
            .arg(repo_root().join("acceptance-tests/support/https_files.py"))
            .args([folder, &cert, &key])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the HTTPS mirror");
        let mut port = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut port);
        }
        let port = port.trim().to_string();
        assert!(!port.is_empty(), "the HTTPS mirror did not start");
        HttpsFiles {
            child,
            url: format!("https://127.0.0.1:{port}/"),
            cert,
        }
    }
}

impl Drop for HttpsFiles {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
