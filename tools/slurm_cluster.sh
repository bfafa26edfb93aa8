#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for testing the SLURM profile (tests/test_slurm.py):
# munge, slurmctld and slurmd from Debian's packages, and with `accounting` also MariaDB and
# slurmdbd. Runs as root; everything it writes (config, state, logs, PIDs, the database) lives in
# one folder, $LENGEN_SLURM_DIR (default /tmp/lengen-slurm), and `down` stops it by PID.
#
#   tools/slurm_cluster.sh up [accounting]   # install if missing, start, wait for the node
#   source "$LENGEN_SLURM_DIR/env"           # SLURM_CONF for sbatch/squeue/sacct (and snakemake)
#   tools/slurm_cluster.sh down              # stop every daemon it started, remove the folder
#
# The node is this machine (its CPUs, its memory less 1 GB) in one partition, `local`. Without
# accounting, `sacct` answers "accounting storage is disabled" (use workflow/profiles/
# slurm-squeue); with it, job states come from slurmdbd, as on most production clusters.
set -euo pipefail

DIR=${LENGEN_SLURM_DIR:-/tmp/lengen-slurm}
HOST=$(hostname -s)

log() { echo "slurm_cluster: $*" >&2; }

install() {  # Debian packages, only those missing
    local want=(munge slurm-wlm slurm-client)
    [[ ${1:-} == accounting ]] && want+=(slurmdbd mariadb-server)
    local missing=()
    for p in "${want[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    ((${#missing[@]})) || return 0
    log "installing ${missing[*]}"
    # no service starts from the packages' scripts: this script starts what it needs
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' RETURN
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >"$DIR/apt.log" 2>&1 ||
        { apt-get update -q >>"$DIR/apt.log" 2>&1 &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >>"$DIR/apt.log" 2>&1; }
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local limit=$1 what=$2; shift 2
    for ((i = 0; i < limit * 2; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
    log "gave up waiting for $what after ${limit}s; logs in $DIR"; return 1
}

start_munge() {
    [[ -s /etc/munge/munge.key ]] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge "$DIR/munge" && chown munge:munge /run/munge "$DIR/munge"
    runuser -u munge -- /usr/sbin/munged --pid-file="$DIR/munge/munged.pid" \
        --log-file="$DIR/munge/munged.log" --socket=/run/munge/munge.socket.2
    wait_for 20 munge munge -n
}

start_database() {  # MariaDB in $DIR/db (its user's) on 127.0.0.1:$DB_PORT, a user for slurmdbd
    local db="$DIR/db"
    mkdir -p "$db" && chown mysql:mysql "$db"
    mariadb-install-db --user=mysql --datadir="$db/data" --auth-root-authentication-method=normal \
        >"$DIR/mariadb-install.log" 2>&1
    /usr/sbin/mariadbd --user=mysql --datadir="$db/data" --socket="$db/mysql.sock" \
        --port="$DB_PORT" --bind-address=127.0.0.1 --pid-file="$db/mariadb.pid" \
        --log-error="$db/mariadb.log" --innodb-buffer-pool-size=64M >"$DIR/mariadbd.out" 2>&1 &
    wait_for 60 MariaDB mariadb --socket="$db/mysql.sock" -uroot -e "select 1"
    mariadb --socket="$db/mysql.sock" -uroot -e "
        CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'lengen';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"
    cat >"$DIR/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$DIR/slurmdbd.pid
LogFile=$DIR/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=lengen
StorageLoc=slurm_acct_db
EOF
    chmod 600 "$DIR/slurmdbd.conf"
    SLURM_CONF="$DIR/slurm.conf" /usr/sbin/slurmdbd  # reads slurmdbd.conf beside SLURM_CONF
    wait_for 60 slurmdbd bash -c "SLURM_CONF=$DIR/slurm.conf sacctmgr -n list cluster"
    SLURM_CONF="$DIR/slurm.conf" sacctmgr -i add cluster lengen >/dev/null
    SLURM_CONF="$DIR/slurm.conf" sacctmgr -i add account lengen Cluster=lengen >/dev/null
    SLURM_CONF="$DIR/slurm.conf" sacctmgr -i add user root Account=lengen DefaultAccount=lengen \
        >/dev/null
}

write_slurm_conf() {  # write_slurm_conf accounting|none
    local cpus mem
    cpus=$(nproc)
    mem=$(($(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) - 1000))
    local storage="AccountingStorageType=accounting_storage/none"
    [[ $1 == accounting ]] && storage="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoreFlags=job_comment
JobAcctGatherType=jobacct_gather/linux"
    cat >"$DIR/slurm.conf" <<EOF
ClusterName=lengen
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
# finished jobs stay in squeue for an hour (tests/test_slurm.py reads them there)
MinJobAge=3600
SlurmctldTimeout=30
SlurmdTimeout=30
$storage
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
}

up() {
    local mode=${1:-none}
    [[ $mode == accounting || $mode == none ]] || { log "up [accounting]"; exit 2; }
    [[ $EUID -eq 0 ]] || { log "needs root (it starts daemons and installs packages)"; exit 2; }
    [[ -e $DIR/env ]] && { log "already up ($DIR); run: $0 down"; exit 1; }
    mkdir -p "$DIR/state" "$DIR/spool"
    trap '[[ -e $DIR/env ]] || { log "failed; stopping what started"; down; }' EXIT
    CTLD_PORT=${LENGEN_SLURM_PORT:-16817}; SLURMD_PORT=$((CTLD_PORT + 1))
    DBD_PORT=$((CTLD_PORT + 2)); DB_PORT=$((CTLD_PORT + 3))
    install "$mode"
    write_slurm_conf "$mode"
    start_munge
    [[ $mode == accounting ]] && start_database
    export SLURM_CONF="$DIR/slurm.conf"
    # The jobstep plugin drops every SLURM_* variable (SLURM_CONF too) before its srun inside a
    # job, so srun there reads the default path: link it to ours (unless a real one is there).
    mkdir -p /etc/slurm
    if [[ ! -e /etc/slurm/slurm.conf ]]; then
        ln -s "$DIR/slurm.conf" /etc/slurm/slurm.conf && touch "$DIR/linked-etc"
    fi
    /usr/sbin/slurmctld -c        # -c: a clean start (no state from an earlier cluster)
    wait_for 60 slurmctld scontrol ping
    /usr/sbin/slurmd
    wait_for 60 "the node to come up" bash -c "sinfo -h -o %T | grep -qx idle"
    echo "export SLURM_CONF=$DIR/slurm.conf" >"$DIR/env"
    log "up: partition local, $(nproc) CPUs, accounting: $mode; source $DIR/env"
}

down() {
    [[ -d $DIR ]] || return 0
    export SLURM_CONF="$DIR/slurm.conf"
    [[ -e $DIR/slurm.conf ]] && scancel --user=root >/dev/null 2>&1 || true
    for name in slurmd slurmctld slurmdbd db/mariadb munge/munged; do
        local pidfile="$DIR/$name.pid"
        [[ -s $pidfile ]] || continue
        local pid
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null || continue
        for ((i = 0; i < 40; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -9 "$pid" 2>/dev/null || true
    done
    [[ -e $DIR/linked-etc ]] && rm -f /etc/slurm/slurm.conf
    rm -rf "$DIR"
    log "down"
}

case ${1:-} in
    up) up "${2:-none}" ;;
    down) down ;;
    *) echo "usage: $0 up [accounting] | down" >&2; exit 2 ;;
esac
