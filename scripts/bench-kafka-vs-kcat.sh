#!/usr/bin/env bash
# Load rate and CPU per letter of `dlq-triage summary` against `kcat -C -e` on the same
# topic of the same broker, side by side in one run. The headline is the ratio against
# kcat reading what a DLQ tool must read — partition, offset, timestamp, key, headers and
# payload of every letter (`-f '%p %o %T %k %h %s\n'`). Beside it:
#   - CPU seconds (user + system) per 1,000,000 letters for both: the comparison that does
#     not depend on how many cores the machine gives each tool (issue #49);
#   - a run with each tool pinned to one core (`taskset -c 0`, the broker on core 1);
#   - kcat offsets-only and headers-only: the first is not the same job (it parses no
#     header), the second is what librdkafka's header parsing costs by itself;
#   - the client floor (`examples/scan_only`, MODE=poll, when built beside the binary):
#     one thread polling with our consumer settings through rdkafka's safe API, reading
#     every field and copying none. What `summary` spends above it is our own work, a
#     figure that moves less with the hour than either tool alone.
#
#   scripts/bench-kafka-vs-kcat.sh [LETTERS]        (default 1000000; needs kcat: apt-get install kcat)
#
# The broker is `dlq-triage demo --serve --bench N`: librdkafka's mock cluster in-process,
# seeded with N realistic dead letters (~700-byte JSON envelopes plus headers) across 256
# partitions (the mock keeps ~5 MiB per partition). Each tool reads the whole topic from
# the beginning to end-of-partition; its output goes to /dev/null.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
. scripts/lib/serve-demo.sh
need_kcat
serve_demo "$N"

TIMES="$LOG.times"
. scripts/lib/measure.sh
ours() { "$BIN" summary "kafka://$ADDR/bench.dlq" --json; }
whole() { kcat -C -b "$ADDR" -t bench.dlq -o beginning -e -q -f '%p %o %T %k %h %s\n'; }
headers() { kcat -C -b "$ADDR" -t bench.dlq -o beginning -e -q -f '%h\n'; }
offsets() { kcat -C -b "$ADDR" -t bench.dlq -o beginning -e -q -f '%o\n'; }

# The first read after seeding is slower for whoever goes first: warm up (and count what
# each reads), then alternate.
KCAT_N=$(offsets | wc -l)
OURS_N=$(ours | awk -F'[:,]' '/"total"/ {gsub(/ /,"",$2); print $2; exit}')
[ "$KCAT_N" = "$OURS_N" ] || { echo "kcat read $KCAT_N letters, dlq-triage $OURS_N" >&2; exit 1; }
# The floor: the example beside the binary (`cargo build --release --example scan_only`).
FLOOR_BIN=$(dirname "$BIN")/examples/scan_only
if [ -z "${SERVE_BIN:-}" ] && [ ! -x "$FLOOR_BIN" ]; then
    cargo build --release --quiet --example scan_only
fi
floor() { MODE=poll "$FLOOR_BIN" "$ADDR" bench.dlq; }
ROUNDS=3
: >"$LOG.times"
for r in $(seq 1 $ROUNDS); do
    measure kcat offsets; measure ours ours; measure whole whole; measure headers headers
    K=4
    if [ -x "$FLOOR_BIN" ]; then measure floor floor; K=5; fi
    echo "round $r: $(tail -$K "$LOG.times" | awk '{printf "%s %.2f s (cpu %.2f)  ", $1, $2, $3 + $4}')"
done
# Pinned: each tool on core 0 alone, the broker moved to core 1 for these rounds.
taskset -a -pc 1 "$SERVER" >/dev/null
for r in $(seq 1 $ROUNDS); do
    measure pinned-ours taskset -c 0 bash -c "$(declare -f ours); BIN=$BIN ADDR=$ADDR ours"
    measure pinned-whole taskset -c 0 bash -c "$(declare -f whole); ADDR=$ADDR whole"
    echo "pinned round $r: $(tail -2 "$LOG.times" | awk '{printf "%s %.2f s  ", $1, $2}')"
done
awk -v n="$N" '
    { wall[$1] = wall[$1] " " $2; cpu[$1] = cpu[$1] " " ($3 + $4) }
    function median(s,   a, k) { k = split(s, a, " "); asort(a); return a[int((k + 1) / 2)] }
    END {
        O = median(wall["ours"]); W = median(wall["whole"]); H = median(wall["headers"]); K = median(wall["kcat"]);
        Oc = median(cpu["ours"]); Wc = median(cpu["whole"]);
        PO = median(wall["pinned-ours"]); PW = median(wall["pinned-whole"]);
        m = n / 1000000;
        printf "median of 3 rounds, %d letters\n", n;
        printf "ratio against kcat reading whole letters: %.2f   target >= 1.20\n", W / O;
        printf "CPU per 1,000,000 letters: dlq-triage %.2f s, kcat (whole letters) %.2f s: %.2fx kcat   target <= 1.50x\n", Oc / m, Wc / m, Oc / Wc;
        printf "pinned to one core (taskset -c 0): ratio %.2f   target >= 0.70 (dlq-triage %.2f s, kcat %.2f s)\n", PW / PO, PO, PW;
        if (cpu["floor"] != "") {
            F = median(cpu["floor"]);
            printf "client floor (rdkafka safe API, one thread, no copy): %.2f CPU s = %.2fx kcat; dlq-triage above it: %.2f CPU s = %.2fx kcat\n", F / m, F / Wc, (Oc - F) / m, (Oc - F) / Wc;
        }
        printf "dlq-triage  %8d letters in %6.2f s  %9.0f letters/s  (conventions, grouping)\n", n, O, n / O;
        printf "kcat        %8d letters in %6.2f s  %9.0f letters/s  (whole letters: %%p %%o %%T %%k %%h %%s)\n", n, W, n / W;
        printf "kcat        %8d letters in %6.2f s  %9.0f letters/s  (headers only: %%h; ratio %.2f)\n", n, H, n / H, H / O;
        printf "kcat        %8d letters in %6.2f s  %9.0f letters/s  (offsets only: %%o; ratio %.2f, not the same job)\n", n, K, n / K, K / O;
    }' "$LOG.times"
