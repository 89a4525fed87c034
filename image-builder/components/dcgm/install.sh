# dcgm: NVIDIA Data Center GPU Manager from its datacenter-gpu-manager .deb (apt resolves its
# dependencies). Requires nvidia-driver. Arguments: deb_url, deb_sha256 (both required).
hpc_require_arg deb_url
hpc_require_arg deb_sha256
hpc_nvidia_module_version "$(hpc_kernel_versions | tail -n1)" >/dev/null ||
    hpc_die "dcgm requires the nvidia-driver component (no nvidia module for the image's kernel)"
work=$(mktemp -d /var/tmp/hpc-dcgm.XXXXXX)
trap 'rm -rf "$work"' EXIT
hpc_fetch "$HPC_ARG_DEB_URL" "$HPC_ARG_DEB_SHA256" "$work/datacenter-gpu-manager.deb"
hpc_apt_install "$work/datacenter-gpu-manager.deb"
