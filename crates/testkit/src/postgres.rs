//! A real PostgreSQL for tests: `PG_TEST_URL`, or a throwaway cluster the test starts itself
//! (`initdb` in a temporary folder, the server listening only on a Unix socket in that folder),
//! stopped and removed when the [`Postgres`] value is dropped.
//!
//! PostgreSQL refuses to run as root: when the tests run as root, the cluster is made and run as
//! the `postgres` user (through `runuser`), in a folder that user owns. Without `initdb` (Debian's
//! `postgresql` package puts it in `/usr/lib/postgresql/<version>/bin`) the test says SKIPPED, or
//! fails when `PG_TEST_REQUIRED` is set (`.ci/run` sets it).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::needs;

/// Makes the PostgreSQL tests required.
pub const PG_REQUIRED: &str = "PG_TEST_REQUIRED";

/// A PostgreSQL server for one test.
pub struct Postgres {
    /// Connection string (`host=… port=… user=… dbname=…`, or `PG_TEST_URL`).
    pub url: String,
    /// The same server over TCP on 127.0.0.1, when the test started it.
    loopback: Option<String>,
    cluster: Option<Cluster>,
}

/// Why a throwaway cluster could not start (said in the SKIPPED line).
#[derive(Debug)]
struct StartError(String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for StartError {
    fn from(why: String) -> Self {
        Self(why)
    }
}

impl From<std::io::Error> for StartError {
    fn from(e: std::io::Error) -> Self {
        Self(e.to_string())
    }
}

/// Whether the cluster flushes commits to disk.
#[derive(Debug, Clone, Copy)]
enum Flush {
    On,
    Off,
}

struct Cluster {
    port: u16,
    dir: tempfile::TempDir,
    bin: PathBuf,
    as_postgres: bool,
    /// The server's options (`pg_ctl -o`), to start it again the same way.
    options: String,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres").field("url", &self.url).finish()
    }
}

impl Postgres {
    /// Restarts the server as a crash would (every connection cut, the server down for `down`),
    /// keeping its data. Panics for a server the kit did not start (`PG_TEST_URL`): a test that
    /// restarts the database needs its own ([`Postgres::can_restart`]).
    pub fn restart(&self, down: std::time::Duration) {
        let Some(cluster) = self.cluster.as_ref() else {
            panic!("a server given by PG_TEST_URL cannot be restarted by a test");
        };
        if let Err(e) = cluster.restart(down) {
            panic!("restarting the test cluster: {e}");
        }
    }

    /// Whether [`Postgres::restart`] can restart this server.
    pub fn can_restart(&self) -> bool {
        self.cluster.is_some()
    }

    /// The server over TCP on 127.0.0.1 (as a remote database is reached), else [`store_url`].
    ///
    /// [`store_url`]: Postgres::store_url
    pub fn loopback_url(&self) -> String {
        self.loopback.clone().unwrap_or_else(|| self.store_url())
    }

    /// The server of `PG_TEST_URL`, else a new throwaway cluster that does not flush to disk (fast,
    /// for tests); `None` (after saying SKIPPED) when neither is possible.
    pub fn start() -> Option<Self> {
        Self::start_with(Flush::Off)
    }

    /// Like [`Postgres::start`], the cluster flushing commits to disk as a production server does
    /// (for benchmarks).
    pub fn start_durable() -> Option<Self> {
        Self::start_with(Flush::On)
    }

    fn start_with(flush: Flush) -> Option<Self> {
        if let Some(url) = std::env::var("PG_TEST_URL").ok().filter(|u| !u.is_empty()) {
            return Some(Self {
                url,
                loopback: None,
                cluster: None,
            });
        }
        let Some(bin) = find_bin() else {
            return needs::skip_for(
                PG_REQUIRED,
                "PostgreSQL's initdb (apt-get install postgresql), or PG_TEST_URL=postgres://…",
            );
        };
        match Cluster::start(bin, flush) {
            Ok((cluster, url)) => Some(Self {
                loopback: Some(format!(
                    "postgresql://postgres@127.0.0.1:{}/postgres",
                    cluster.port
                )),
                url,
                cluster: Some(cluster),
            }),
            Err(why) => needs::skip_for(
                PG_REQUIRED,
                &format!("a throwaway PostgreSQL cluster, which could not start: {why}"),
            ),
        }
    }
}

impl Postgres {
    /// The same server as a `postgresql://` URL (what `--store` takes): [`Postgres::url`]
    /// itself when it is one, else its `host=… port=… user=… dbname=…` pairs as a URL, a Unix
    /// socket's folder percent-encoded as the host (`postgresql://postgres@%2Ftmp%2Fpg/postgres`).
    pub fn store_url(&self) -> String {
        if self.url.starts_with("postgres://") || self.url.starts_with("postgresql://") {
            return self.url.clone();
        }
        let mut pairs: Vec<(&str, &str)> = self
            .url
            .split_whitespace()
            .filter_map(|pair| pair.split_once('='))
            .collect();
        let mut take = |key: &str| {
            let at = pairs.iter().position(|(k, _)| *k == key)?;
            Some(pairs.remove(at).1)
        };
        let user = take("user").map(percent_encode);
        let password = take("password").map(percent_encode);
        let host = take("host").map(percent_encode).unwrap_or_default();
        let port = take("port").map(|p| format!(":{p}")).unwrap_or_default();
        let dbname = take("dbname").map(percent_encode).unwrap_or_default();
        let userinfo = match (user, password) {
            (Some(u), Some(p)) => format!("{u}:{p}@"),
            (Some(u), None) => format!("{u}@"),
            _ => String::new(),
        };
        let query: Vec<String> = pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", percent_encode(v)))
            .collect();
        let query = if query.is_empty() {
            String::new()
        } else {
            format!("?{}", query.join("&"))
        };
        format!("postgresql://{userinfo}{host}{port}/{dbname}{query}")
    }
}

