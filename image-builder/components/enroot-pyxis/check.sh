# enroot-pyxis check: `enroot version` runs, the pyxis plugin is installed and plugstack.conf loads
# it. Arguments: none.
enroot version || hpc_die "enroot version failed"
conf=/etc/slurm/plugstack.conf.d/pyxis.conf
[ -f "$conf" ] || hpc_die "$conf is missing"
cat "$conf"
plugin=$(awk '$1 == "required" || $1 == "optional" { print $2; exit }' "$conf")
[ -f "$plugin" ] || hpc_die "the pyxis plugin $plugin is missing"
grep -q 'plugstack.conf.d' /etc/slurm/plugstack.conf || hpc_die "/etc/slurm/plugstack.conf does not include plugstack.conf.d"
ls -l "$plugin"
