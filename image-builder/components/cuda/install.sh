hpc_die "PLACEHOLDER: not written yet"
