# dcgm check: `dcgmi --version` runs (no GPU needed). Arguments: none.
dcgmi --version || hpc_die "dcgmi --version failed"
