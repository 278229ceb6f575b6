#!/usr/bin/env bash
# The whole suite as `make unit` runs it, on a busy machine (issue 44), with its 20 slowest tests.
# Below a load average of 4, two busy cores (stress-ng) run beside it; the load average is logged
# every 30 s. Usage (repo root): bench/suite_under_load.sh [LOG]   (default suite-under-load.log)
set -u
cd "$(dirname "$0")/.."
log=${1:-suite-under-load.log}
loads="$log.uptime"
: > "$loads"
(while true; do uptime >> "$loads"; sleep 30; done) & logger=$!
stress=""
load=$(cut -d' ' -f1 /proc/loadavg)
if awk "BEGIN{exit !($load < 4)}"; then
  stress-ng --cpu 2 --timeout 3600 >/dev/null 2>&1 & stress=$!
  echo "stress-ng --cpu 2 beside the run (load average $load at the start)" >> "$loads"
fi
start=$(date +%s)
.venv/bin/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder --durations=20 > "$log" 2>&1
rc=$?
echo "exit status $rc, $(( $(date +%s) - start )) s from start to end" | tee -a "$log"
[ -n "$stress" ] && kill "$stress"
kill "$logger"
awk '{print $(NF-2)}' "$loads" | tr -d , | sort -n | sed -n '1p;$p' | paste -sd' ' | sed 's/^/load average (1 min) min, max: /' | tee -a "$log"
exit $rc
