#!/usr/bin/env bash
# Stand up a throwaway single-node SLURM cluster on this machine, for CI and for trying the
# cluster profile: munge, MariaDB, slurmdbd (accounting: the executor plugin reads job states
# with sacct), slurmctld and slurmd, each started by hand in the foreground of its own session
# (no systemd needed) with its PID recorded under $VIPUNE_SLURM_STATE/pids. Tear it down with
# down.sh, which stops exactly those PIDs.
#
# Runs as root on Debian 12 (SLURM 22.05 from Debian's packages, installed here if missing).
# The node is described from `nproc` and `slurmd -C`; slurm.conf sets EnforcePartLimits=ALL so
# that a job asking for more than the node has is rejected by sbatch instead of pending for ever.
#
# Exit status: 0 the cluster is up (or already was); 2 this machine cannot host it (not root,
# packages not installable) and nothing was started; 1 any other failure (see the logs it names).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$HERE/common.sh"

PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server)
COMMANDS=(slurmctld slurmd slurmdbd sinfo sbatch sacct sacctmgr scontrol munged munge unmunge
    mariadbd mariadb-install-db mariadb mariadb-admin setpriv)
CLUSTER=${VIPUNE_SLURM_CLUSTER:-vipune-ci}
PARTITION=${VIPUNE_SLURM_PARTITION:-debug}
ACCOUNT=${VIPUNE_SLURM_ACCOUNT:-ci}
DB_PORT=${VIPUNE_SLURM_DB_PORT:-3307}
READY_TIMEOUT=${VIPUNE_SLURM_READY_TIMEOUT:-60}

cannot() {
    log "cannot start the cluster: $*"
    exit 2
}

die() {
    log "error: $*"
    exit 1
}

# wait_for WHAT COMMAND...: retry COMMAND (quietly) until it succeeds or READY_TIMEOUT passes.
wait_for() {
    local what=$1 deadline=$((SECONDS + READY_TIMEOUT))
    shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "$what not ready after ${READY_TIMEOUT} s (logs: $LOGS)"
        sleep 0.3
    done
}

# start NAME USER COMMAND...: start a daemon in the foreground of a new session, as USER (root:
# the daemon drops privileges itself), with stdout/stderr in $LOGS/NAME.out; record its PID.
start() {
    local name=$1 user=$2 pid
    shift 2
    if [[ $user == root ]]; then
        setsid "$@" </dev/null >>"$LOGS/$name.out" 2>&1 &
    else
        setsid setpriv --reuid="$user" --regid="$user" --init-groups "$@" \
            </dev/null >>"$LOGS/$name.out" 2>&1 &
    fi
    pid=$!
    echo "$pid" >"$PIDS/$name.pid"
    sleep 0.2
    live_pid "$name" >/dev/null || {
        tail -n 20 "$LOGS/$name.out" >&2 || true
        die "$name (PID $pid) exited at once (log: $LOGS/$name.out)"
    }
    log "$name started, PID $pid"
}

