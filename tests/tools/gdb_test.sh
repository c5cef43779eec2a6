#!/usr/bin/env bash
# Tests tools/gluon-gdb.py ("gluon fibers", "gluon bt") on a live process and on a core file.
# Usage: gdb_test.sh GDB_TARGET SOURCE_DIR
#   GDB_TARGET  the gdb_target program (tests/tools/gdb_target.cc, built -O0 -g)
#   SOURCE_DIR  the gluon source tree (for tools/gluon-gdb.py)
# Exit status: 0 pass, 1 failure, 77 skip (no gdb, no debug info, or no usable core file).
# The core file comes from the kernel when kernel.core_pattern names a file in the working
# directory; otherwise from gdb's generate-core-file. GLUON_GDB_TEST_CORE=kernel|gcore forces one.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 GDB_TARGET SOURCE_DIR" >&2
    exit 1
fi
prog=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
script=$2/tools/gluon-gdb.py
[ -x "$prog" ] || { echo "FAIL: $1 is not an executable" >&2; exit 1; }
[ -f "$script" ] || { echo "FAIL: $script not found" >&2; exit 1; }
if ! command -v gdb >/dev/null 2>&1; then
    echo "SKIP: gdb is not installed"
    exit 77
fi
if ! gdb -batch -nx -ex "ptype struct gluon::detail::fiber_hot" "$prog" 2>&1 | grep -q "cpu_context ctx"; then
    echo "SKIP: no debug info for the gluon runtime in $prog (build with -g: Debug, RelWithDebInfo)"
    exit 77
fi
work=$(mktemp -d -t gluon-gdb-test.XXXXXX) || exit 1
trap 'rm -rf "$work"' EXIT
limit=""
command -v timeout >/dev/null 2>&1 && limit="timeout 300"

out=""
fail() {
    echo "FAIL: $*" >&2
    if [ -n "$out" ] && [ -f "$out" ]; then
        echo "---- gdb output ($out):" >&2
        cat "$out" >&2
    fi
    exit 1
}

# The commands run once the target is stopped: list the fibers, then back-trace some of them,
# finding their ids by name in the listing of the same gdb run (`pipe` feeds it to awk).
cat >"$work/mkbt.awk" <<'EOF'
{ sub(/^\*/, " ") }
$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ {
    key = $4
    if ($4 == "main") key = "main" $2
    # beta by its short index (the '#' column), the others by their fiber ids.
    if (key ~ /^(beta|delta|epsilon|main0|main1)$/)
        printf "echo ==bt %s==\\n\ngluon bt %s\n", key, (key == "beta" ? $1 : $3)
}
END { print "echo ==end==\\n" }
EOF
cat >"$work/commands.gdb" <<EOF
echo ==pc before==\\n
p/x \$pc
echo ==fibers==\\n
gluon fibers
echo ==tasks==\\n
gluon tasks
pipe gluon fibers | awk -f $work/mkbt.awk > $work/bt.gdb
source $work/bt.gdb
echo ==pc after==\\n
p/x \$pc
EOF

section() {  # section NAME: the lines of $out between "==NAME==" and the next "==...=="
    awk -v s="==$1==" '$0 == s { on = 1; next } /^==.*==$/ { on = 0 } on' "$out"
}

