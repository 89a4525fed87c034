# efa: user space for AWS EFA. method "distro": Debian's rdma-core, libefa (ibverbs-providers),
# libfabric and fi_info. method "installer": AWS's EFA installer (installer_url + installer_sha256),
# with its kernel module unless kernel_module is "false". Arguments: method, installer_url,
# installer_sha256, kernel_module.
method=${HPC_ARG_METHOD:-distro}
kmod=${HPC_ARG_KERNEL_MODULE:-true}
case $method in
distro)
    hpc_apt_install rdma-core ibverbs-providers libfabric1 libfabric-bin ibverbs-utils
    # The efa provider registers only where an EFA device exists, so `fi_info -l` cannot tell
    # here; a libfabric built with it links libefa and carries the efadv calls.
    lib=$(ldconfig -p | awk '/libfabric\.so\.1 / { print $NF; exit }')
    if [ -z "$lib" ] || ! grep -qa efadv_create_qp_ex "$lib"; then
        hpc_die "Debian's libfabric $(dpkg-query -W -f '${Version}' libfabric1) was built without the efa provider on $HPC_SUITE: use method = \"installer\""
    fi
    ;;
installer)
    hpc_require_arg installer_url
    hpc_require_arg installer_sha256
    kernels=$(hpc_kernel_versions)
    opts="-y"
    if [ "$kmod" = true ]; then
        [ -n "$kernels" ] || hpc_die "no kernel installed in the target (/lib/modules/*/kernel)"
        # shellcheck disable=SC2046 # one package per kernel
        hpc_apt_install $(for v in $kernels; do echo "linux-headers-$v"; done)
    else
        opts="$opts --skip-kmod"
    fi
    work=$(mktemp -d /tmp/hpc-efa.XXXXXX)
    trap 'rm -rf "$work"' EXIT
    hpc_fetch "$HPC_ARG_INSTALLER_URL" "$HPC_ARG_INSTALLER_SHA256" "$work/efa-installer.tar.gz"
    tar -xzf "$work/efa-installer.tar.gz" -C "$work"
    script=$(find "$work" -name efa_installer.sh | head -n1)
    [ -n "$script" ] || hpc_die "no efa_installer.sh in $HPC_ARG_INSTALLER_URL"
    # The installer builds its module for `uname -r`; in a chroot that is the build host's
    # kernel, so make `uname -r` name the image's (newest) kernel for the installer only.
    target=$(echo "$kernels" | tail -n1)
    if [ "$kmod" = true ] && [ "$(uname -r)" != "$target" ]; then
        mkdir -p "$work/bin"
        printf '#!/bin/sh\n[ "$*" = -r ] && exec echo %s\nexec /bin/uname "$@"\n' "$target" >"$work/bin/uname"
        chmod 0755 "$work/bin/uname"
        PATH="$work/bin:$PATH"
        hpc_log "building the EFA module for $target (not the host's $(/bin/uname -r))"
    fi
    # shellcheck disable=SC2086
    (cd "$(dirname "$script")" && ./efa_installer.sh $opts </dev/null) || hpc_die "efa_installer.sh failed"
    if [ "$kmod" = true ] && command -v dkms >/dev/null 2>&1; then hpc_dkms_autoinstall; fi
    ;;
*) hpc_die "method must be distro or installer, not '$method'" ;;
esac
