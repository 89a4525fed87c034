# lustre-client: installs Lustre client .debs built for the image's kernel (e.g. the FSx for Lustre
# client packages) from a tarball, with apt so their dependencies resolve.
# Arguments: packages_url, packages_sha256 (both required).
hpc_require_arg packages_url
hpc_require_arg packages_sha256
work=$(mktemp -d /var/tmp/hpc-lustre.XXXXXX)
trap 'rm -rf "$work"' EXIT
hpc_fetch "$HPC_ARG_PACKAGES_URL" "$HPC_ARG_PACKAGES_SHA256" "$work/packages.tar"
command -v xz >/dev/null 2>&1 || hpc_apt_install xz-utils
mkdir "$work/debs"
tar -xf "$work/packages.tar" -C "$work/debs"
debs=$(find "$work/debs" -name '*.deb' | sort)
[ -n "$debs" ] || hpc_die "no .deb in $HPC_ARG_PACKAGES_URL"
# shellcheck disable=SC2086
hpc_apt_install $debs
# A DKMS flavour builds for `uname -r` (the host's, in a chroot): build for the image's kernels.
kernels=$(hpc_kernel_versions)
if command -v dkms >/dev/null 2>&1; then hpc_dkms_autoinstall; fi
newest=$(echo "$kernels" | tail -n1)
modinfo -k "$newest" lustre >/dev/null 2>&1 || hpc_die "the packages carry no lustre module for the image's kernel $newest"
for v in $kernels; do
    modinfo -k "$v" lustre >/dev/null 2>&1 || hpc_log "warning: no lustre module for kernel $v"
done
hpc_log "Lustre client $(modinfo -k "$newest" -F version lustre 2>/dev/null) installed for $newest"
