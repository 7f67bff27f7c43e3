# Sourced by the benchmark scripts: build the release binary (or take SERVE_BIN, a build
# of the caller's choosing) and start `dlq-triage demo --serve --bench N [ARGS…]` in the
# background, waiting until it has seeded; sets BIN, LOG, SERVER, ADDR (the broker) and
# REG (the demo's schema registry), and stops the demo on exit.
serve_demo() {
    local n=$1
    shift
    if [ -n "${SERVE_BIN:-}" ]; then
        BIN=$SERVE_BIN
    else
        cargo build --release --quiet
        BIN=${CARGO_TARGET_DIR:-target}/release/dlq-triage
    fi
    LOG=$(mktemp)
    "$BIN" demo --serve --bench "$n" "$@" >"$LOG" 2>&1 &
    SERVER=$!
    trap 'kill $SERVER 2>/dev/null || true; rm -f "$LOG" "$LOG.times"' EXIT
    echo "seeding $n letters…"
    for _ in $(seq 1 600); do
        grep -q '^bench:' "$LOG" && grep -q '^schema registry:' "$LOG" && grep -q '^demo broker:' "$LOG" && break
        kill -0 $SERVER 2>/dev/null || { cat "$LOG"; exit 1; }
        sleep 1
    done
    ADDR=$(awk '/^demo broker:/ {print $3}' "$LOG")
    REG=$(awk '/^schema registry:/ {print $3}' "$LOG")
    echo "broker $ADDR, registry $REG"
}

# The kcat scripts' peer: stop early, with how to get it, when it is missing.
need_kcat() {
    command -v kcat >/dev/null || { echo "kcat is needed: apt-get install kcat" >&2; exit 1; }
}