preflight() {
    [[ $(id -u) == 0 ]] || cannot "it needs root (daemons, /etc/slurm, apt-get)"
    local running=() name
    for name in "${DAEMONS[@]}"; do
        live_pid "$name" >/dev/null && running+=("$name")
    done
    if ((${#running[@]} == ${#DAEMONS[@]})) && scontrol ping >/dev/null 2>&1; then
        log "already up (PIDs in $PIDS): nothing to do; down.sh stops it"
        exit 0
    fi
    if ((${#running[@]})); then
        die "partly up (${running[*]} running from $PIDS): run .ci/slurm/down.sh first"
    fi
    # Daemons this script did not start (a real installation) are left alone.
    local stat pid comm state
    for stat in /proc/[0-9]*/stat; do
        # "PID (comm) STATE ...": a daemon stopped a moment ago may linger as a zombie (Z)
        # until init reaps it; that one does not count.
        read -r pid comm state _ <"$stat" 2>/dev/null || continue
        [[ $state != Z ]] || continue
        case $comm in
        "(slurmctld)" | "(slurmd)" | "(slurmdbd)" | "(munged)")
            die "${comm//[()]/} (PID $pid) is running and was not started by this script;" \
                "refusing to start a second cluster"
            ;;
        esac
    done
    if [[ -e $SLURM_ETC/slurm.conf ]] && ! grep -qxF "$MARKER" "$SLURM_ETC/slurm.conf"; then
        die "$SLURM_ETC/slurm.conf exists and was not written by this script; refusing to replace it"
    fi
}

packages() {
    local missing=() cmd
    for cmd in "${COMMANDS[@]}"; do
        command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
    done
    if ((${#missing[@]} == 0)); then
        log "packages already installed: $(dpkg-query -W -f='${Version}' slurmctld 2>/dev/null || echo '?')"
        return
    fi
    command -v apt-get >/dev/null || cannot "missing ${missing[*]} and no apt-get to install ${PACKAGES[*]}"
    log "installing ${PACKAGES[*]} (missing: ${missing[*]})"
    # Keep the packages' init scripts from starting daemons of their own (the daemons are
    # started below, by hand); Docker images already carry such a policy.
    local policy=/usr/sbin/policy-rc.d own_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
    fi
    local ok=1
    apt-get update -qq >"$LOGS/apt.log" 2>&1 || ok=0
    if ((ok)); then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${PACKAGES[@]}" >>"$LOGS/apt.log" 2>&1 || ok=0
    fi
    ((own_policy)) && rm -f "$policy"
    if ((!ok)); then
        tail -n 5 "$LOGS/apt.log" >&2 || true
        cannot "apt-get could not install ${PACKAGES[*]} (log: $LOGS/apt.log)"
    fi
    log "installed slurm $(dpkg-query -W -f='${Version}' slurmctld)"
}

configure() {
    local host node_line cpus mem name
    host=$(hostname -s)
    # `slurmd -C` prints this node as slurm.conf wants it (CPUs, topology, RealMemory).
    node_line=$(slurmd -C | head -n 1)
    [[ $node_line == NodeName=* ]] || die "slurmd -C printed no node line: $node_line"
    cpus=$(nproc)
    mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node_line")
    if [[ $node_line != *" CPUs=$cpus "* ]]; then
        # The process may use fewer CPUs than the hardware has (cgroup, taskset): give SLURM
        # only those, without the hardware topology.
        node_line="NodeName=$host CPUs=$cpus RealMemory=$mem"
    fi
    log "node: $node_line"
    mkdir -p "$SLURM_ETC" "$STATE/spool/slurmctld" "$STATE/spool/slurmd" "$STATE/run/slurm"
    chown slurm:slurm "$STATE/spool/slurmctld" "$STATE/run/slurm"
    local password
    password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    echo "$password" >"$STATE/db-password"
    chmod 600 "$STATE/db-password"
    local tmp
    tmp=$(mktemp)
    sed -e "s|@MARKER@|$MARKER|" -e "s|@CLUSTER@|$CLUSTER|" -e "s|@HOST@|$host|" \
        -e "s|@STATE@|$STATE|g" -e "s|@NODE@|$node_line State=UNKNOWN|" \
        -e "s|@PARTITION@|$PARTITION|" "$HERE/slurm.conf.in" >"$tmp"
    install -m 644 "$tmp" "$SLURM_ETC/slurm.conf"
    sed -e "s|@MARKER@|$MARKER|" -e "s|@STATE@|$STATE|g" -e "s|@DB_PORT@|$DB_PORT|" \
        -e "s|@DB_PASSWORD@|$password|" "$HERE/slurmdbd.conf.in" >"$tmp"
    install -m 600 -o slurm -g slurm "$tmp" "$SLURM_ETC/slurmdbd.conf"
    rm -f "$tmp"
    cp "$SLURM_ETC/slurm.conf" "$STATE/slurm.conf"
    for name in slurmctld slurmdbd; do
        install -m 644 -o slurm -g slurm /dev/null "$LOGS/$name.log"
    done
    install -m 644 /dev/null "$LOGS/slurmd.log"
}

munge_up() {
    if [[ ! -s /etc/munge/munge.key ]]; then
        mungekey --create --keyfile=/etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
        chmod 600 /etc/munge/munge.key
    fi
    install -d -m 755 -o munge -g munge /run/munge /var/log/munge /var/lib/munge
    start munged munge munged --foreground
    wait_for munge bash -c 'munge -n | unmunge'
}

mariadb_up() {
    local db=$STATE/mysql sock=$STATE/run/mysqld/mysqld.sock
    install -d -m 755 -o mysql -g mysql "$db" "$STATE/run/mysqld"
    install -m 640 -o mysql -g mysql /dev/null "$LOGS/mariadb.err"
    mariadb-install-db --no-defaults --user=mysql --datadir="$db" --skip-test-db \
        --auth-root-authentication-method=socket >"$LOGS/mariadb-install-db.log" 2>&1 ||
        die "mariadb-install-db failed (log: $LOGS/mariadb-install-db.log)"
    start mariadbd root mariadbd --no-defaults --user=mysql --datadir="$db" --socket="$sock" \
        --pid-file="$STATE/run/mysqld/mariadbd.pid" --port="$DB_PORT" --bind-address=127.0.0.1 \
        --skip-name-resolve --log-error="$LOGS/mariadb.err" --innodb-buffer-pool-size=64M
    wait_for mariadb mariadb-admin --no-defaults --socket="$sock" ping
    mariadb --no-defaults --socket="$sock" -u root <<SQL
CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$(<"$STATE/db-password")';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
SQL
}

slurmdbd_up() {
    start slurmdbd root slurmdbd -D
    wait_for slurmdbd sacctmgr -n list cluster
}

accounts() {
    # The cluster must be known to the accounting before slurmctld registers with it, and the
    # users who submit need an association (DefaultAccount), or sbatch refuses them.
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
    sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description="vipune-eval CI" \
        Organization=vipune-eval >/dev/null
    local user
    for user in root ${VIPUNE_SLURM_USERS:-}; do
        sacctmgr -i add user "$user" DefaultAccount="$ACCOUNT" Cluster="$CLUSTER" >/dev/null
    done
}

slurmctld_up() {
    start slurmctld root slurmctld -D
    wait_for slurmctld scontrol ping
}

node_idle() {
    [[ $(sinfo -h -n "$(hostname -s)" -o %T 2>/dev/null) == idle ]]
}

slurmd_up() {
    start slurmd root slurmd -D
    wait_for "node $(hostname -s) (idle)" node_idle
}

smoke() {
    # One real job end to end, and its state in the accounting (what the plugin reads).
    local job state deadline=$((SECONDS + READY_TIMEOUT))
    job=$(sbatch --parsable -o /dev/null -t 1 --mem 10 --wrap true)
    until state=$(sacct -X -n -P -j "$job" -o State 2>/dev/null) && [[ $state == COMPLETED ]]; do
        ((SECONDS < deadline)) || die "smoke job $job: sacct says '$state' after ${READY_TIMEOUT} s"
        sleep 0.3
    done
    log "smoke job $job COMPLETED (sacct)"
}

main() {
    local t0
    t0=$(now)
    preflight
    # A state dir left by an earlier run (its daemons are gone, see preflight) is replaced; any
    # other existing directory is not touched.
    if [[ -e $STATE ]]; then
        [[ -e $STATE/.vipune-eval-slurm ]] || die "$STATE exists and is not a state dir of up.sh"
        rm -rf "$STATE"
    fi
    mkdir -p "$PIDS" "$LOGS"
    touch "$STATE/.vipune-eval-slurm"
    chmod 755 "$STATE"
    : >"$TIMINGS"
    step packages packages
    step configure configure
    step munge munge_up
    step mariadb mariadb_up
    step slurmdbd slurmdbd_up
    step accounts accounts
    step slurmctld slurmctld_up
    step slurmd slurmd_up
    step smoke-job smoke
    log "cluster $CLUSTER up in $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s:" \
        "$(sinfo -h -o '%P %D nodes, %c CPUs, %m MB, %T')"
    printf 'up\ttotal\t%s\n' "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')" >>"$TIMINGS"
}

main "$@"
