#!/usr/bin/env bash
# `dlq-triage transform --dry-run` against the `jaq` CLI running the same jq program over
# the same payloads (issue #49). The peer gets the whole job at its best: jaq reads the
# 100,000 payloads as one NDJSON stream and prints each result compactly; dlq-triage
# reads them as a dump, runs the program in its sandboxed worker process, parses each
# output, compares it with the letter, finds the changed paths and masks a sample — a
# superset of jaq's work. Median of 3; wall and CPU (user + system).
#
#   scripts/bench-transform-vs-jaq.sh [LETTERS]     (default 100000; needs jaq: cargo install jaq)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
JAQ=${JAQ:-jaq}
command -v "$JAQ" >/dev/null || { echo "jaq is needed: cargo install jaq (or JAQ=/path/to/jaq)" >&2; exit 1; }
cargo build --release --quiet
BIN=${CARGO_TARGET_DIR:-target}/release/dlq-triage
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
PROGRAM='.payload.amount |= (gsub(",";"") | tonumber)'
# The letters of benches/transform.rs: ~1 KiB invoices whose amount is "1,234.56".
python3 - "$N" "$DIR" <<'PY'
import json, sys
n, d = int(sys.argv[1]), sys.argv[2]
with open(f"{d}/dump.ndjson", "w") as dump, open(f"{d}/payloads.ndjson", "w") as bare:
    for i in range(n):
        body = {
            "message_id": f"msg_{i:010}",
            "event_type": "invoice.issue.requested",
            "payload": {
                "invoice_id": f"INV-2026-{i:06}",
                "customer": {"name": "Jane Roe", "email": "jane.roe@example.com",
                             "address": {"street": "12 Rue de Rivoli", "city": "Paris"}},
                "amount": f"{1 + i % 9},{i % 1000:03}.{i % 100:02}",
                "currency": "EUR",
                "lines": [{"sku": f"SKU-{i * 7 + l:05}", "title": "Stainless steel widget", "qty": l + 1}
                          for l in range(10)],
            },
            "failure": {"reason_code": "amount_not_a_number", "consumer_version": "release-2026-09-21"},
        }
        text = json.dumps(body, separators=(",", ":"))
        bare.write(text + "\n")
        dump.write(json.dumps({"coords": {"kafka": {"topic": "invoices.dlq", "partition": 0, "offset": i}},
                               "payload": text}) + "\n")
PY
export HOME="$DIR/home" XDG_STATE_HOME="$DIR/home/state" XDG_CONFIG_HOME="$DIR/home/config"
mkdir -p "$HOME"
TIMES="$DIR/times"
. scripts/lib/measure.sh
ours() {
    "$BIN" transform "$DIR/dump.ndjson" -f 'reason=amount_not_a_number' -e "$PROGRAM" \
        --reason bench --dry-run --json
}
peer() { "$JAQ" -c "$PROGRAM" <"$DIR/payloads.ndjson"; }
# Both must do the job: every letter changed.
CHANGED=$(ours | python3 -c 'import json,sys; print(json.load(sys.stdin)["changed"])')
[ "$CHANGED" = "$N" ] || { echo "dlq-triage changed $CHANGED of $N letters" >&2; exit 1; }
[ "$(peer | wc -l)" = "$N" ] || { echo "jaq did not answer every letter" >&2; exit 1; }
for r in 1 2 3; do
    measure ours ours
    measure jaq peer
    echo "round $r: $(tail -2 "$DIR/times" | awk '{printf "%s %.2f s (cpu %.2f)  ", $1, $2, $3 + $4}')"
done
awk -v n="$N" '
    { wall[$1] = wall[$1] " " $2; cpu[$1] = cpu[$1] " " ($3 + $4) }
    function median(s,   a, k) { k = split(s, a, " "); asort(a); return a[int((k + 1) / 2)] }
    END {
        O = median(wall["ours"]); J = median(wall["jaq"]);
        printf "median of 3 rounds, %d letters\n", n;
        printf "ratio against the jaq CLI: %.2f   target >= 0.50\n", J / O;
        printf "dlq-triage transform --dry-run  %6.2f s  %9.0f letters/s  cpu %.2f s\n", O, n / O, median(cpu["ours"]);
        printf "jaq -c                          %6.2f s  %9.0f letters/s  cpu %.2f s\n", J, n / J, median(cpu["jaq"]);
    }' "$DIR/times"
