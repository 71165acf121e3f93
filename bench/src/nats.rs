//! NATS JetStream as a peer: a real `nats-server` with JetStream on a loopback port, its own
//! store directory in a tempdir, driven through the async-nats client. A cell is durable
//! publishes: each publisher publishes one message and waits for its PubAck before the next
//! (with `sync_interval: always` the server fsyncs the message before it acks).
//!
//! This compares a server through a client over loopback TCP with seqstore embedded in the
//! process: the rows say so wherever they are printed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

// the launcher nats-parity's differential test uses too: one home for it
use seqstore_nats_parity::server::free_port;
pub(crate) use seqstore_nats_parity::server::Server;

use anyhow::{bail, ensure, Context, Result};

use crate::report::Table;
use crate::util::Ctx;
use crate::BenchOpts;

/// The JSON key of the NATS table.
pub(crate) const NATS: &str = "nats_publish_msgs_per_s";
/// Its cells, in the order each round measures them.
pub(crate) const NATS_CELLS: &[&str] = &["always_1", "always_64", "default_64"];

/// The nats-server to use: `explicit` (`--nats-server`), else `$NATS_SERVER_BIN` (what .ci/run
/// sets), else `nats-server` on the PATH. `Err` says why there is none (the rows are skipped
/// with that line); an explicit path that is not a file is an error too.
pub(crate) fn find_server(explicit: Option<&Path>) -> std::result::Result<PathBuf, String> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("--nats-server {} is not a file", p.display()))
        };
    }
    if let Some(p) = std::env::var_os("NATS_SERVER_BIN").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("NATS_SERVER_BIN={} is not a file", p.display()))
        };
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("nats-server"))
                .find(|p| p.is_file())
        })
        .ok_or_else(|| {
            "nats-server is not on the PATH (nor given by --nats-server or NATS_SERVER_BIN)".into()
        })
}

/// `nats-server --version` ("nats-server: v2.15.1") as "2.15.1".
pub(crate) fn server_version(bin: &Path) -> Result<String> {
    let out = Command::new(bin)
        .arg("--version")
        .output()
        .with_context(|| format!("run {} --version", bin.display()))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    parse_version(&text).with_context(|| format!("no version in {text:?}"))
}

/// The version in `nats-server --version`'s output ("nats-server: v2.15.1" → "2.15.1").
pub(crate) fn parse_version(text: &str) -> Option<String> {
    let v = text.split_whitespace().find_map(|w| w.strip_prefix('v'))?;
    v.starts_with(|c: char| c.is_ascii_digit())
        .then(|| v.to_string())
}

/// The server's config file: loopback only, JetStream on; `always` adds
/// `sync_interval: always` (fsync every message before its ack; the default flushes to the
/// OS at once and fsyncs every 2 minutes). The store directory is given by `-sd`.
pub(crate) fn config_text(port: u16, always: bool) -> String {
    let mut s = format!(
        "# written by seqstore bench: one nats-server for one configuration\n\
         listen: \"127.0.0.1:{port}\"\n\
         jetstream {{\n"
    );
    if always {
        s.push_str("  sync_interval: always\n");
    }
    s.push_str("}\n");
    s
}

/// One node of a 3-node cluster: as [`config_text`], plus its name and a `cluster` block
/// whose routes list every node's cluster port (its own included, as NATS's docs do).
pub(crate) fn cluster_config_text(
    name: &str,
    port: u16,
    cluster_port: u16,
    routes: &[u16],
    always: bool,
) -> String {
    let mut s = format!("server_name: {name}\n") + &config_text(port, always);
    let routes: Vec<String> = (routes.iter())
        .map(|p| format!("    nats-route://127.0.0.1:{p}\n"))
        .collect();
    write!(
        s,
        "cluster {{\n  name: r3\n  listen: \"127.0.0.1:{cluster_port}\"\n  routes: [\n{}  ]\n}}\n",
        routes.concat()
    )
    .expect("a String takes every write");
    s
}

/// Starts `bin` with JetStream in `dir` (a fresh tempdir: config, `-sd` store, log) and waits
/// until it accepts connections; `always` as in [`config_text`]. A server that exits before it
/// listens (say its port was taken between choosing and its bind) is started again on another
/// port; 3 tries. Dropping the server kills the process and waits for it (on every path: an
/// error, a panic, the end of the table), then removes its directory.
pub(crate) fn start(bin: &Path, dir: tempfile::TempDir, always: bool) -> Result<Server> {
    Server::start_in(bin, dir, |port| config_text(port, always))
}

