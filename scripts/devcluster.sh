#!/usr/bin/env bash
# The real local SLURM test cluster of gh-run (see docs/devcluster.md).
#
#   bash scripts/devcluster.sh up|down|status|env|stop DAEMON|start DAEMON|restart DAEMON
#
# Everything (configs, logs, spool, pid files, MariaDB datadir, munge key) lives under
# $REPO/.devcluster/. Daemons: munged, mariadbd, slurmdbd, slurmctld, slurmd-gh1, slurmd-gh2, and
# sshd: an OpenSSH server on 127.0.0.1:16822 (its own host key, config and authorized key under
# $STATE/ssh) through which clusters/dev-ssh.yaml reaches the same cluster as a remote login node.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"

# ctld_runs STATE: the slurmctld this script started for state folder STATE runs (its pid file
# names a live process whose command line names STATE's slurm.conf).
ctld_runs() {
    local pid cmd
    pid="$(cat "$1/pids/slurmctld.pid" 2>/dev/null)" || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
    [[ "$cmd" == *slurmctld* && "$cmd" == *"$1/etc/slurm.conf"* ]]
}

# The ports are fixed, so a machine runs one dev cluster. A checkout that names none
# (GH_RUN_DEVCLUSTER_DIR unset) and whose own cluster is not running reuses the running one
# that /etc/slurm/slurm.conf links to (another checkout's `up` linked it), as if
# GH_RUN_DEVCLUSTER_DIR named it. Only `up`, `status` and `env` look: `down`, `stop` and `start`
# act on the cluster named, or on this checkout's own (tests/devcluster.py names it).
discover_state() {
    local target other
    [[ -z "${GH_RUN_DEVCLUSTER_DIR:-}" ]] || return 0
    ctld_runs "$REPO/.devcluster" && return 0
    [[ -L /etc/slurm/slurm.conf ]] || return 0
    target="$(readlink /etc/slurm/slurm.conf)"
    [[ "$target" == */etc/slurm.conf ]] || return 0
    other="${target%/etc/slurm.conf}"
    [[ "$other" != "$REPO/.devcluster" && -f "$other/root" ]] || return 0
    ctld_runs "$other" || return 0
    GH_RUN_DEVCLUSTER_DIR="$other"
    printf '[devcluster] reusing the dev cluster running in %s (found through /etc/slurm/slurm.conf; export GH_RUN_DEVCLUSTER_DIR=%s to name it)\n' \
        "$other" "$other" >&2
}
case "${1:-}" in up | status | env) discover_state ;; esac

# GH_RUN_DEVCLUSTER_DIR: use that state folder (one cluster shared by several checkouts of the
# repo, e.g. git worktrees; the ports are fixed, so there can be only one). It is then nobody's
# own: `up` reuses it and `down` stops it whichever checkout started it.
STATE="${GH_RUN_DEVCLUSTER_DIR:-$REPO/.devcluster}"
SHARED_STATE=0
[[ -n "${GH_RUN_DEVCLUSTER_DIR:-}" ]] && SHARED_STATE=1
ETC="$STATE/etc"
LOG="$STATE/log"
PIDS="$STATE/pids"
RUN="$STATE/run"
SPOOL="$STATE/spool"
DBDIR="$STATE/mysql"
SLURM_CONF="$ETC/slurm.conf"
export SLURM_CONF

CLUSTER_NAME="ghdev"
PARTITION="gh"
NODES=(gh1 gh2)
CTLD_PORT=16817
DBD_PORT=16819
MYSQL_PORT=16306
declare -A SLURMD_PORT=([gh1]=16818 [gh2]=16820)
SSH_PORT=16822
SSH_DIR="$STATE/ssh"
SSHD_CONFIG="$SSH_DIR/sshd_config"
# The scratch file system of the "login node": sshd sessions get SCRATCH=$SCRATCH_DIR, and
# clusters/dev-ssh.yaml puts its run folders under $SCRATCH as a real site's file does.
SCRATCH_DIR="$STATE/scratch"
NODE_CPUS=2
NODE_MEM_MB=4000
DEF_MEM_PER_CPU=1000
DB_USER="slurm"
DB_PASS="ghdev-local-only"
DB_NAME="slurm_acct_db"
WAIT_S="${DEVCLUSTER_WAIT_S:-90}"
ETC_LINK="/etc/slurm/slurm.conf"
MARKER_TARGET_SUFFIX="/.devcluster/etc/slurm.conf"
PACKAGES=(slurm-wlm slurmdbd munge mariadb-server slurm-client shellcheck openssh-server rsync)
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd-gh1 slurmd-gh2 sshd)
STARTED=()

