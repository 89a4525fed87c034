# munge check: starts munged (on a temporary key under /run when the image has none) and
# requires `munge -n | unmunge` to succeed. Arguments: none.
trap hpc_check_cleanup EXIT
[ ! -e /etc/munge/munge.key ] || hpc_die "the image carries /etc/munge/munge.key (images must carry no key)"
hpc_start_munge_for_check
out=$(munge -n | unmunge 2>&1) || true
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q '^STATUS: *Success' || hpc_die "munge -n | unmunge did not succeed"
hpc_log "munge round trip OK"
