# enroot-pyxis: NVIDIA enroot (its .deb and the enroot+caps .deb) and the pyxis SPANK plugin, built
# from source against Debian's libslurm-dev, installed in Slurm's plugin directory and loaded via
# /etc/slurm/plugstack.conf(.d). Requires slurm. Arguments: enroot_url, enroot_sha256,
# enroot_caps_url, enroot_caps_sha256, pyxis_url, pyxis_sha256 (all required).
for a in enroot_url enroot_sha256 enroot_caps_url enroot_caps_sha256 pyxis_url pyxis_sha256; do
    hpc_require_arg "$a"
done
dpkg-query -W -f '${Status}' slurmd 2>/dev/null | grep -q 'ok installed' ||
    hpc_die "enroot-pyxis requires the slurm component"
work=$(mktemp -d /var/tmp/hpc-enroot-pyxis.XXXXXX)
trap 'rm -rf "$work"' EXIT

hpc_fetch "$HPC_ARG_ENROOT_URL" "$HPC_ARG_ENROOT_SHA256" "$work/enroot.deb"
hpc_fetch "$HPC_ARG_ENROOT_CAPS_URL" "$HPC_ARG_ENROOT_CAPS_SHA256" "$work/enroot-caps.deb"
hpc_apt_install "$work/enroot.deb" "$work/enroot-caps.deb"

# pyxis, for the Slurm installed (its plugin directory: where auth_munge.so is).
hpc_apt_install build-essential libslurm-dev
plugindir=$(dirname "$(dpkg -L slurm-wlm-basic-plugins | grep '/auth_munge\.so$' | head -n1)")
[ "$plugindir" != . ] || hpc_die "cannot find Slurm's plugin directory (auth_munge.so)"
hpc_fetch "$HPC_ARG_PYXIS_URL" "$HPC_ARG_PYXIS_SHA256" "$work/pyxis.tar"
mkdir "$work/pyxis"
tar -xf "$work/pyxis.tar" -C "$work/pyxis"
src=$(dirname "$(find "$work/pyxis" -maxdepth 2 -name Makefile | head -n1)")
[ -f "$src/spank_pyxis.lds" ] || hpc_die "$HPC_ARG_PYXIS_URL is not a pyxis source tarball"
make -C "$src" -j"$(nproc)" </dev/null
install -m 0755 "$src/spank_pyxis.so" "$plugindir/spank_pyxis.so"

mkdir -p /etc/slurm/plugstack.conf.d
echo "required $plugindir/spank_pyxis.so" >/etc/slurm/plugstack.conf.d/pyxis.conf
include='include /etc/slurm/plugstack.conf.d/*.conf'
grep -qxF "$include" /etc/slurm/plugstack.conf 2>/dev/null || echo "$include" >>/etc/slurm/plugstack.conf
hpc_log "enroot $(dpkg-query -W -f '${Version}' enroot) and pyxis ($plugindir/spank_pyxis.so) installed"
