# Sourced by the benchmark scripts: `measure NAME CMD…` runs CMD with its output
# discarded and appends `NAME WALL USER SYS` (seconds; bash's own `time`, so the CPU of
# the whole pipeline and its children) to $TIMES.
measure() {
    local name=$1
    shift
    local TIMEFORMAT='%R %U %S'
    local t
    t=$( { time "$@" >/dev/null 2>&1; } 2>&1 )
    echo "$name $t" >>"$TIMES"
}
