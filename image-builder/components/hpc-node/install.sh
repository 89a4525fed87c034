# hpc-node: installs the node agent staged by hpc-image ($HPC_FILES/hpc-node) as
# /usr/local/bin/hpc-node and its units ($HPC_FILES/systemd/) into /etc/systemd/system, not
# enabled: each node's boot script enables what its role runs. Arguments: none.
[ -n "${HPC_FILES:-}" ] || hpc_die "HPC_FILES is not set"
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
