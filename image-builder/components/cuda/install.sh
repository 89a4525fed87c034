# cuda: the CUDA toolkit (nvcc, libraries). method "distro": Debian's non-free nvidia-cuda-toolkit
# (in /usr); method "runfile": NVIDIA's cuda_*_linux.run, toolkit only (no driver), in
# /usr/local/cuda. Requires nvidia-driver. Arguments: method, runfile_url, runfile_sha256.
method=${HPC_ARG_METHOD:-distro}
hpc_nvidia_module_version "$(hpc_kernel_versions | tail -n1)" >/dev/null ||
    hpc_die "cuda requires the nvidia-driver component (no nvidia module for the image's kernel)"
case $method in
distro)
    hpc_enable_apt_components contrib non-free non-free-firmware
    hpc_apt_install nvidia-cuda-toolkit
    ;;
runfile)
    hpc_require_arg runfile_url
    hpc_require_arg runfile_sha256
    hpc_apt_install build-essential
    run=/var/tmp/hpc-cuda.run
    trap 'rm -f "$run"' EXIT
    hpc_fetch "$HPC_ARG_RUNFILE_URL" "$HPC_ARG_RUNFILE_SHA256" "$run"
    sh "$run" --silent --toolkit </dev/null || hpc_die "the CUDA runfile failed (see /var/log/cuda-installer.log)"
    [ -x /usr/local/cuda/bin/nvcc ] || hpc_die "the CUDA runfile left no /usr/local/cuda/bin/nvcc"
    echo /usr/local/cuda/lib64 >/etc/ld.so.conf.d/hpcforge-cuda.conf
    ldconfig
    # shellcheck disable=SC2016 # written for login shells to expand
    printf '%s\n' '# hpcforge: CUDA toolkit (runfile) on PATH' \
        'case ":$PATH:" in *:/usr/local/cuda/bin:*) ;; *) PATH="$PATH:/usr/local/cuda/bin" ;; esac' \
        >/etc/profile.d/hpcforge-cuda.sh
    ;;
*) hpc_die "method must be distro or runfile, not '$method'" ;;
esac
