# efa check: libefa is known to the dynamic linker and libfabric carries its efa provider. The
# provider registers only where an EFA device exists (not in this VM), so it is found in the
# library itself (the efadv calls it makes); fi_info's view is printed for the record.
# Arguments: none.
ldconfig -p | grep libefa || hpc_die "libefa is not in the ldconfig cache"
fi_info=fi_info
lib=$(ldconfig -p | awk '/libfabric\.so\.1 / { print $NF; exit }')
if [ -x /opt/amazon/efa/bin/fi_info ]; then
    fi_info=/opt/amazon/efa/bin/fi_info
    lib=$(find /opt/amazon/efa/lib /opt/amazon/efa/lib64 -maxdepth 1 -name 'libfabric.so.1*' 2>/dev/null | head -n1)
fi
[ -n "$lib" ] || hpc_die "no libfabric.so.1 found"
echo "libfabric: $lib"
grep -qa efadv_create_qp_ex "$lib" || hpc_die "$lib was built without the efa provider"
echo "--- $fi_info -l (providers with a device here)"
"$fi_info" -l 2>&1 || true
hpc_log "libefa and the libfabric efa provider are present"
