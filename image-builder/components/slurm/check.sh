# slurm check: runs slurmctld + slurmd through their units on a single-node config under
# /run/hpc-check/slurm (SLURM_CONF; an /etc/slurm/slurm.conf in the image is left alone, its
# plugstack.conf is used), waits for the node to be idle, runs `srun -N1 -t 1 hostname`.
# Arguments: none.
dir=/run/hpc-check/slurm
export SLURM_CONF=$dir/slurm.conf
daemons="slurmctld slurmd"

cleanup() {
    for d in $daemons; do
        systemctl stop "$d.service" 2>/dev/null || true
        rm -f "/run/systemd/system/$d.service.d/zz-hpc-check.conf"
        rmdir "/run/systemd/system/$d.service.d" 2>/dev/null || true
    done
    systemctl daemon-reload || true
    rm -rf "$dir"
    hpc_check_cleanup
    rmdir /run/hpc-check 2>/dev/null || true
}
fail() {
    hpc_log "error: $*"
    sinfo -N -l 2>&1 || true
    for d in $daemons; do
        systemctl status --no-pager "$d.service" 2>&1 | head -n 15 || true
        echo "--- $dir/$d.log (tail)"
        tail -n 40 "$dir/$d.log" 2>/dev/null || true
    done
    exit 1
}
trap cleanup EXIT

[ ! -e /etc/slurm/slurm.conf ] || hpc_log "note: the image has /etc/slurm/slurm.conf; the check uses $SLURM_CONF"
hpc_start_munge_for_check

host=$(hostname -s)
mem_mb=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
# slurmd -C knows the real sockets/cores/threads; fall back to a plain CPU count.
node=$(slurmd -C 2>/dev/null | sed -n 's/^NodeName=[^ ]* //p' | sed 's/ *RealMemory=[0-9]*//' | head -n1)
[ -n "$node" ] || node="CPUs=$(nproc)"
mkdir -p "$dir/state" "$dir/spool"
# slurmctld runs as SlurmUser (Debian 13's unit starts it as slurm right away).
chown slurm:slurm "$dir" "$dir/state"
cat >"$SLURM_CONF" <<CONF
ClusterName=verify
SlurmctldHost=$host(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 $node RealMemory=$mem_mb State=UNKNOWN
PartitionName=verify Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
# SPANK plugins the image carries (e.g. pyxis) are loaded by slurmd and srun too.
if [ -f /etc/slurm/plugstack.conf ]; then
    echo "PlugStackConfig=/etc/slurm/plugstack.conf" >>"$SLURM_CONF"
fi
echo "--- $SLURM_CONF"
cat "$SLURM_CONF"

for d in $daemons; do
    mkdir -p "/run/systemd/system/$d.service.d"
    printf '[Unit]\nConditionPathExists=\n[Service]\nEnvironment=SLURM_CONF=%s\n' "$SLURM_CONF" \
        >"/run/systemd/system/$d.service.d/zz-hpc-check.conf"
done
systemctl daemon-reload
for d in $daemons; do
    if ! systemctl start "$d.service" || ! systemctl is-active -q "$d.service"; then
        fail "$d.service did not start"
    fi
done

deadline=$(($(date +%s) + 60))
until timeout 10 sinfo -h -n "$host" -o '%t' 2>/dev/null | grep -qx 'idle'; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "node $host not idle after 60 s"
    sleep 1
done
out=$(timeout 120 srun -N1 -t 1 hostname 2>&1) || fail "srun failed: $out"
echo "srun -N1 -t 1 hostname: $out"
[ "$out" = "$(hostname)" ] || [ "$out" = "$host" ] || fail "srun printed '$out', expected $host"
sinfo
hpc_log "slurm $(sinfo --version) ran a job on $host"
