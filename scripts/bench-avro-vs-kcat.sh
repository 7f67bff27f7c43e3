#!/usr/bin/env bash
# What decoding Avro costs a scan: `dlq-triage summary` on N Confluent-framed Avro letters
# with the schema registry (every letter decoded, masked, previewed) and without it (the
# same letters as bytes), against kcat reading the same topic — whole letters, and, when
# this kcat is built with Avro (libserdes), decoding them through the same registry.
#
#   scripts/bench-avro-vs-kcat.sh [LETTERS]        (default 1000000; needs kcat)
#
# The broker is `dlq-triage demo --serve --bench N --bench-avro`: the mock cluster with
# `bench.dlq` seeded by cycling the demo's payouts.dlq letters (~100-byte Avro records,
# Spring headers) over 256 partitions, and the demo's in-process registry.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
. scripts/lib/serve-demo.sh
need_kcat
serve_demo "$N" --bench-avro
now() { date +%s.%N; }
AVRO_KCAT=0
if kcat -C -b "$ADDR" -t bench.dlq -o beginning -c 1 -e -q -s value=avro -r "$REG" >/dev/null 2>&1; then AVRO_KCAT=1; fi
kcat -C -b "$ADDR" -t bench.dlq -o beginning -e -q -f '%o\n' >/dev/null   # warm-up
: >"$LOG.times"
for r in 1 2 3; do
    t0=$(now); "$BIN" summary "kafka://$ADDR/bench.dlq" --schema-registry "$REG" --json >/dev/null; t1=$(now)
    "$BIN" summary "kafka://$ADDR/bench.dlq" --json >/dev/null; t2=$(now)
    kcat -C -b "$ADDR" -t bench.dlq -o beginning -e -q -f '%p %o %T %k %h %s\n' >/dev/null; t3=$(now)
    if [ $AVRO_KCAT = 1 ]; then
        kcat -C -b "$ADDR" -t bench.dlq -o beginning -e -q -s value=avro -r "$REG" -f '%p %o %T %k %h %s\n' >/dev/null
    fi
    t4=$(now)
    echo "$(echo "$t1 - $t0" | bc) $(echo "$t2 - $t1" | bc) $(echo "$t3 - $t2" | bc) $(echo "$t4 - $t3" | bc)" >>"$LOG.times"
    echo "round $r: decoded $(echo "$t1 - $t0" | bc) s, as bytes $(echo "$t2 - $t1" | bc) s, kcat whole letters $(echo "$t3 - $t2" | bc) s, kcat -s value=avro $(echo "$t4 - $t3" | bc) s"
done
awk -v n="$N" -v avro=$AVRO_KCAT '
    { d[NR] = $1; b[NR] = $2; k[NR] = $3; a[NR] = $4 }
    END {
        asort(d); asort(b); asort(k); asort(a); D = d[2]; B = b[2]; K = k[2]; A = a[2];
        printf "median of 3 rounds, %d letters\n", n;
        printf "dlq-triage decoding Avro   %6.2f s  %9.0f letters/s\n", D, n / D;
        printf "dlq-triage as bytes        %6.2f s  %9.0f letters/s\n", B, n / B;
        printf "kcat whole letters         %6.2f s  %9.0f letters/s\n", K, n / K;
        if (avro == 1) printf "kcat -s value=avro         %6.2f s  %9.0f letters/s\n", A, n / A;
        else printf "kcat -s value=avro         (this kcat has no Avro support)\n";
        printf "decoding keeps %.0f%% of the scan rate; ratio against kcat whole letters: %.2f\n", 100 * B / D, K / D;
        if (avro == 1) printf "ratio against kcat decoding Avro: %.2f\n", A / D;
    }' "$LOG.times"
rm -f "$LOG.times"
