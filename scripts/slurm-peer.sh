#!/usr/bin/env bash
# A one-node Slurm cluster in a throwaway folder: the peer of bench/dispatch (docs/bench-slurm.md).
#
#   scripts/slurm-peer.sh start DIR   # prints `export SLURM_CONF=DIR/etc/slurm.conf` on stdout
#   scripts/slurm-peer.sh stop DIR
#
# `start` installs slurm-wlm and munge from Debian where they are missing, then runs munged,
# slurmctld and slurmd with everything (key, socket, config, state, logs, 8 fake GPU device
# nodes) under DIR, so it never reads or writes /etc/slurm, /etc/munge or the system munged.
# Both commands can be repeated: `start` leaves running daemons alone, `stop` ignores dead ones.
# Progress goes to stderr; stdout carries only the export line.
set -euo pipefail

say() { echo "slurm-peer: $*" >&2; }
die() { say "$*"; exit 1; }

cmd="${1:-}"
[ $# -eq 2 ] && { [ "$cmd" = start ] || [ "$cmd" = stop ]; } || die "usage: $0 start|stop DIR"
mkdir -p "$2"
dir="$(cd "$2" && pwd)"
conf="$dir/etc/slurm.conf"
sock="$dir/munge/munge.socket.2"
export PATH="$PATH:/usr/sbin:/sbin"
export SLURM_CONF="$conf"

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Sends TERM to the daemon of a pid file, then KILL if it is still there after 10 s.
halt() {
  local pidfile="$1" pid
  alive "$pidfile" || { rm -f "$pidfile"; return 0; }
  pid="$(cat "$pidfile")"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && { say "pid $pid ignored TERM; killing"; kill -KILL "$pid" 2>/dev/null || true; }
  rm -f "$pidfile"
}

if [ "$cmd" = stop ]; then
  if [ -f "$conf" ] && alive "$dir/run/slurmctld.pid"; then
    # Cancel, then let the jobs leave, so slurmd has no job steps left when it stops.
    scancel --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 100); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  halt "$dir/run/slurmd.pid"
  halt "$dir/run/slurmctld.pid"
  # A slurmstepd that outlived slurmd: only ours, which inherited SLURM_CONF=$conf from slurmd.
  for p in $(pgrep -x slurmstepd || true); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$conf" && kill -KILL "$p" 2>/dev/null || true
  done
  halt "$dir/run/munged.pid"
  say "stopped ($dir)"
  exit 0
fi

# --- install -------------------------------------------------------------------------------
missing=()
for b in slurmctld slurmd sbatch munged; do command -v "$b" >/dev/null || missing+=("$b"); done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || die "not installed (${missing[*]}) and not root, so apt-get cannot install slurm-wlm and munge"
  command -v apt-get >/dev/null || die "not installed (${missing[*]}) and no apt-get on this machine"
  say "installing slurm-wlm and munge with apt-get (missing: ${missing[*]})"
  export DEBIAN_FRONTEND=noninteractive
  mkdir -p "$dir/log"
  apt_log="$dir/log/apt.log"
  apt-get update -qq >"$apt_log" 2>&1 || die "apt-get update failed: $(tail -n 2 "$apt_log" | tr '\n' ' ')"
  # The packages' init scripts would start the system munged and slurm daemons; policy-rc.d (where
  # present) or the absence of an init system stops that, and nothing here uses them either way.
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >>"$apt_log" 2>&1 \
    || die "apt-get install slurm-wlm munge failed: $(tail -n 2 "$apt_log" | tr '\n' ' ')"
  say "installed: $(dpkg-query -W -f '${Package} ${Version}  ' slurmctld munge)"
fi
say "$(slurmctld -V), $(munged --version 2>&1 | awk '{print $1; exit}')"

# --- files ---------------------------------------------------------------------------------
mkdir -p "$dir"/{etc,munge,state,spool,log,run,dev,out}
chmod 0755 "$dir/munge"   # munged refuses a socket dir that others can write to
if [ ! -s "$dir/munge.key" ]; then
  dd if=/dev/urandom of="$dir/munge.key" bs=1 count=1024 status=none
  chmod 0400 "$dir/munge.key"   # munged runs as this user (root here), which owns the key
fi
for n in 0 1 2 3 4 5 6 7; do
  # The NVIDIA character devices' numbers, so slurmd's gres/gpu plugin sees real device files.
  [ -c "$dir/dev/nvidia$n" ] || mknod "$dir/dev/nvidia$n" c 195 "$n" || die "mknod $dir/dev/nvidia$n failed (needs root)"
done

# Two ports nobody listens on, asked of the kernel (bound to 0, then released).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
host="$(hostname -s)"
user="$(id -un)"
if [ ! -f "$conf" ]; then
  ctld_port="$(free_port)"
  slurmd_port="$(free_port)"
  while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port="$(free_port)"; done
  cat >"$conf" <<EOF
# Written by scripts/slurm-peer.sh; every path is under $dir.
ClusterName=gpuplane-peer
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MailProg=/bin/true
ReturnToService=2
# Large enough that a --array=1-N and N queued jobs are never refused.
MaxArraySize=100001
MaxJobCount=200000
SchedulerType=sched/backfill
# batch_sched_delay=0: start batch jobs at once instead of batching their launch;
# bf_interval=1: the backfill pass every second instead of every 30.
SchedulerParameters=batch_sched_delay=0,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
# The node says what this file says (16 CPUs, 8 GPUs), not what the machine has.
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=16 RealMemory=1024 Gres=gpu:8 State=UNKNOWN
PartitionName=gpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  : >"$dir/etc/gres.conf"
  for n in 0 1 2 3 4 5 6 7; do echo "Name=gpu File=$dir/dev/nvidia$n" >>"$dir/etc/gres.conf"; done
fi

# --- daemons -------------------------------------------------------------------------------
if ! alive "$dir/run/munged.pid"; then
  # --force: munged would otherwise refuse a key, socket or log under /tmp (sticky, world-writable).
  munged --force --socket="$sock" --key-file="$dir/munge.key" --pid-file="$dir/run/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" </dev/null >>"$dir/log/munged.out" 2>&1 \
    || die "munged did not start: $(tail -n 3 "$dir/log/munged.log" "$dir/log/munged.out" 2>/dev/null | tr '\n' ' ')"
fi
munge -S "$sock" -n </dev/null | unmunge -S "$sock" >/dev/null || die "munge round trip on $sock failed"

if ! alive "$dir/run/slurmctld.pid"; then
  slurmctld -f "$conf" </dev/null >>"$dir/log/slurmctld.out" 2>&1 \
    || die "slurmctld did not start: $(tail -n 3 "$dir/log/slurmctld.log" 2>/dev/null | tr '\n' ' ')"
fi
if ! alive "$dir/run/slurmd.pid"; then
  slurmd -f "$conf" </dev/null >>"$dir/log/slurmd.out" 2>&1 \
    || die "slurmd did not start: $(tail -n 3 "$dir/log/slurmd.log" 2>/dev/null | tr '\n' ' ')"
fi

state=""
for _ in $(seq 600); do
  state="$(sinfo -h -N -n "$host" -o '%t' 2>/dev/null || true)"
  [ "$state" = idle ] && break
  sleep 0.1
done
[ "$state" = idle ] || die "node $host is '${state:-unreachable}' after 60 s, not idle; logs in $dir/log"
say "node $host idle: 16 CPUs, gpu:8 ($dir)"
echo "export SLURM_CONF=$conf"
