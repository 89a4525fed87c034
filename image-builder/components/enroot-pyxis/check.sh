# enroot-pyxis check: `enroot version` runs, the pyxis plugin is installed, plugstack.conf loads it
# and srun (on a throwaway config under /run) offers pyxis's --container-image. Arguments: none.
enroot version || hpc_die "enroot version failed"
conf=/etc/slurm/plugstack.conf.d/pyxis.conf
[ -f "$conf" ] || hpc_die "$conf is missing"
cat "$conf"
plugin=$(awk '$1 == "required" || $1 == "optional" { print $2; exit }' "$conf")
[ -f "$plugin" ] || hpc_die "the pyxis plugin $plugin is missing"
ls -l "$plugin"
grep -q 'plugstack.conf.d' /etc/slurm/plugstack.conf || hpc_die "/etc/slurm/plugstack.conf does not include plugstack.conf.d"
mkdir -p /run/hpc-check
trap 'rm -f /run/hpc-check/pyxis-slurm.conf; rmdir /run/hpc-check 2>/dev/null || true' EXIT
printf '%s\n' ClusterName=verify SlurmctldHost=localhost NodeName=localhost \
    'PartitionName=verify Nodes=localhost' PlugStackConfig=/etc/slurm/plugstack.conf \
    >/run/hpc-check/pyxis-slurm.conf
help=$(SLURM_CONF=/run/hpc-check/pyxis-slurm.conf srun --help 2>&1) || true
printf '%s\n' "$help" | grep -- '--container-image' ||
    { printf '%s\n' "$help" | tail -n 20; hpc_die "srun does not load pyxis (no --container-image option)"; }
