#!/usr/bin/env bash
# The TUI at scale: `scripts/measure-tui.sh [N] [ROUNDS]` serves N letters (default
# 1,000,000) from the demo's in-process Kafka cluster, opens the release TUI on them in a
# detached tmux session of 160×45, and prints, per round, when the first groups were on
# screen and when the status line said `scan complete` (seconds after launch, polled
# every 50 ms: ±0.05 s), and the TUI process's peak RSS (VmHWM) at that moment and after
# a further 2 s of idling. Needs tmux.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
ROUNDS=${2:-3}
command -v tmux >/dev/null || { echo "tmux is needed: apt-get install tmux" >&2; exit 1; }
# shellcheck source=lib/serve-demo.sh
source scripts/lib/serve-demo.sh
serve_demo "$N"
SESSION=dlq-measure-$$
HOME_DIR=$(mktemp -d)
trap 'tmux kill-session -t "$SESSION" 2>/dev/null || true; kill $SERVER 2>/dev/null || true; rm -rf "$HOME_DIR" "$LOG" "$LOG.times"' EXIT

hwm_mb() { awk '/^VmHWM:/ {printf "%d", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }

for round in $(seq 1 "$ROUNDS"); do
    start=$(date +%s.%N)
    tmux new-session -d -s "$SESSION" -x 160 -y 45 \
        "HOME=$HOME_DIR XDG_STATE_HOME=$HOME_DIR/state exec $BIN tui kafka://$ADDR/bench.dlq"
    pid=$(tmux list-panes -t "$SESSION" -F '#{pane_pid}')
    first="" done=""
    for _ in $(seq 1 2400); do
        screen=$(tmux capture-pane -p -t "$SESSION" 2>/dev/null || true)
        now=$(date +%s.%N)
        if [[ -z $first ]] && grep -q '▾' <<<"$screen"; then
            first=$(echo "$now - $start" | bc)
        fi
        if grep -q 'scan complete' <<<"$screen"; then
            done=$(echo "$now - $start" | bc)
            break
        fi
        kill -0 "$pid" 2>/dev/null || { echo "the TUI exited:"; echo "$screen"; exit 1; }
        sleep 0.05
    done
    at_done=$(hwm_mb "$pid")
    sleep 2
    after=$(hwm_mb "$pid")
    printf 'round %d: first groups %ss, scan complete %ss, peak RSS %s MB (%s MB 2 s later)\n' \
        "$round" "${first:-?}" "${done:-never}" "$at_done" "$after"
    tmux send-keys -t "$SESSION" q
    sleep 1
    tmux kill-session -t "$SESSION" 2>/dev/null || true
done
