# hpc-node: installs the NFS client and the node agent staged by hpc-image ($HPC_FILES/hpc-node) as
# /usr/local/bin/hpc-node and its units ($HPC_FILES/systemd/) into /etc/systemd/system, not
# enabled: each node's boot script enables what its role runs. Arguments: none.
[ -n "${HPC_FILES:-}" ] || hpc_die "HPC_FILES is not set"
# The NFS client: every node mounts /home from EFS by its DNS name at boot (hpc-node *-init).
# nftables: every node keeps the instance metadata service for root and Slurm's user only.
hpc_apt_install nfs-common nftables
[ -f "$HPC_FILES/hpc-node" ] || hpc_die "no hpc-node binary staged at $HPC_FILES/hpc-node"
install -D -m 0755 -o root -g root "$HPC_FILES/hpc-node" /usr/local/bin/hpc-node
install -d -m 0755 -o root -g root /etc/hpcforge
n=0
for unit in "$HPC_FILES"/systemd/*.service "$HPC_FILES"/systemd/*.timer; do
    [ -f "$unit" ] || continue
    install -m 0644 -o root -g root "$unit" /etc/systemd/system/
    n=$((n + 1))
done
[ "$n" -gt 0 ] || hpc_die "no systemd units staged under $HPC_FILES/systemd"
hpc_log "installed /usr/local/bin/hpc-node and $n units (not enabled)"
# Slurm's ResumeProgram, SuspendProgram and ResumeFailProgram as the provider's slurm.conf names
# them: `hpc-node resume|suspend|resume-fail <hostlist>` for the cluster in cluster.env.
for cmd in resume suspend resume-fail; do
    cat >"/usr/local/sbin/hpc-node-$cmd" <<WRAPPER
#!/bin/sh
# Slurm power saving (installed by hpc-image's hpc-node component): hpc-node $cmd <hostlist>.
# Slurm runs it with a bare environment: the system's /etc/environment (proxies, AWS endpoints)
# is read as a login would; HPC_CLUSTER and AWS_REGION come from /etc/hpcforge/cluster.env
# (written at boot by hpc-node head-init).
set -eu
set -a
[ ! -r /etc/environment ] || . /etc/environment
. /etc/hpcforge/cluster.env
set +a
exec /usr/local/bin/hpc-node $cmd "\$1" --cluster "\$HPC_CLUSTER" --region "\$AWS_REGION"
WRAPPER
    chmod 0755 "/usr/local/sbin/hpc-node-$cmd"
done
hpc_log "installed /usr/local/sbin/hpc-node-{resume,suspend,resume-fail}"
