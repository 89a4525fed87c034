# efa check: libefa is known to the dynamic linker and libfabric lists its efa provider
# (no EFA device is needed for either). Arguments: none.
ldconfig -p | grep libefa || hpc_die "libefa is not in the ldconfig cache"
fi_info=fi_info
[ ! -x /opt/amazon/efa/bin/fi_info ] || fi_info=/opt/amazon/efa/bin/fi_info
list=$("$fi_info" -l 2>&1) || { printf '%s\n' "$list"; hpc_die "$fi_info -l failed"; }
printf '%s\n' "$list"
printf '%s\n' "$list" | grep -q '^efa:' || hpc_die "libfabric has no efa provider ($fi_info -l)"
hpc_log "libefa and the libfabric efa provider are present"