/// Three nodes of one cluster (`r3`), each in its own tempdir of `dirs`, every port chosen
/// before the first starts (the routes name them all); waits until each accepts clients. A
/// port taken in between fails the start (no retry: the ports are fresh).
pub(crate) fn start_cluster(
    bin: &Path,
    dirs: [tempfile::TempDir; 3],
    always: bool,
) -> Result<Vec<Server>> {
    let ports: Vec<(u16, u16)> = (0..3)
        .map(|_| Ok((free_port()?, free_port()?)))
        .collect::<Result<_>>()?;
    let routes: Vec<u16> = ports.iter().map(|p| p.1).collect();
    let mut nodes = Vec::new();
    for (i, dir) in dirs.into_iter().enumerate() {
        let (port, cport) = ports[i];
        let conf = cluster_config_text(&format!("n{}", i + 1), port, cport, &routes, always);
        nodes.push(Server::spawn(bin, dir, port, &conf)?);
    }
    for n in &mut nodes {
        n.wait_ready()?;
    }
    Ok(nodes)
}

/// What one cell does: `publishers` concurrent publishers, `msgs` publishes in all (each
/// publisher stops after its share, or when `max` has passed).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cell {
    /// The stream's replicas: 1 on one server, 3 on a cluster.
    pub(crate) replicas: usize,
    pub(crate) publishers: u64,
    pub(crate) msgs: u64,
    pub(crate) max: Duration,
}

/// One connected client and the runtime that drives it.
pub(crate) struct Client {
    // dropped before the runtime it runs on
    js: async_nats::jetstream::Context,
    rt: tokio::runtime::Runtime,
}

impl Client {
    pub(crate) fn connect(server: &Server) -> Result<Client> {
        let (rt, js) = seqstore_nats_parity::server::connect(&server.url())?;
        Ok(Client { js, rt })
    }

    /// Durable publishes into a fresh file-storage stream `name` (subjects `name.>`), then the
    /// stream deleted. Returns acked messages per second.
    pub(crate) fn publish_cell(&self, name: &str, cell: Cell, payload: &[u8]) -> Result<f64> {
        self.rt
            .block_on(publish_cell(&self.js, name, cell, payload))
    }
}

async fn publish_cell(
    js: &async_nats::jetstream::Context,
    name: &str,
    cell: Cell,
    payload: &[u8],
) -> Result<f64> {
    use async_nats::jetstream::stream;
    let cfg = stream::Config {
        name: name.to_string(),
        subjects: vec![format!("{name}.>")],
        storage: stream::StorageType::File,
        num_replicas: cell.replicas,
        ..Default::default()
    };
    create_stream(js, cfg).await?;
    let payload = bytes::Bytes::copy_from_slice(payload);
    // one untimed publish: the stream's first block file is created
    publish_one(js, format!("{name}.warm"), payload.clone()).await?;
    let per = cell.msgs.div_ceil(cell.publishers.max(1));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for k in 0..cell.publishers {
        let (js, payload) = (js.clone(), payload.clone());
        let subject = format!("{name}.{:06}", k % 64);
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while n < per && t.elapsed() < cell.max {
                publish_one(&js, subject.clone(), payload.clone()).await?;
                n += 1;
            }
            anyhow::Ok(n)
        }));
    }
    let mut acked = 0;
    for h in tasks {
        acked += h.await.context("publisher task")??;
    }
    let v = acked as f64 / t.elapsed().as_secs_f64().max(1e-9);
    let info = js
        .get_stream(name)
        .await
        .map_err(|e| anyhow::anyhow!("get stream {name}: {e}"))?
        .get_info()
        .await
        .map_err(|e| anyhow::anyhow!("stream info {name}: {e}"))?;
    ensure!(
        info.state.messages == acked + 1,
        "stream {name} holds {} messages, {} were acked",
        info.state.messages,
        acked + 1
    );
    js.delete_stream(name)
        .await
        .map_err(|e| anyhow::anyhow!("delete stream {name}: {e}"))?;
    Ok(v)
}