check() {  # check MODE: the output $out of one gdb run
    local mode=$1 listing
    listing=$(section fibers)
    for name in alpha beta gamma; do
        grep -Eq "^  +[0-9]+ +0 +[0-9]+ +$name +waiting " <<<"$listing" ||
            fail "$mode: fiber $name is not listed as waiting on vCPU 0"
    done
    grep -Eq "^  +[0-9]+ +0 +[0-9]+ +epsilon +ready " <<<"$listing" ||
        fail "$mode: fiber epsilon is not listed as ready on vCPU 0"
    grep -Eq "^\* +[0-9]+ +1 +[0-9]+ +delta .*current" <<<"$listing" ||
        fail "$mode: delta is not listed as the current fiber of vCPU 1"
    grep -Eq "^\* +[0-9]+ +0 +[0-9]+ +main .*current" <<<"$listing" ||
        fail "$mode: main is not listed as the current fiber of vCPU 0"
    grep -Eq "^  +[0-9]+ +1 +[0-9]+ +main +waiting" <<<"$listing" ||
        fail "$mode: the main fiber of vCPU 1 is not listed as waiting"
    section "bt beta" | grep -q park_here_beta || fail "$mode: no park_here_beta in the bt of beta"
    section "bt beta" | grep -Eq "park_here_(alpha|gamma)" && fail "$mode: bt of beta shows another fiber"
    # The fiber's own frames are numbered from #0, on a core file too (no thread frame first).
    section "bt beta" | grep -m1 "^#" | grep -Eq "^#0 +.*(park|switch|swap|context)" ||
        fail "$mode: the bt of beta does not start at #0 in the fiber's switch-out frames"
    section "bt delta" | grep -q park_here_delta || fail "$mode: no park_here_delta in the bt of delta"
    section "bt epsilon" | grep -q "has not started" ||
        fail "$mode: gluon bt of epsilon does not say it has not started"
    section "bt main1" | grep -q park_here_vcpu1_main ||
        fail "$mode: no park_here_vcpu1_main in the bt of vCPU 1's main fiber"
    section "bt main0" | grep -Eq " main \(\) at .*gdb_target" ||
        fail "$mode: no main () in the bt of vCPU 0's main fiber"
    section tasks | grep -Eq "^ +[0-9]+ +0 .*suspended.*sleep_awaitable" ||
        fail "$mode: gluon tasks does not show a task suspended in a sleep"
    section tasks | grep -A3 "outer_task" | grep -q "inner_task" ||
        fail "$mode: gluon tasks does not show outer_task awaiting inner_task"
    section tasks | grep -q "lone_task" || fail "$mode: gluon tasks does not list lone_task"
    grep -q "^==end==$" "$out" || fail "$mode: the backtraces did not all run"
    local before after
    before=$(section "pc before" | sed 's/^\$[0-9]* = //') after=$(section "pc after" | sed 's/^\$[0-9]* = //')
    [ -n "$after" ] && [ "$before" = "$after" ] ||
        fail "$mode: \$pc differs after gluon bt (registers not restored)"
    if grep -Eq "Python Exception|Error occurred in Python" "$out"; then
        fail "$mode: the script raised an exception"
    fi
    echo "ok: $mode"
}

# 1. Live process, stopped at the breakpoint.
out=$work/live.txt
$limit gdb -batch -nx -x "$script" -ex "break gdb_breakpoint_here" -ex run \
    -x "$work/commands.gdb" "$prog" </dev/null >"$out" 2>&1
grep -q "gdb_breakpoint_here ()" "$out" || fail "live: the target did not stop at gdb_breakpoint_here"
check live

# 2. Core file.
how=${GLUON_GDB_TEST_CORE:-auto}
pattern=$(cat /proc/sys/kernel/core_pattern 2>/dev/null || echo "|")
core=""
if [ "$how" = kernel ] || { [ "$how" = auto ] && [[ $pattern != "|"* && $pattern != */* ]]; }; then
    mkdir "$work/kernel"
    (cd "$work/kernel" && ulimit -c unlimited 2>/dev/null && "$prog"; echo "exit $?") >/dev/null 2>&1
    core=$(find "$work/kernel" -type f | head -n 1)
    [ -n "$core" ] && how=kernel
fi
if [ -z "$core" ]; then
    [ "$how" = kernel ] && fail "kernel core dump requested but none was written (core_pattern: $pattern)"
    how=gcore core=$work/gcore.core out=$work/gcore.txt
    $limit gdb -batch -nx -ex "break gdb_breakpoint_here" -ex run \
        -ex "generate-core-file $core" "$prog" </dev/null >"$out" 2>&1
    [ -s "$core" ] || fail "gcore: generate-core-file wrote no core"
fi
gcore_log=$out
out=$work/core.txt
$limit gdb -batch -nx -x "$script" -x "$work/commands.gdb" "$prog" "$core" </dev/null >"$out" 2>&1
if [ $how = gcore ] && grep -q "Memory read failed for corefile section" "$gcore_log" &&
    ! grep -Eq "^[* ] +[0-9]+ +0 +[0-9]+ +beta " "$out"; then
    # Stack guard pages made with MADV_GUARD_INSTALL (Linux >= 6.13) cannot be read by gdb,
    # which then leaves the rest of that mapping, every fiber stack of the slab, out of the core.
    echo "SKIP: core-file part: gdb's generate-core-file could not save the fiber stacks"
    echo "      (guard pages); live part passed. Use a kernel core dump (core_pattern) instead."
    exit 77
fi
check "core file ($how)"
echo "PASS"
