#!/usr/bin/env bash
# measure-watch-idle.sh --tool PATH [--seconds N]
#
# What `securestore sync watch` costs while nothing happens (Docs/performance.md, "Syncing by itself"): two watchers,
# one on a folder remote and one on a bare git repository (default fetch interval, 60 s), started, left alone for N
# seconds (600 by default) after a 5 s settle, and their CPU time over those N seconds read from /proc/<pid>/stat
# (utime + stime, in clock ticks), with their git children's (cutime + cstime). Prints
#   BENCH watch-idle-<folder|git> seconds=N cpu-ms=X children-cpu-ms=Y wakeups=Z
# where wakeups counts the watcher's voluntary context switches over the N seconds (/proc/<pid>/status).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "${SECURESTORE_HARNESS_ROOT:-}" ]; then exec "$root/Tests/Harness/with-keyring" "$0" "$@"; fi

tool=""; seconds=600
while [ $# -gt 0 ]; do
    case "$1" in
        --tool) tool=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        *) echo "usage: measure-watch-idle.sh --tool PATH [--seconds N]" >&2; exit 64 ;;
    esac
done
[ -x "$tool" ] || { echo "measure-watch-idle: no tool at '$tool'" >&2; exit 69; }

work=$(mktemp -d "${TMPDIR:-/tmp}/securestore-watch-idle.XXXXXX")
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait; rm -rf "$work"' EXIT
export XDG_DATA_HOME="$work/data" SECURESTORE_PROMPT=never
git init --quiet --bare "$work/remote.git"
for kind in folder git; do
    "$tool" --app "idle-$kind" tasks add "one task" >/dev/null 2>&1
    if [ "$kind" = folder ]; then remote=(--folder "$work/remote"); else remote=(--git "$work/remote.git"); fi
    "$tool" --app "idle-$kind" sync init "${remote[@]}" >/dev/null 2>&1
    "$tool" --app "idle-$kind" sync watch 2>"$work/$kind.log" &
    pids+=($!)
done
sleep 5
ticks=$(getconf CLK_TCK)
# utime stime cutime cstime: fields 14-17 of /proc/<pid>/stat (after the command name in parentheses).
cpu() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13, $14 + $15 }'; }
switches() { awk '/^voluntary_ctxt_switches/ { print $2 }' "/proc/$1/status"; }
declare -A before before_children before_switches
for i in 0 1; do
    read -r own children < <(cpu "${pids[$i]}"); before[$i]=$own; before_children[$i]=$children
    before_switches[$i]=$(switches "${pids[$i]}")
done
sleep "$seconds"
kinds=(folder git)
for i in 0 1; do
    read -r own children < <(cpu "${pids[$i]}")
    echo "BENCH watch-idle-${kinds[$i]} seconds=$seconds cpu-ms=$(( (own - before[$i]) * 1000 / ticks ))" \
        "children-cpu-ms=$(( (children - before_children[$i]) * 1000 / ticks ))" \
        "wakeups=$(( $(switches "${pids[$i]}") - before_switches[$i] ))"
done