/// How long a cluster may take to elect its meta leader (and so take a stream) after start;
/// nats-server's election timeout is 4–9 s.
const META_LEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one server's refusal to create a stream is retried: creating its file store can
/// fail for a moment under load (JetStream error 10049); a refusal that lasts is an error
/// that carries the server's log.
const CREATE_RETRY: Duration = Duration::from_secs(2);

/// Creates the stream, retried every 100 ms: on a cluster until its meta leader answers, on
/// one server for [`CREATE_RETRY`].
async fn create_stream(
    js: &async_nats::jetstream::Context,
    cfg: async_nats::jetstream::stream::Config,
) -> Result<()> {
    let t = Instant::now();
    let patience = if cfg.num_replicas > 1 {
        META_LEADER_TIMEOUT
    } else {
        CREATE_RETRY
    };
    loop {
        match js.create_stream(cfg.clone()).await {
            Ok(_) => return Ok(()),
            Err(_) if t.elapsed() < patience => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => bail!("create stream {}: {e}", cfg.name),
        }
    }
}

/// Publish, then wait for the PubAck (the server has stored the message; with
/// `sync_interval: always`, fsynced it).
async fn publish_one(
    js: &async_nats::jetstream::Context,
    subject: String,
    payload: bytes::Bytes,
) -> Result<()> {
    js.publish(subject, payload)
        .await
        .map_err(|e| anyhow::anyhow!("publish: {e}"))?
        .await
        .map_err(|e| anyhow::anyhow!("PubAck: {e}"))?;
    Ok(())
}

/// The NATS table: one server with `sync_interval: always` and one with the default config,
/// both up for the whole table, and `nats_reps` rounds of the three cells (each on a fresh
/// stream). Without a nats-server the table stays empty and a note says why.
pub(crate) fn run_table(
    ctx: &mut Ctx<'_>,
    opts: &BenchOpts,
    table: &mut Table,
    notes: &mut Vec<String>,
) -> Result<()> {
    let bin = match find_server(opts.nats_server.as_deref()) {
        Ok(b) => b,
        Err(why) if opts.nats_server.is_some() => bail!("{why}"),
        Err(why) => {
            table.extra.push(("version", serde_json::Value::Null));
            let line = format!("{NATS} skipped: {why}");
            ctx.say(&line);
            notes.push(line);
            return Ok(());
        }
    };
    let version = server_version(&bin)?;
    table.extra.push(("version", version.clone().into()));
    ctx.tick(&format!(
        "{NATS}: start nats-server {version} (always, default)"
    ));
    let always = start(&bin, ctx.tempdir("nats-always")?, true)?;
    let default = start(&bin, ctx.tempdir("nats-default")?, false)?;
    let (ca, cd) = (Client::connect(&always)?, Client::connect(&default)?);
    let max = Duration::from_secs_f64(opts.nats_max_secs);
    for r in 0..opts.nats_reps {
        for &c in NATS_CELLS {
            ctx.tick(&format!("{NATS} round {}/{}: {c}", r + 1, opts.nats_reps));
            let (client, server, cell) = match c {
                "always_1" => (
                    &ca,
                    &always,
                    Cell {
                        replicas: 1,
                        publishers: 1,
                        msgs: opts.nats_msgs_1,
                        max,
                    },
                ),
                "always_64" => (
                    &ca,
                    &always,
                    Cell {
                        replicas: 1,
                        publishers: 64,
                        msgs: opts.nats_msgs_64,
                        max,
                    },
                ),
                _ => (
                    &cd,
                    &default,
                    Cell {
                        replicas: 1,
                        publishers: 64,
                        msgs: opts.nats_default_msgs,
                        max,
                    },
                ),
            };
            let v = client
                .publish_cell(&format!("bench_{c}_{r}"), cell, &ctx.payload)
                .with_context(|| format!("nats-server's log:\n{}", server.log_tail()))?;
            table.push(c, v);
        }
    }
    drop((ca, cd));
    drop((always, default));
    notes.push(format!(
        "{NATS}: nats-server {version} ({}) with JetStream on a loopback port, a file-storage \
         stream per cell; a server through its client (async-nats, one connection for all \
         publishers, each publisher awaits its PubAck before its next publish), not embedded \
         like seqstore's rows; always_* with sync_interval: always, default_64 with the \
         default config (no fsync before the ack)",
        bin.display()
    ));
    Ok(())
}