/// `text` with every byte but RFC 3986's unreserved characters percent-encoded.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(cluster) = &self.cluster {
            let data = cluster.dir.path().join("data");
            let _ = cluster
                .command("pg_ctl")
                .arg("-D")
                .arg(&data)
                .args(["-m", "immediate", "-w", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn find_bin() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    candidates.sort();
    candidates.pop()
}

/// Whether this process runs as root (its real uid, from `/proc`, else `id -u`).
fn is_root() -> bool {
    let from_proc = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().next().map(|uid| uid == "0"))
        });
    from_proc.unwrap_or_else(|| {
        Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
    })
}

impl Cluster {
    fn start(bin: PathBuf, flush: Flush) -> Result<(Self, String), StartError> {
        let as_postgres = is_root();
        let dir = tempfile::Builder::new()
            .prefix("pg-test-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let mut cluster = Self {
            port: free_port()?,
            dir,
            bin,
            as_postgres,
            options: String::new(),
        };
        if as_postgres {
            cluster.chown()?;
        }
        let data = cluster.dir.path().join("data");
        cluster.run(
            cluster.command("initdb").arg("-D").arg(&data).args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ]),
            "initdb",
        )?;
        let socket = cluster.dir.path().display().to_string();
        let fsync = match flush {
            Flush::On => "on",
            Flush::Off => "off",
        };
        // The port was free when it was picked; by the time the server binds it (after initdb)
        // another process may have taken it: then another port is tried.
        let mut attempts = 0;
        loop {
            let port = cluster.port;
            cluster.options = format!(
                "-c listen_addresses='127.0.0.1' -c unix_socket_directories='{socket}' -p {port} -c fsync={fsync} -c max_connections=100"
            );
            match cluster.start_server() {
                Ok(()) => break,
                Err(e) if attempts < 3 && e.to_string().contains("Address already in use") => {
                    attempts += 1;
                    cluster.port = free_port()?;
                }
                Err(e) => return Err(e),
            }
        }
        let port = cluster.port;
        let url = format!("host={socket} port={port} user=postgres dbname=postgres");
        Ok((cluster, url))
    }

    fn start_server(&self) -> Result<(), StartError> {
        self.run(
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.dir.path().join("data"))
                .args(["-w", "-t", "60", "-o", &self.options, "-l"])
                .arg(self.dir.path().join("log"))
                .arg("start"),
            "pg_ctl start",
        )
    }

    /// Stops the server at once (every connection is cut, as in a crash), then, `down` later,
    /// starts it again on the same data, port and socket.
    fn restart(&self, down: std::time::Duration) -> Result<(), StartError> {
        self.run(
            self.command("pg_ctl")
                .arg("-D")
                .arg(self.dir.path().join("data"))
                .args(["-m", "immediate", "-w", "stop"]),
            "pg_ctl stop",
        )?;
        std::thread::sleep(down);
        self.start_server()
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }

    fn run(&self, cmd: &mut Command, what: &str) -> Result<(), StartError> {
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        let log = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
        Err(StartError(format!(
            "{what} failed: {}{}{log}",
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        )))
    }

    /// Gives the folder to the `postgres` user (the server runs as that user).
    fn chown(&self) -> Result<(), StartError> {
        let status = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(self.dir.path())
            .status()
            .map_err(|e| format!("chown: {e}"))?;
        if !status.success() {
            return Err(StartError(
                "chown postgres failed (is there a postgres user?)".into(),
            ));
        }
        Ok(())
    }
}

/// A TCP port nobody listens on now (the server's socket file is named after it).
fn free_port() -> Result<u16, StartError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::Postgres;

    fn url_of(url: &str) -> String {
        Postgres {
            url: url.to_string(),
            loopback: None,
            cluster: None,
        }
        .store_url()
    }

    #[test]
    fn the_store_url_names_the_same_server() {
        assert_eq!(
            url_of("host=/tmp/pg-test-x port=5433 user=postgres dbname=postgres"),
            "postgresql://postgres@%2Ftmp%2Fpg-test-x:5433/postgres"
        );
        assert_eq!(
            url_of("host=db user=u password=p@ss dbname=d sslmode=disable"),
            "postgresql://u:p%40ss@db/d?sslmode=disable"
        );
        assert_eq!(url_of("postgres://u@h/d"), "postgres://u@h/d");
    }
}
