"""Shared by the NATS workload and checker of `seqstore trace`: start the real nats-server
on a store directory and a free port, connect with nats-py, stop it with SIGKILL."""
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import nats

STREAM = "S"
SUBJECT = "s.x"


def server_bin():
    return os.environ.get("NATS_SERVER_BIN", "nats-server")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(store_dir, sync_always=False, log=None):
    """Starts nats-server with JetStream on store_dir; returns (process, port). The config
    file lives outside store_dir (only the store is checked)."""
    port = free_port()
    conf_dir = tempfile.mkdtemp(prefix="nats-conf-")
    conf = os.path.join(conf_dir, "server.conf")
    sync = "\n  sync_interval: always" if sync_always else ""
    with open(conf, "w") as f:
        f.write(f'listen: "127.0.0.1:{port}"\njetstream {{\n  store_dir: "{store_dir}"{sync}\n}}\n')
    out = open(log, "w") if log else subprocess.DEVNULL
    proc = subprocess.Popen([server_bin(), "-c", conf], stdout=out, stderr=out, stdin=subprocess.DEVNULL)
    proc.conf_dir = conf_dir  # removed by kill()
    return proc, port


async def _quiet(_e):
    # the default error callback prints a traceback for every refused connect while the
    # server starts
    pass


async def connect(proc, port, timeout=15.0):
    """Connects once the server listens; None if the server died first. The port is polled
    with plain sockets: a refused nats-py connect costs a 2 s back-off."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return None
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            await asyncio.sleep(0.005)
    else:
        return None
    try:
        return await nats.connect(
            f"nats://127.0.0.1:{port}",
            connect_timeout=2,
            allow_reconnect=False,
            max_reconnect_attempts=0,
            error_cb=_quiet,
        )
    except Exception:
        return None


def kill(proc):
    """kill -9 the server itself (not a wrapper) and reap it."""
    try:
        proc.send_signal(signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    shutil.rmtree(getattr(proc, "conf_dir", ""), ignore_errors=True)
