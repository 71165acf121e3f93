#!/usr/bin/env python3
"""The NATS checker for `seqstore trace`: start nats-server on $IMAGE_DIR (a free port per
job), read the stream state, publish once more. Violations (stdout, exit 1): the stream is
gone after it was acknowledged, an acknowledged message that no purge removed is missing, the
last sequence is below a marked one, or the next publish reuses a sequence."""
import asyncio
import os
import sys

import nats_common as nc

image = os.environ["IMAGE_DIR"]
marks = {"stream": [], "acked": [], "purging": [], "purged": []}
with open(os.environ["MARKS_FILE"]) as f:
    for line in f:
        kind, _, v = line.strip().partition(" ")
        marks[kind].append(v)
acked = [int(x) for x in marks["acked"]]
purging = [int(x) for x in marks["purging"]]
purged = [int(x) for x in marks["purged"]]
promised = max(acked + purging + purged, default=0)


def fail(msg):
    print(msg)
    sys.exit(1)


async def check(js):
    try:
        info = await js.stream_info(nc.STREAM)
    except Exception as e:
        if marks["stream"]:
            fail(f"stream {nc.STREAM} is gone after it was acknowledged ({type(e).__name__})")
        return
    st = info.state
    where = f"recovered first={st.first_seq} last={st.last_seq} messages={st.messages}"
    if st.last_seq < promised:
        fail(f"{where}; expected last >= {promised}")
    done = max(purged, default=0)
    floor = max(purging + purged, default=0)
    present = {}
    for seq in acked:
        try:
            await js.get_msg(nc.STREAM, seq)
            present[seq] = True
        except Exception:
            present[seq] = False
    for seq in acked:
        if seq > floor and not present[seq]:
            fail(f"{where}; acknowledged message {seq} is missing")
    old = [s for s in acked if done < s <= floor]
    kept = [s for s in old if present[s]]
    if kept and len(kept) < len(old):
        fail(f"{where}; {len(kept)} of {len(old)} messages of the purge in flight survived")
    ack = await js.publish(nc.SUBJECT, b"probe", timeout=10)
    if ack.seq <= promised:
        fail(f"{where}; the next publish got sequence {ack.seq}: sequences up to {promised} were already handed out")


async def main():
    log = os.path.join(os.path.dirname(image), "nats.log")
    # a free port is picked per job; another job may take it first: retry on a new one
    for _ in range(5):
        proc, port = nc.start(image, log=log)
        conn = await nc.connect(proc, port)
        if conn is not None:
            break
        nc.kill(proc)
        tail = open(log).read()[-400:] if os.path.exists(log) else ""
        if "address already in use" not in tail:
            fail(f"nats-server did not start on the image: {tail}")
    else:
        fail("nats-server found no free port in 5 tries")
    try:
        await check(conn.jetstream())
        await conn.close()
    finally:
        nc.kill(proc)


asyncio.run(main())
