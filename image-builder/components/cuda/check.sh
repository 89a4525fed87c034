# cuda check: `nvcc --version` works (/usr/local/cuda/bin for the runfile, else PATH).
# Arguments: none.
nvcc=nvcc
[ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
"$nvcc" --version || hpc_die "$nvcc --version failed"
