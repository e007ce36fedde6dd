//! A private PostgreSQL server for tests: a fresh cluster from Debian's `postgresql` package
//! (installed by `make deps`) in a temporary directory, listening on a free loopback port, with
//! trust authentication. It can be stopped and started again (for outage tests) and is stopped
//! when dropped. PostgreSQL refuses to run as root, so as root it runs as the `postgres` user.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// One running (or stopped) private cluster.
pub struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    as_postgres: bool,
    // Holds the directory until the server is stopped.
    _dir: tempfile::TempDir,
}

fn bin_dir() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is installed (make deps installs Debian's postgresql)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    found.sort();
    found
        .pop()
        .expect("an initdb under /usr/lib/postgresql/*/bin")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

impl Postgres {
    /// Creates a cluster and starts it.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if as_postgres {
            let chowned = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(chowned.success(), "chown the cluster directory to postgres");
        }
        let pg = Self {
            bin: bin_dir(),
            data: dir.path().join("data"),
            port: free_port(),
            as_postgres,
            _dir: dir,
        };
        let data = pg.data.to_str().expect("utf-8 path").to_string();
        pg.run(
            "initdb",
            &["-D", &data, "-U", "postgres", "--auth=trust", "--no-sync"],
        );
        pg.start_server();
        pg
    }

    fn run(&self, tool: &str, args: &[&str]) -> Output {
        let tool = self.bin.join(tool);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&tool);
            c
        } else {
            Command::new(&tool)
        };
        let out = command.args(args).output().expect("run a PostgreSQL tool");
        assert!(
            out.status.success(),
            "{} {args:?} failed: {}{}",
            tool.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn socket_dir(&self) -> &Path {
        self.data.parent().expect("data has a parent")
    }

    /// Starts the server (again) on the same port and waits until it accepts connections.
    pub fn start_server(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.socket_dir().display()
        );
        let data = self.data.to_str().expect("utf-8 path");
        let log = self.socket_dir().join("postgres.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                data,
                "-o",
                &options,
                "-l",
                log.to_str().expect("utf-8 path"),
                "-w",
                "start",
            ],
        );
    }

    /// Stops the server (fast shutdown: open connections are closed).
    pub fn stop_server(&self) {
        let data = self.data.to_str().expect("utf-8 path");
        self.run("pg_ctl", &["-D", data, "-m", "fast", "-w", "stop"]);
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A libpq `key=value` connection string for the `postgres` database.
    pub fn connection(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }

    /// Runs SQL through psql and returns its unaligned, tuples-only output.
    pub fn psql(&self, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres"])
            .args(["-p", &self.port.to_string(), "-v", "ON_ERROR_STOP=1"])
            .args(["-X", "-A", "-t", "-c", sql])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "psql {sql:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.data.to_str().unwrap_or_default().to_string();
        let tool = self.bin.join("pg_ctl");
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&tool);
            c
        } else {
            Command::new(&tool)
        };
        // Best effort: it may already be stopped.
        let _ = command
            .args(["-D", &data, "-m", "immediate", "-w", "stop"])
            .output();
    }
}
