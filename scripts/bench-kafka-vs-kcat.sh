#!/usr/bin/env bash
# Load rate of `dlq-triage summary` against `kcat -C -e` on the same topic of the same
# broker, side by side in one run. The headline is the ratio against kcat reading what a
# DLQ tool must read — partition, offset, timestamp, key, headers and payload of every
# letter (`-f '%p %o %T %k %h %s\n'`); target ≥ 1.0 (issue #34). Offsets-only and
# headers-only kcat runs are printed beside it: the first is not the same job (it
# parses no header), the second is what librdkafka's header parsing costs by itself.
#
#   scripts/bench-kafka-vs-kcat.sh [LETTERS]        (default 1000000; needs kcat: apt-get install kcat)
#
# The broker is `dlq-triage demo --serve --bench N`: librdkafka's mock cluster in-process,
# seeded with N realistic dead letters (~700-byte JSON envelopes plus headers) across 256
# partitions (the mock keeps ~5 MiB per partition). Each tool reads the whole topic from the beginning to end-of-partition.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
. scripts/lib/serve-demo.sh
serve_demo "$N"

now() { date +%s.%N; }
# The first read after seeding is slower for whoever goes first: warm up, then alternate.
kcat -C -b "$ADDR" -t bench.dlq -o beginning -e -q -f '%o\n' >/dev/null
ROUNDS=3
: >"$LOG.times"
for r in $(seq 1 $ROUNDS); do
    t0=$(now); KCAT_N=$(kcat -C -b "$ADDR" -t bench.dlq -o beginning -e -q -f '%o\n' | wc -l); t1=$(now)
    OURS_N=$("$BIN" summary "kafka://$ADDR/bench.dlq" --json | awk -F'[:,]' '/"total"/ {gsub(/ /,"",$2); print $2; exit}'); t2=$(now)
    # kcat again, made to read each whole letter (key, headers, payload) as we must:
    # librdkafka parses headers only when asked, which is most of a header-heavy DLQ's cost.
    kcat -C -b "$ADDR" -t bench.dlq -o beginning -e -q -f '%p %o %T %k %h %s\n' >/dev/null; t3=$(now)
    # And made to read headers only: what librdkafka's header parsing costs by itself.
    kcat -C -b "$ADDR" -t bench.dlq -o beginning -e -q -f '%h\n' >/dev/null; t4=$(now)
    echo "$KCAT_N $OURS_N $(echo "$t1 - $t0" | bc) $(echo "$t2 - $t1" | bc) $(echo "$t3 - $t2" | bc) $(echo "$t4 - $t3" | bc)" >>"$LOG.times"
    echo "round $r: kcat $(echo "$t1 - $t0" | bc) s, dlq-triage $(echo "$t2 - $t1" | bc) s, kcat whole letters $(echo "$t3 - $t2" | bc) s, kcat headers only $(echo "$t4 - $t3" | bc) s"
done
awk -v r=$ROUNDS '
    { n1 = $1; n2 = $2; k[NR] = $3; o[NR] = $4; w[NR] = $5; h[NR] = $6 }
    END {
        asort(k); asort(o); asort(w); asort(h); m = int((r + 1) / 2); K = k[m]; O = o[m]; W = w[m]; H = h[m];
        printf "median of %d rounds\n", r;
        printf "ratio against kcat reading whole letters: %.2f   target >= 1.00\n", (n2 / O) / (n1 / W);
        printf "dlq-triage  %8d letters in %6.2f s  %9.0f letters/s  (conventions, grouping)\n", n2, O, n2 / O;
        printf "kcat        %8d letters in %6.2f s  %9.0f letters/s  (whole letters: %%p %%o %%T %%k %%h %%s)\n", n1, W, n1 / W;
        printf "kcat        %8d letters in %6.2f s  %9.0f letters/s  (headers only: %%h; ratio %.2f)\n", n1, H, n1 / H, (n2 / O) / (n1 / H);
        printf "kcat        %8d letters in %6.2f s  %9.0f letters/s  (offsets only: %%o; ratio %.2f, not the same job)\n", n1, K, n1 / K, (n2 / O) / (n1 / K);
    }' "$LOG.times"
rm -f "$LOG.times"
