# nvidia-driver check: the NVIDIA kernel module exists for the running kernel (`modinfo nvidia`,
# or nvidia-current as Debian names it); no GPU is needed (none in verification). Arguments: none.
k=$(uname -r)
for m in nvidia nvidia-current; do
    if modinfo "$m" >/dev/null 2>&1; then
        modinfo "$m" | grep -E '^(filename|version|vermagic):'
        hpc_log "NVIDIA module $m $(modinfo -F version "$m") for kernel $k"
        exit 0
    fi
done
modinfo nvidia || true
hpc_die "no nvidia (or nvidia-current) module for the running kernel $k"
