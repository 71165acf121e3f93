#!/bin/sh
# The seqstore control for `seqstore trace`: the CLI's `append x8 --sync always; purge` on DIR,
# each acknowledged sequence, the purge's start and its end written as marks.
# Usage: seqstore_workload.sh SEQSTORE_BIN DIR [ABLATION]   (ABLATION defaults to full; SEQSTORE_BIN
# must be the crash lab's build, seqstore with feature `ablation`, which has `--ablation`)
set -eu
bin="$1"; dir="$2"; abl="${3:-full}"
last=0
for i in 1 2 3 4 5 6 7 8; do
    seq=$("$bin" append --dir "$dir" --subject orders.eu --data "message $i" --sync always --ablation "$abl")
    echo "acked $seq" >> "$SEQSTORE_TRACE_MARKS"
    last=$seq
done
echo "purging $last" >> "$SEQSTORE_TRACE_MARKS"
"$bin" purge --dir "$dir" --ablation "$abl" > /dev/null
echo "purged $last" >> "$SEQSTORE_TRACE_MARKS"
