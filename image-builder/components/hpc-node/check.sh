# hpc-node check: `hpc-node --version` prints "hpc-node <version>" (containing
# $HPC_COMPONENT_VERSION when set) and the agent's units are installed. Arguments: none.
out=$(/usr/local/bin/hpc-node --version 2>&1) || { printf '%s\n' "$out"; hpc_die "hpc-node --version failed"; }
printf '%s\n' "$out"
case $out in "hpc-node "?*) ;; *) hpc_die "hpc-node --version printed '$out', not 'hpc-node <version>'" ;; esac
if [ -n "${HPC_COMPONENT_VERSION:-}" ]; then
    case $out in *"$HPC_COMPONENT_VERSION"*) ;; *) hpc_die "hpc-node is not version $HPC_COMPONENT_VERSION: '$out'" ;; esac
fi
ls -l /etc/systemd/system/hpc-node-* || hpc_die "no hpc-node units in /etc/systemd/system"
for cmd in resume suspend resume-fail; do
    w=/usr/local/sbin/hpc-node-$cmd
    [ -x "$w" ] || hpc_die "$w (Slurm's ${cmd} program) is missing"
    sh -n "$w" || hpc_die "$w is not valid sh"
done
command -v nft >/dev/null || [ -x /usr/sbin/nft ] || hpc_die "nft (nftables) is missing: no node could keep IMDS from its users"
echo "Slurm power-saving programs: /usr/local/sbin/hpc-node-{resume,suspend,resume-fail}"
