# nvidia-driver: the NVIDIA driver with its kernel module built (DKMS) for every kernel of the
# image (never the build host's). method "distro": Debian's non-free nvidia-driver; method
# "runfile": NVIDIA's .run installer. Arguments: method, runfile_url, runfile_sha256.
method=${HPC_ARG_METHOD:-distro}
kernels=$(hpc_kernel_versions)
[ -n "$kernels" ] || hpc_die "no kernel installed in the target (/lib/modules/*/kernel)"
headers=$(for v in $kernels; do printf 'linux-headers-%s ' "$v"; done)
case $method in
distro)
    hpc_enable_apt_components contrib non-free non-free-firmware
    # Headers first: DKMS then builds the module for these kernels when the driver installs.
    # shellcheck disable=SC2086
    hpc_apt_install $headers
    hpc_apt_install nvidia-kernel-dkms nvidia-driver nvidia-smi firmware-misc-nonfree
    ;;
runfile)
    hpc_require_arg runfile_url
    hpc_require_arg runfile_sha256
    # shellcheck disable=SC2086
    hpc_apt_install $headers dkms build-essential pkg-config
    printf '%s\n' '# hpcforge: the NVIDIA driver replaces nouveau' 'blacklist nouveau' 'options nouveau modeset=0' \
        >/etc/modprobe.d/hpcforge-blacklist-nouveau.conf
    run=/tmp/hpc-nvidia-driver.run
    trap 'rm -f "$run"' EXIT
    hpc_fetch "$HPC_ARG_RUNFILE_URL" "$HPC_ARG_RUNFILE_SHA256" "$run"
    target=$(echo "$kernels" | tail -n1)
    sh "$run" --silent --dkms --kernel-name="$target" --no-questions </dev/null ||
        hpc_die "the NVIDIA runfile failed (see /var/log/nvidia-installer.log)"
    ! command -v update-initramfs >/dev/null 2>&1 || update-initramfs -u -k all
    ;;
*) hpc_die "method must be distro or runfile, not '$method'" ;;
esac

# DKMS builds for the kernels whose headers it finds; make sure each image kernel has the module.
hpc_dkms_autoinstall
for v in $kernels; do
    dkms status -k "$v" | grep ': installed' || hpc_die "no NVIDIA DKMS module installed for $v"
    ver=$(hpc_nvidia_module_version "$v") || hpc_die "modinfo -k $v finds no nvidia (or nvidia-current) module"
    hpc_log "NVIDIA module $ver installed for kernel $v"
done
