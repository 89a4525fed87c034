//! Real daemons for tests: munged, MariaDB and any other child daemon, each private to one
//! test (its own directory, socket, key and ports, so tests run in parallel) and stopped when
//! dropped, also when the test fails. A missing program fails with the `apt-get install` line
//! that brings it (`.ci/run` installs them all).
//!
//! Only the standard library: the Slurm model's tests use it without building the AWS SDK.

use std::fs;
use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The program `name` on PATH or in the system's sbin and bin folders; panics naming the
/// Debian `packages` that install it.
pub fn program(name: &str, packages: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/sbin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{name}` is not installed: apt-get install {packages} (as root; .ci/run does it)"))
}

/// A TCP port free on loopback now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("binding a free port: {e}"));
    listener
        .local_addr()
        .unwrap_or_else(|e| panic!("reading the bound port: {e}"))
        .port()
}

/// Polls `ready` every 20 ms for up to `limit`; panics with `what` and `context()` when it never
/// holds or when `daemon` exits first.
fn wait_ready(
    daemon: &mut Daemon,
    what: &str,
    limit: Duration,
    ready: impl Fn() -> bool,
    context: impl Fn() -> String,
) {
    let deadline = Instant::now() + limit;
    while !ready() {
        if let Some(status) = daemon.exited() {
            panic!("{} exited ({status}) before {what}:\n{}", daemon.name, context());
        }
        assert!(
            Instant::now() < deadline,
            "{what} within {} s:\n{}",
            limit.as_secs(),
            context()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A daemon a test started, its output in a log file; stopped (TERM, then KILL) when dropped.
pub struct Daemon {
    name: String,
    child: Child,
}

impl Daemon {
    pub fn spawn(name: &str, cmd: &mut Command, log: &Path) -> Daemon {
        let out = fs::File::create(log).unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        let err = out
            .try_clone()
            .unwrap_or_else(|e| panic!("cloning {}: {e}", log.display()));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Daemon {
            name: name.to_string(),
            child,
        }
    }

    /// The exit status if the daemon has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits up to `timeout` for the daemon to exit by itself.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        if self.wait_exit(Duration::from_secs(5)).is_none() {
            eprintln!("{} (pid {pid}) ignored SIGTERM; killing it", self.name);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// munged with a fresh random key, its socket at `<dir>/munge.sock`.
pub struct Munge {
    _daemon: Daemon,
    pub socket: PathBuf,
}

impl Munge {
    pub fn start(dir: &Path) -> Munge {
        let munged = program("munged", "munge");
        fs::create_dir_all(dir.join("log")).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        let key = dir.join("munge.key");
        let mut bytes = vec![0u8; 1024];
        fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .unwrap_or_else(|e| panic!("reading /dev/urandom: {e}"));
        fs::write(&key, &bytes).unwrap_or_else(|e| panic!("writing {}: {e}", key.display()));
        fs::set_permissions(&key, fs::Permissions::from_mode(0o400)).unwrap_or_else(|e| panic!("chmod key: {e}"));
        let socket = dir.join("munge.sock");
        let log = dir.join("log/munged.out");
        let mut daemon = Daemon::spawn(
            "munged",
            Command::new(munged)
                .arg("--foreground")
                .arg(format!("--socket={}", socket.display()))
                .arg(format!("--key-file={}", key.display()))
                .arg(format!("--pid-file={}", dir.join("munged.pid").display()))
                .arg(format!("--seed-file={}", dir.join("munged.seed").display()))
                .arg(format!("--log-file={}", dir.join("log/munged.log").display())),
            &log,
        );
        wait_ready(
            &mut daemon,
            &format!("munged made {}", socket.display()),
            Duration::from_secs(10),
            || socket.exists(),
            || fs::read_to_string(&log).unwrap_or_default(),
        );
        Munge {
            _daemon: daemon,
            socket,
        }
    }
}

/// A private MariaDB: root by its socket only, and on a TCP port when the database stands for
/// one outside the cluster (an `external` accounting database).
pub struct MariaDb {
    _daemon: Daemon,
    pub socket: PathBuf,
    log: PathBuf,
}

impl MariaDb {
    /// A new database under `dir`; with `tcp_port`, also listening on every address of the
    /// host on that port (for clients in the local EC2's VPCs).
    pub fn start(dir: &Path, tcp_port: Option<u16>) -> MariaDb {
        const PACKAGES: &str = "mariadb-server";
        let datadir = dir.join("db");
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        let installed = Command::new(program("mariadb-install-db", PACKAGES))
            .arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()))
            .args([
                "--user=root",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ])
            .output()
            .unwrap_or_else(|e| panic!("running mariadb-install-db: {e}"));
        assert!(
            installed.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&installed.stderr)
        );
        let socket = dir.join("mysql.sock");
        let log = dir.join("mariadbd.log");
        let mut cmd = Command::new(program("mariadbd", PACKAGES));
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", dir.join("mariadbd.pid").display()))
            .arg("--user=root");
        match tcp_port {
            Some(port) => cmd.args([
                "--bind-address=0.0.0.0",
                "--skip-name-resolve",
                &format!("--port={port}"),
            ]),
            None => cmd.arg("--skip-networking"),
        };
        let mut daemon = Daemon::spawn("mariadbd", &mut cmd, &log);
        wait_ready(
            &mut daemon,
            "MariaDB made its socket",
            Duration::from_secs(30),
            || socket.exists(),
            || fs::read_to_string(&log).unwrap_or_default(),
        );
        MariaDb {
            _daemon: daemon,
            socket,
            log,
        }
    }

    /// Runs `statement` as the database's root; returns its unformatted output.
    pub fn sql(&self, statement: &str) -> String {
        let out = Command::new(program("mariadb", "mariadb-client"))
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .args(["-u", "root", "-N", "-B", "-e", statement])
            .output()
            .unwrap_or_else(|e| panic!("running mariadb: {e}"));
        assert!(
            out.status.success(),
            "{statement}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The server's output.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}
