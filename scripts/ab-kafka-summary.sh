#!/usr/bin/env bash
# Before/after for one step of issue #49: two builds of dlq-triage read the same served
# topic in turn (A B A B …), so a machine that speeds up or slows down between runs moves
# both alike. Prints each build's median wall and CPU (user + system) per 1,000,000
# letters and the change in CPU. The served letters are those of
# scripts/bench-kafka-vs-kcat.sh (the demo's mock cluster, `--bench N`).
#
#   scripts/ab-kafka-summary.sh BIN_BEFORE BIN_AFTER [LETTERS] [ROUNDS]   (1000000, 5)
set -euo pipefail
cd "$(dirname "$0")/.."
A=$1 B=$2 N=${3:-1000000} ROUNDS=${4:-5}
. scripts/lib/serve-demo.sh
SERVE_BIN=$B serve_demo "$N"
TIMES="$LOG.times"
. scripts/lib/measure.sh
# The first read after seeding is slower for whoever goes first.
"$A" summary "kafka://$ADDR/bench.dlq" --json >/dev/null
for r in $(seq 1 "$ROUNDS"); do
    measure before "$A" summary "kafka://$ADDR/bench.dlq" --json
    measure after "$B" summary "kafka://$ADDR/bench.dlq" --json
    echo "round $r: $(tail -2 "$TIMES" | awk '{printf "%s %.2f s (cpu %.2f)  ", $1, $2, $3 + $4}')"
done
awk -v n="$N" -v r="$ROUNDS" '
    { wall[$1] = wall[$1] " " $2; cpu[$1] = cpu[$1] " " ($3 + $4) }
    function median(s,   a, k) { k = split(s, a, " "); asort(a); return a[int((k + 1) / 2)] }
    END {
        m = n / 1000000;
        Bw = median(wall["before"]); Aw = median(wall["after"]);
        Bc = median(cpu["before"]); Ac = median(cpu["after"]);
        printf "median of %d rounds, %d letters\n", r, n;
        printf "before: %.2f s wall, %.2f CPU s per 1,000,000 letters\n", Bw, Bc / m;
        printf "after:  %.2f s wall, %.2f CPU s per 1,000,000 letters (%+.1f%% CPU)\n", Aw, Ac / m, (Ac - Bc) * 100 / Bc;
    }' "$TIMES"
