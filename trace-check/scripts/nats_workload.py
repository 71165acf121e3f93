#!/usr/bin/env python3
"""The NATS workload for `seqstore trace`: start nats-server -js on DIR, create a file-backed
stream, publish 8 messages (each ack a mark), purge (marks before and after), kill -9 the
server. Usage: nats_workload.py DIR [default|always]; marks go to $SEQSTORE_TRACE_MARKS."""
import asyncio
import os
import sys

import nats_common as nc

store = os.path.abspath(sys.argv[1])
always = len(sys.argv) > 2 and sys.argv[2] == "always"
marks = os.open(os.environ["SEQSTORE_TRACE_MARKS"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)


def mark(m):
    os.write(marks, (m + "\n").encode())


async def main():
    proc, port = nc.start(store, always)
    try:
        nc_ = await nc.connect(proc, port, timeout=60)
        if nc_ is None:
            sys.exit("nats-server did not start")
        js = nc_.jetstream()
        await js.add_stream(name=nc.STREAM, subjects=["s.>"], storage="file")
        mark(f"stream {nc.STREAM}")
        last = 0
        for i in range(1, 9):
            ack = await js.publish(nc.SUBJECT, f"message {i}".encode())
            mark(f"acked {ack.seq}")
            last = ack.seq
        mark(f"purging {last}")
        await js.purge_stream(nc.STREAM)
        mark(f"purged {last}")
        await nc_.close()
    finally:
        nc.kill(proc)


asyncio.run(main())