log() { printf '[devcluster] %s\n' "$*" >&2; }

# show_file FILE: its last 30 lines on stderr, framed (nothing when it does not exist).
show_file() {
    if [[ -f "$1" && -s "$1" ]]; then
        log "--- last 30 lines of $1 ---"
        tail -n 30 "$1" >&2 || true
        log "--- end of $1 ---"
    fi
}

# die MESSAGE [FILE...]: each FILE shown (a daemon's log and its stdout: a daemon that dies
# before it opens its log says why only on stdout).
die() {
    log "ERROR: $1"
    shift
    local f
    for f in "$@"; do show_file "$f"; done
    exit 1
}

usage() {
    cat >&2 <<EOF
usage: $0 up|down|status|env|stop DAEMON|start DAEMON|restart DAEMON
DAEMON is one of: ${DAEMONS[*]}
EOF
    exit 2
}

# ---------------------------------------------------------------- installation

packages_missing() {
    local p missing=()
    for p in "${PACKAGES[@]}"; do
        if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]]; then
            missing+=("$p")
        fi
    done
    printf '%s\n' "${missing[@]}"
}

install_packages() {
    local missing
    missing="$(packages_missing)"
    [[ -z "$missing" ]] && return 0
    log "installing packages: $(echo "$missing" | tr '\n' ' ')"
    local t0=$SECONDS policy="/usr/sbin/policy-rc.d" own_policy=0
    # Keep the packages' maintainer scripts from starting system daemons (no systemd here).
    if [[ ! -e "$policy" ]]; then
        printf '#!/bin/sh\n# devcluster.sh: temporary, no daemons during install\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        own_policy=1
    fi
    local rc=0
    {
        DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                -o DPkg::Lock::Timeout=300 \
                -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
                "${PACKAGES[@]}"
    } >"$STATE/apt.log" 2>&1 || rc=$?
    if [[ $own_policy == 1 ]]; then rm -f "$policy"; fi
    [[ $rc == 0 ]] || die "apt-get install failed (rc=$rc)" "$STATE/apt.log"
    log "packages installed in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- state folder

# The munge daemon runs as user munge and must reach its key and socket. If the repo path is
# not traversable by munge (e.g. a clone under /root), its folder lives under /run instead.
munge_dir() {
    if [[ -f "$STATE/munge-dir" ]]; then
        cat "$STATE/munge-dir"
        return
    fi
    local d="$STATE/munge"
    if ! setpriv --reuid=munge --regid=munge --clear-groups test -x "$STATE" 2>/dev/null; then
        d="/run/gh-devcluster-$(printf '%s' "$REPO" | sha256sum | cut -c1-12)/munge"
    fi
    printf '%s\n' "$d" >"$STATE/munge-dir"
    printf '%s\n' "$d"
}

init_state() {
    if [[ $SHARED_STATE == 0 && -f "$STATE/root" && "$(cat "$STATE/root")" != "$REPO" ]]; then
        log "stale $STATE belongs to $(cat "$STATE/root"); discarding it (its processes are not touched)"
        find "$STATE" -mindepth 1 -maxdepth 1 ! -name .lock ! -name apt.log -exec rm -rf {} +
    fi
    mkdir -p "$STATE" "$ETC" "$LOG" "$PIDS" "$RUN" "$SPOOL/slurmctld"
    chmod 755 "$STATE"
    [[ $SHARED_STATE == 1 && -f "$STATE/root" ]] || printf '%s\n' "$REPO" >"$STATE/root"
    local m
    m="$(munge_dir)"
    mkdir -p "$m"
    chown munge:munge "$m"
    chmod 700 "$m"
    if [[ ! -s "$m/munge.key" ]]; then
        log "creating a munge key for this cluster"
        dd if=/dev/urandom of="$m/munge.key" bs=1024 count=1 status=none
    fi
    chown munge:munge "$m/munge.key"
    chmod 400 "$m/munge.key"
}

# ---------------------------------------------------------------- configuration

render_slurm_conf() {
    local host n
    host="$(hostname -s)"
    cat <<EOF
# Generated by scripts/devcluster.sh for $STATE; do not edit (it is rewritten on every up).
ClusterName=$CLUSTER_NAME
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=${SLURMD_PORT[gh1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$(munge_dir)/munge.socket
CredType=cred/munge
StateSaveLocation=$SPOOL/slurmctld
SlurmdSpoolDir=$SPOOL/slurmd-%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
PriorityType=priority/basic
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=5
InactiveLimit=0
KillWait=5
MinJobAge=300
Waittime=0
DefMemPerCPU=$DEF_MEM_PER_CPU
EnforcePartLimits=ALL
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
# For connections to slurmdbd, Slurm takes the munge socket from AccountingStoragePass.
AccountingStoragePass=$(munge_dir)/munge.socket
AccountingStorageTRES=gres/gpu,gres/gpu:gh200
JobAcctGatherType=jobacct_gather/linux
# No cgroups here: --mem is enforced by slurmstepd's accounting poll (every second), which
# kills a step whose RSS exceeds its limit (OverMemoryKill).
JobAcctGatherParams=OverMemoryKill
JobAcctGatherFrequency=1
JobCompType=jobcomp/none
EOF
    for n in "${NODES[@]}"; do
        echo "NodeName=$n NodeHostname=$n NodeAddr=127.0.0.1 Port=${SLURMD_PORT[$n]} CPUs=$NODE_CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$NODE_CPUS ThreadsPerCore=1 RealMemory=$NODE_MEM_MB Gres=gpu:gh200:1 State=UNKNOWN"
    done
    echo "PartitionName=$PARTITION Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=02:00:00 DefaultTime=00:10:00 State=UP"
}

render_gres_conf() {
    local n
    echo "# Generated by scripts/devcluster.sh: one fake GH200 per node (no hardware behind it)."
    for n in "${NODES[@]}"; do
        echo "NodeName=$n Name=gpu Type=gh200 File=/dev/null"
    done
}

render_slurmdbd_conf() {
    cat <<EOF
# Generated by scripts/devcluster.sh for $STATE; do not edit.
AuthType=auth/munge
AuthInfo=socket=$(munge_dir)/munge.socket
DbdAddr=127.0.0.1
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
DebugLevel=info
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MYSQL_PORT
StorageUser=$DB_USER
StoragePass=$DB_PASS
StorageLoc=$DB_NAME
EOF
}

# write_if_changed FILE MODE CONTENT -> returns 0 if the file changed
write_if_changed() {
    local f="$1" mode="$2" content="$3"
    if [[ -f "$f" ]] && [[ "$(cat "$f")" == "$content" ]]; then
        chmod "$mode" "$f"
        return 1
    fi
    printf '%s\n' "$content" >"$f.tmp"
    chmod "$mode" "$f.tmp"
    mv -f "$f.tmp" "$f"
    return 0
}

# Writes all configs; prints "changed" if any slurm config differs from what was there.
write_configs() {
    local changed=0
    write_if_changed "$ETC/slurm.conf" 644 "$(render_slurm_conf)" && changed=1
    write_if_changed "$ETC/gres.conf" 644 "$(render_gres_conf)" && changed=1
    write_if_changed "$ETC/slurmdbd.conf" 600 "$(render_slurmdbd_conf)" && changed=1
    printf 'export SLURM_CONF=%q\n' "$SLURM_CONF" >"$STATE/env.sh"
    if [[ $changed == 1 ]]; then echo changed; fi
}

# ---------------------------------------------------------------- the SSH login node

# Made once and kept, so known_hosts and the client key stay valid across `up`s: the host key,
# the client key (its public half is the one authorized key) and the known_hosts line.
# Nothing outside $STATE is configured; Debian's sshd only needs its privsep directory.
init_ssh() {
    mkdir -p "$SSH_DIR" "$SCRATCH_DIR"
    chmod 700 "$SSH_DIR" "$SCRATCH_DIR"
    local k
    for k in ssh_host_ed25519_key id_ed25519; do
        if [[ ! -s "$SSH_DIR/$k" || ! -s "$SSH_DIR/$k.pub" ]]; then
            log "creating ssh key $SSH_DIR/$k"
            rm -f "$SSH_DIR/$k" "$SSH_DIR/$k.pub"
            ssh-keygen -q -t ed25519 -N '' -C "gh-run devcluster $k" -f "$SSH_DIR/$k"
        fi
    done
    write_if_changed "$SSH_DIR/authorized_keys" 600 "$(cat "$SSH_DIR/id_ed25519.pub")" || true
    write_if_changed "$SSH_DIR/known_hosts" 644 \
        "[127.0.0.1]:$SSH_PORT $(cut -d' ' -f1,2 "$SSH_DIR/ssh_host_ed25519_key.pub")" || true
    mkdir -p /run/sshd
    chmod 755 /run/sshd
}

render_sshd_config() {
    cat <<EOF
# Generated by scripts/devcluster.sh for $STATE; do not edit (it is rewritten on every up).
# The dev cluster's login node: key-only root login on loopback, nothing else.
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $SSH_DIR/ssh_host_ed25519_key
AuthorizedKeysFile $SSH_DIR/authorized_keys
AllowUsers root
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
X11Forwarding no
AllowTcpForwarding no
AllowAgentForwarding no
PrintMotd no
PidFile none
MaxSessions 64
MaxStartups 64:30:128
LogLevel VERBOSE
# What a login shell on a real site has: the SLURM configuration and a scratch file system.
SetEnv SLURM_CONF=$SLURM_CONF SCRATCH=$SCRATCH_DIR
Subsystem sftp internal-sftp
EOF
}

# ssh_login_check: our own client logs in with our key and checks the host key for real.
ssh_login_check() {
    timeout 15 ssh -q -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes \
        -i "$SSH_DIR/id_ed25519" -o UserKnownHostsFile="$SSH_DIR/known_hosts" \
        -o StrictHostKeyChecking=yes -o ConnectTimeout=5 -p "$SSH_PORT" root@127.0.0.1 true \
        </dev/null >/dev/null 2>&1
}

# /etc/slurm/slurm.conf -> our slurm.conf, so bare sbatch/sacct (and submitit) work without
# SLURM_CONF. Only when that path is absent or is a symlink a dev cluster made: into some
# .devcluster, into a state folder named by GH_RUN_DEVCLUSTER_DIR (it holds the `root` marker
# `up` writes), or left dangling by one that is gone (a machine image taken while a cluster ran
# in a folder the image lacks). A real slurm.conf, or a link to anything else, is left alone.
# Opt out with DEVCLUSTER_NO_ETC_LINK=1.
etc_link_is_ours() {
    local target
    [[ -L "$ETC_LINK" ]] || return 1
    target="$(readlink "$ETC_LINK")"
    [[ "$target" == *"$MARKER_TARGET_SUFFIX" ]] && return 0
    [[ "$target" == /*/etc/slurm.conf ]] || return 1
    [[ -f "${target%/etc/slurm.conf}/root" || ! -e "$target" ]]
}

link_etc() {
    [[ "${DEVCLUSTER_NO_ETC_LINK:-0}" == 1 ]] && return 0
    if [[ -e "$ETC_LINK" || -L "$ETC_LINK" ]] && ! etc_link_is_ours; then
        log "note: $ETC_LINK exists and is not ours; leaving it (use SLURM_CONF=$SLURM_CONF)"
        return 0
    fi
    if [[ "$(readlink "$ETC_LINK" 2>/dev/null || true)" != "$SLURM_CONF" ]]; then
        mkdir -p "$(dirname "$ETC_LINK")"
        ln -sfn "$SLURM_CONF" "$ETC_LINK"
        log "linked $ETC_LINK -> $SLURM_CONF"
    fi
}

unlink_etc() {
    if etc_link_is_ours && [[ "$(readlink "$ETC_LINK")" == "$SLURM_CONF" ]]; then
        rm -f "$ETC_LINK"
    fi
}

# ---------------------------------------------------------------- processes

pid_of() { # prints the pid of a daemon we started and that is still alive, else fails
    local name="$1" pid cmd
    [[ -f "$PIDS/$name.pid" ]] || return 1
    pid="$(cat "$PIDS/$name.pid")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [[ -r "/proc/$pid/cmdline" ]] || return 1
    cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
    # Guard against pid reuse: the command line must name our state folder.
    case "$name" in
        munged) [[ "$cmd" == *munged* && "$cmd" == *"$(munge_dir)"* ]] || return 1 ;;
        mariadbd) [[ "$cmd" == *mariadbd* && "$cmd" == *"$DBDIR"* ]] || return 1 ;;
        slurmdbd) # slurmdbd takes no path argument: match the SLURM_CONF it was started with.
            [[ "$cmd" == *slurmdbd* ]] || return 1
            tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$SLURM_CONF" || return 1
            ;;
        slurmctld) [[ "$cmd" == *slurmctld* && "$cmd" == *"$SLURM_CONF"* ]] || return 1 ;;
        slurmd-*) [[ "$cmd" == *slurmd* && "$cmd" == *"$SLURM_CONF"* && "$cmd" == *" -N ${name#slurmd-} "* ]] || return 1 ;;
        sshd) [[ "$cmd" == *sshd* && "$cmd" == *"$SSHD_CONFIG"* ]] || return 1 ;;
        *) return 1 ;;
    esac
    # A zombie is not alive.
    [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo Z)" != Z ]] || return 1
    printf '%s\n' "$pid"
}

alive() { pid_of "$1" >/dev/null; }

log_of() {
    case "$1" in
        munged) echo "$LOG/munged.log" ;;
        mariadbd) echo "$LOG/mariadbd.log" ;;
        slurmdbd) echo "$LOG/slurmdbd.log" ;;
        slurmctld) echo "$LOG/slurmctld.log" ;;
        slurmd-*) echo "$LOG/${1}.log" ;;
        sshd) echo "$LOG/sshd.log" ;;
    esac
}

port_of() {
    case "$1" in
        mariadbd) echo "$MYSQL_PORT" ;;
        slurmdbd) echo "$DBD_PORT" ;;
        slurmctld) echo "$CTLD_PORT" ;;
        slurmd-*) echo "${SLURMD_PORT[${1#slurmd-}]}" ;;
        sshd) echo "$SSH_PORT" ;;
        *) echo "" ;;
    esac
}

# port_open PORT: something LISTENs on PORT (read from /proc, so no connection is logged).
port_open() {
    local hex f files=()
    hex="$(printf '%04X' "$1")"
    for f in /proc/net/tcp /proc/net/tcp6; do
        if [[ -r "$f" ]]; then files+=("$f"); fi
    done
    awk -v p=":$hex" 'FNR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { found = 1 }
        END { exit !found }' "${files[@]}" 2>/dev/null
}

# launch NAME CMD...: start CMD detached (own session, no inherited fds), record its pid.
launch() {
    local name="$1"
    shift
    local out="$LOG/$name.stdout"
    setsid "$@" </dev/null >>"$out" 2>&1 9>&- &
    echo $! >"$PIDS/$name.pid"
}

is_ready() {
    local name="$1"
    case "$name" in
        munged) munge -n -S "$(munge_dir)/munge.socket" 2>/dev/null | unmunge -S "$(munge_dir)/munge.socket" >/dev/null 2>&1 ;;
        mariadbd) mariadb-admin --no-defaults --socket="$RUN/mysqld.sock" -u root ping >/dev/null 2>&1 ;;
        slurmdbd) timeout 10 sacctmgr -n list cluster >/dev/null 2>&1 ;;
        slurmctld) timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP' ;;
        # Listening; that the controller sees the node respond is checked by wait_nodes.
        slurmd-*) port_open "$(port_of "$name")" ;;
        sshd) port_open "$SSH_PORT" && ssh_login_check ;;
    esac
}

# started_runs NAME: the process launch started for NAME has not exited. Not `alive`: that
# matches the command line, which for a moment after the fork is still this script's own.
started_runs() {
    local pid
    pid="$(cat "$PIDS/$1.pid" 2>/dev/null)" || return 1
    [[ -n "$pid" ]] || return 1
    [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo Z)" != Z ]]
}

# wait_up NAME [TIMEOUT]: 0 once NAME answers, 1 when it exited before answering; dies when it
# runs but does not answer in time.
wait_up() {
    local name="$1" deadline=$((SECONDS + ${2:-$WAIT_S}))
    until is_ready "$name"; do
        started_runs "$name" || return 1
        ((SECONDS < deadline)) ||
            die "$name not answering after ${2:-$WAIT_S} s" "$(log_of "$name")" "$LOG/$name.stdout"
        sleep 0.5
    done
}

wait_ready() {
    wait_up "$@" || die "$1 died while starting" "$(log_of "$1")" "$LOG/$1.stdout"
}

start_mariadb() {
    if [[ ! -d "$DBDIR/mysql" ]]; then
        log "initialising MariaDB datadir $DBDIR"
        rm -rf "$DBDIR"
        mkdir -p "$DBDIR"
        mariadb-install-db --no-defaults --datadir="$DBDIR" --user=root \
            --auth-root-authentication-method=socket --skip-test-db \
            >"$LOG/mariadb-install.log" 2>&1 ||
            die "mariadb-install-db failed" "$LOG/mariadb-install.log"
    fi
    launch mariadbd mariadbd --no-defaults --datadir="$DBDIR" --user=root \
        --socket="$RUN/mysqld.sock" --port="$MYSQL_PORT" --bind-address=127.0.0.1 \
        --pid-file="$RUN/mariadbd.pid" --log-error="$LOG/mariadbd.log" \
        --skip-name-resolve --skip-log-bin --innodb-buffer-pool-size=64M \
        --innodb-log-file-size=16M --innodb-lock-wait-timeout=900 --max-connections=100
    wait_ready mariadbd
    mariadb --no-defaults --socket="$RUN/mysqld.sock" -u root >>"$LOG/mariadb-setup.log" 2>&1 <<EOF ||
CREATE DATABASE IF NOT EXISTS $DB_NAME;
CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'127.0.0.1';
GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'localhost';
FLUSH PRIVILEGES;
EOF
        die "creating the $DB_NAME database failed" "$LOG/mariadb-setup.log"
}

register_cluster() {
    if ! timeout 10 sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER_NAME"; then
        log "registering cluster $CLUSTER_NAME in slurmdbd"
        timeout 20 sacctmgr -i add cluster "$CLUSTER_NAME" >>"$LOG/sacctmgr.log" 2>&1 ||
            die "sacctmgr add cluster failed" "$LOG/sacctmgr.log"
    fi
}

# launch_daemon NAME: start NAME's process (detached; wait_up says when it answers).
launch_daemon() {
    local name="$1"
    case "$name" in
        munged)
            local m
            m="$(munge_dir)"
            rm -f "$m/munge.socket" "$m/munge.socket.lock"
            launch munged setpriv --reuid=munge --regid=munge --init-groups \
                munged --foreground --force --socket="$m/munge.socket" --key-file="$m/munge.key" \
                --pid-file="$m/munged.pid" --seed-file="$m/munged.seed" --log-file="$m/munged.log"
            ln -sfn "$m/munged.log" "$LOG/munged.log"
            ;;
        slurmdbd) launch slurmdbd slurmdbd -D ;;
        slurmctld) launch slurmctld slurmctld -D -f "$SLURM_CONF" -L "$LOG/slurmctld.log" ;;
        slurmd-*)
            local node="${name#slurmd-}"
            mkdir -p "$SPOOL/slurmd-$node"
            launch "$name" slurmd -D -N "$node" -f "$SLURM_CONF" -L "$LOG/$name.log"
            ;;
        sshd)
            init_ssh
            write_if_changed "$SSHD_CONFIG" 600 "$(render_sshd_config)" || true
            # sshd re-executes itself for each connection: it must be started by absolute path.
            launch sshd /usr/sbin/sshd -D -f "$SSHD_CONFIG" -E "$LOG/sshd.log"
            ;;
        *) die "unknown daemon $name" ;;
    esac
}

start_daemon() {
    local name="$1" port
    if alive "$name"; then
        # Running: give it a moment to answer; a hung daemon is restarted.
        if (wait_ready "$name" 15) 2>/dev/null; then return 0; fi
        log "$name is running but not answering; restarting it"
        stop_daemon "$name"
    fi
    port="$(port_of "$name")"
    if [[ -n "$port" ]] && port_open "$port"; then
        die "port $port (for $name) is already in use by a process this cluster did not start; stop it (another clone's 'devcluster.sh down'?) and retry"
    fi
    log "starting $name"
    STARTED+=("$name")
    if [[ "$name" == mariadbd ]]; then
        start_mariadb
    else
        launch_daemon "$name"
        if ! wait_up "$name"; then
            # Seen once in CI: slurmctld exited before opening its log, and never here in
            # hundreds of starts. Show why, then try once more; a second death is fatal.
            log "$name exited while starting; what it printed:"
            show_file "$(log_of "$name")"
            show_file "$LOG/$name.stdout"
            log "starting $name once more"
            sleep 2
            launch_daemon "$name"
            wait_ready "$name"
        fi
    fi
    if [[ "$name" == slurmdbd ]]; then register_cluster; fi
}

stop_daemon() {
    local name="$1" pid i
    pid="$(pid_of "$name")" || {
        rm -f "$PIDS/$name.pid"
        return 0
    }
    log "stopping $name (pid $pid)"
    if [[ "$name" == sshd ]]; then
        # Each connection is a child of the listener: stopping sshd drops them too (the fault
        # tests rely on that, and `down` leaves no session behind).
        local child
        for child in $(pgrep -P "$pid" 2>/dev/null || true); do
            kill -TERM "$child" 2>/dev/null || true
        done
    fi
    kill -TERM "$pid" 2>/dev/null || true
    kill -CONT "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        alive "$name" || break
        sleep 0.2
    done
    if alive "$name"; then
        log "$name did not exit after TERM; sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
    fi
    rm -f "$PIDS/$name.pid"
}

# wait_nodes [NODE...]: wait until the controller sees the nodes (default: all) responding
# and idle (or busy with jobs); resume nodes left down/drained.
wait_nodes() {
    local deadline=$((SECONDS + WAIT_S)) out n st ok resumed="" want=("$@")
    [[ ${#want[@]} -gt 0 ]] || want=("${NODES[@]}")
    while true; do
        out="$(timeout 10 sinfo -h -N -p "$PARTITION" -o '%N %t' 2>/dev/null || true)"
        ok=1
        for n in "${want[@]}"; do
            st="$(awk -v n="$n" '$1 == n {print $2; exit}' <<<"$out")"
            case "$st" in
                idle | mix | alloc | comp) ;;
                drain* | drng | down | fail | inval)
                    ok=0
                    if [[ " $resumed " != *" $n "* ]]; then
                        log "node $n is $st; resuming it"
                        timeout 10 scontrol update nodename="$n" state=resume >/dev/null 2>&1 || true
                        resumed+=" $n"
                    fi
                    ;;
                *) ok=0 ;;
            esac
        done
        [[ $ok == 1 ]] && return 0
        if ((SECONDS >= deadline)); then
            log "sinfo says:"
            printf '%s\n' "$out" >&2
            timeout 10 scontrol show node "${want[@]}" 2>&1 | grep -E 'NodeName|State|Reason' >&2 || true
            die "nodes ${want[*]} not idle after ${WAIT_S} s" "$LOG/slurmctld.log"
        fi
        sleep 0.5
    done
}

wait_sacct() {
    local deadline=$((SECONDS + WAIT_S))
    until timeout 10 sacct -n -X -S now-1minutes >/dev/null 2>&1 &&
        timeout 10 sacctmgr -n -P show cluster format=cluster,controlport 2>/dev/null |
        grep -qx "$CLUSTER_NAME|$CTLD_PORT"; do
        ((SECONDS < deadline)) || die "sacct / slurmdbd not answering after ${WAIT_S} s" "$LOG/slurmdbd.log"
        sleep 0.5
    done
}

wait_nodes_with_slurmd() {
    local n up=()
    for n in "${NODES[@]}"; do
        if alive "slurmd-$n"; then up+=("$n"); fi
    done
    if [[ ${#up[@]} -gt 0 ]]; then wait_nodes "${up[@]}"; fi
}

# Before starting anything: every port of a daemon we must start has to be free.
check_ports() {
    local d port busy=()
    for d in "${DAEMONS[@]}"; do
        alive "$d" && continue
        port="$(port_of "$d")"
        if [[ -n "$port" ]] && port_open "$port"; then busy+=("$port ($d)"); fi
    done
    if [[ ${#busy[@]} -gt 0 ]]; then
        local share=""
        if [[ -L "$ETC_LINK" ]]; then
            share=", or share it: export GH_RUN_DEVCLUSTER_DIR=$(dirname "$(dirname "$(readlink "$ETC_LINK")")") (the cluster $ETC_LINK links to)"
        fi
        die "port(s) ${busy[*]} already in use by processes this cluster ($STATE) did not start; another clone's dev cluster? run its 'scripts/devcluster.sh down' (or stop whatever listens there) and retry$share"
    fi
}

take_lock() {
    mkdir -p "$STATE"
    exec 9>"$STATE/.lock"
    flock -w 300 9 || die "another devcluster.sh holds $STATE/.lock"
}

need_root() { [[ $EUID == 0 ]] || die "run as root (the dev cluster starts munged/slurmd as root)"; }

# ---------------------------------------------------------------- commands

cmd_up() {
    need_root
    local t0=$SECONDS d changed
    take_lock
    install_packages
    init_state
    init_ssh
    changed="$(write_configs)"
    # sshd's own configuration: a change restarts sshd alone, never the SLURM daemons.
    if write_if_changed "$SSHD_CONFIG" 600 "$(render_sshd_config)" && alive sshd; then
        log "sshd configuration changed; restarting sshd"
        stop_daemon sshd
    fi
    if [[ -n "$changed" ]]; then
        for d in slurmd-gh2 slurmd-gh1 slurmctld slurmdbd; do
            if alive "$d"; then
                log "configuration changed; restarting $d"
                stop_daemon "$d"
            fi
        done
    fi
    check_ports
    for d in "${DAEMONS[@]}"; do start_daemon "$d"; done
    wait_nodes
    wait_sacct
    link_etc
    if [[ ${#STARTED[@]} == 0 ]]; then
        log "cluster $CLUSTER_NAME already up (reused) in $((SECONDS - t0)) s"
    else
        log "cluster $CLUSTER_NAME up in $((SECONDS - t0)) s (started: ${STARTED[*]})"
    fi
    log "use: export SLURM_CONF=$SLURM_CONF   (or: source $STATE/env.sh)"
    log "ssh: root@127.0.0.1:$SSH_PORT, key $SSH_DIR/id_ed25519, known hosts $SSH_DIR/known_hosts (clusters/dev-ssh.yaml)"
}

cmd_down() {
    need_root
    [[ -d "$STATE" ]] || {
        log "nothing to stop ($STATE does not exist)"
        return 0
    }
    take_lock
    if [[ $SHARED_STATE == 0 && -f "$STATE/root" && "$(cat "$STATE/root")" != "$REPO" ]]; then
        log "$STATE belongs to $(cat "$STATE/root"); not touching its processes"
        return 0
    fi
    if alive slurmctld; then
        timeout 10 scancel --full --quiet --partition="$PARTITION" >/dev/null 2>&1 || true
    fi
    local d i
    for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
        d="${DAEMONS[$i]}"
        stop_daemon "$d"
    done
    unlink_etc
    log "cluster $CLUSTER_NAME stopped (state kept in $STATE)"
}

cmd_status() {
    local d pid rc=0
    for d in "${DAEMONS[@]}"; do
        if pid="$(pid_of "$d")"; then
            printf '%-12s running (pid %s)\n' "$d" "$pid"
        else
            printf '%-12s stopped\n' "$d"
            rc=1
        fi
    done
    echo "SLURM_CONF=$SLURM_CONF"
    if [[ -f "$SLURM_CONF" ]]; then
        timeout 10 sinfo -N -o '%N %P %t %c %m %G' 2>&1 || rc=1
    fi
    return $rc
}

cmd_env() {
    printf 'export SLURM_CONF=%q\n' "$SLURM_CONF"
}

check_daemon_name() {
    local d
    for d in "${DAEMONS[@]}"; do [[ "$d" == "$1" ]] && return 0; done
    die "unknown daemon '$1'; one of: ${DAEMONS[*]}"
}

main() {
    [[ $# -ge 1 ]] || usage
    local cmd="$1"
    shift
    case "$cmd" in
        up) cmd_up ;;
        down) cmd_down ;;
        status) cmd_status ;;
        env) cmd_env ;;
        stop | start | restart)
            [[ $# == 1 ]] || usage
            need_root
            check_daemon_name "$1"
            [[ -f "$SLURM_CONF" ]] || die "no cluster configured yet; run: $0 up"
            take_lock
            if [[ "$cmd" != start ]]; then stop_daemon "$1"; fi
            if [[ "$cmd" != stop ]]; then
                start_daemon "$1"
                case "$1" in
                    slurmctld) wait_nodes_with_slurmd ;;
                    slurmd-*) if alive slurmctld; then wait_nodes "${1#slurmd-}"; fi ;;
                esac
            fi
            ;;
        -h | --help | help) usage ;;
        *) usage ;;
    esac
}

main "$@"
