#!/usr/bin/env bash
# A private one-node Slurm cluster for tests and demos: `slurm.sh start` (munge key, munged, slurm.conf,
# slurmctld, slurmd; prints `export SLURM_CONF=...`), `slurm.sh stop`, `slurm.sh env`.
# Everything lives under $GANTRY_SLURM_DIR (default $GANTRY_VAR/slurm): its own munge key and socket,
# state, spool, logs; slurmctld and slurmd listen on $GANTRY_SLURM_PORT and +1 (default 49810, 49811).
# No cgroups (ProctrackType=proctrack/linuxproc, TaskPlugin=task/none), so it runs as root inside a
# container. Clients (sbatch, squeue, scancel) find it through SLURM_CONF.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

dir="${GANTRY_SLURM_DIR:-$GANTRY_VAR/slurm}"
port="${GANTRY_SLURM_PORT:-49810}"
cpus="${GANTRY_SLURM_CPUS:-4}"  # pilots the node runs at once (one CPU each); overcommits the host
node="gantry-node"
conf="$dir/slurm.conf"
sock="$dir/munge/munge.socket"

stop_pidfile() {
  local f="$1" pid
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f" 2>/dev/null || true)"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

case "${1:-}" in
  start)
    for tool in munged slurmctld slurmd sbatch; do
      command -v "$tool" >/dev/null || PATH="$PATH:/usr/sbin" command -v "$tool" >/dev/null ||
        { echo "slurm.sh: $tool not found; install slurm-wlm and munge (deploy/local/deps.sh)" >&2; exit 1; }
    done
    export PATH="$PATH:/usr/sbin"
    mkdir -p "$dir"/{munge,state,spool,log}
    chmod 700 "$dir/munge"
    if [[ ! -f "$dir/munge/munge.key" ]]; then
      dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
      chmod 400 "$dir/munge/munge.key"
    fi
    if ! { [[ -f "$dir/munge/munged.pid" ]] && kill -0 "$(cat "$dir/munge/munged.pid")" 2>/dev/null; }; then
      # --force: munged refuses a socket directory it did not expect; the directory is ours.
      munged --force --key-file="$dir/munge/munge.key" --socket="$sock" --pid-file="$dir/munge/munged.pid" \
        --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" ||
        { tail -20 "$dir/log/munged.log" >&2; exit 1; }
    fi
    cat >"$conf" <<EOF
ClusterName=gantry
SlurmctldHost=$(hostname)(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=2
KillWait=5
NodeName=$node NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=hpc Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF="$conf"
    if ! { [[ -f "$dir/slurmctld.pid" ]] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; }; then
      slurmctld -c -f "$conf" || { tail -20 "$dir/log/slurmctld.log" >&2; exit 1; }
    fi
    if ! { [[ -f "$dir/slurmd.pid" ]] && kill -0 "$(cat "$dir/slurmd.pid")" 2>/dev/null; }; then
      slurmd -N "$node" -f "$conf" || { tail -20 "$dir/log/slurmd.log" >&2; exit 1; }
    fi
    # Ready when the node is idle (slurmd registered with slurmctld).
    for _ in $(seq 150); do
      if [[ "$(sinfo -h -N -n "$node" -o %t 2>/dev/null)" == idle* ]]; then
        echo "export SLURM_CONF=$conf"
        exit 0
      fi
      sleep 0.2
    done
    echo "slurm.sh: node $node not idle after 30 s: $(sinfo -h -N -o '%N %t %E' 2>&1)" >&2
    tail -5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
    exit 1
    ;;
  stop)
    stop_pidfile "$dir/slurmd.pid"
    stop_pidfile "$dir/slurmctld.pid"
    stop_pidfile "$dir/munge/munged.pid"
    ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) echo "usage: slurm.sh start|stop|env" >&2; exit 2 ;;
esac
