# shellcheck shell=bash disable=SC2034
# Shared by up.sh and down.sh (sourced, not run): paths, logging, timed steps, PID files.
# (SC2034: the variables are used by the scripts that source this.)
export PATH=$PATH:/usr/sbin:/sbin # the daemons, for a login shell that lacks them
STATE=${VIPUNE_SLURM_STATE:-/var/tmp/vipune-eval-slurm}
PIDS=$STATE/pids
LOGS=$STATE/log
TIMINGS=$STATE/timings.log
MARKER="# Written by vipune-eval .ci/slurm/up.sh (throwaway cluster); removed by down.sh."
SLURM_ETC=${VIPUNE_SLURM_ETC:-/etc/slurm}
# Stop order; the start order is the reverse.
DAEMONS=(slurmd slurmctld slurmdbd mariadbd munged)

now() { date +%s.%N; }

log() { printf '[%s %s] %s\n' "$(basename "$0" .sh)" "$(date +%H:%M:%S)" "$*" >&2; }

# step NAME COMMAND...: run COMMAND, log how long it took (also to $TIMINGS).
step() {
    local name=$1 start end secs
    shift
    start=$(now)
    "$@"
    end=$(now)
    secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
    log "step $name: ${secs} s"
    if [[ -d $STATE ]]; then
        printf '%s\t%s\t%s\n' "$(basename "$0" .sh)" "$name" "$secs" >>"$TIMINGS"
    fi
}

# The PID recorded for a daemon, if that process is alive and still runs the daemon's binary
# (a recycled PID is not taken for the daemon; Debian's slurmctld is a link to slurmctld-wlm).
live_pid() {
    local name=$1 pid exe binary
    [[ -s $PIDS/$name.pid ]] || return 1
    pid=$(<"$PIDS/$name.pid")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
    binary=$(command -v "$name") || return 1
    [[ $exe == "$(readlink -f "$binary")" ]] || return 1
    echo "$pid"
}
