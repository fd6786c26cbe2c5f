#!/usr/bin/env bash
# Tear down the cluster up.sh started: cancel its jobs, stop each daemon by the PID up.sh
# recorded (TERM, then KILL after a grace period), remove the slurm.conf/slurmdbd.conf it wrote
# and its database and spool. Logs and timings stay in $VIPUNE_SLURM_STATE/log for inspection.
# Safe to run when nothing (or only part) is up.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$HERE/common.sh"

GRACE=${VIPUNE_SLURM_STOP_GRACE:-15}

cancel_jobs() {
    live_pid slurmctld >/dev/null || return 0
    scancel --full --quiet --user=root 2>/dev/null || true
    local deadline=$((SECONDS + GRACE))
    while [[ -n $(squeue -h -o %i 2>/dev/null) ]] && ((SECONDS < deadline)); do
        sleep 0.5
    done
}

stop() {
    local name=$1 pid deadline
    pid=$(live_pid "$name") || {
        rm -f "$PIDS/$name.pid"
        return 0
    }
    kill -TERM "$pid"
    deadline=$((SECONDS + GRACE))
    while live_pid "$name" >/dev/null && ((SECONDS < deadline)); do
        sleep 0.2
    done
    if live_pid "$name" >/dev/null; then
        log "$name (PID $pid) still running after ${GRACE} s: KILL"
        kill -KILL "$pid" || true
        sleep 0.2
    fi
    rm -f "$PIDS/$name.pid"
    log "$name (PID $pid) stopped"
}

stop_all() {
    local name
    for name in "${DAEMONS[@]}"; do
        stop "$name"
    done
}

cleanup() {
    local file
    for file in "$SLURM_ETC/slurm.conf" "$SLURM_ETC/slurmdbd.conf"; do
        if [[ -e $file ]] && grep -qxF "$MARKER" "$file"; then
            rm -f "$file"
        fi
    done
    if [[ -e $STATE/.vipune-eval-slurm ]]; then
        rm -rf "$STATE/mysql" "$STATE/spool" "$STATE/run" "$STATE/db-password"
    fi
    rmdir "$PIDS" 2>/dev/null || true
}

main() {
    if [[ ! -d $PIDS ]]; then
        log "nothing to stop ($PIDS does not exist)"
        return 0
    fi
    local t0
    t0=$(now)
    step cancel-jobs cancel_jobs
    step stop-daemons stop_all
    step cleanup cleanup
    log "down in $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s; logs in $LOGS"
}

main "$@"
