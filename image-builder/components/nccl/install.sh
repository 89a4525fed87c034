# nccl: NVIDIA NCCL in /opt/nccl (from nccl_url: an nccl_*_x86_64.txz tarball or a libnccl .deb)
# and the aws-ofi-nccl plugin built from source (aws_ofi_nccl_url) against libfabric and CUDA, in
# /opt/aws-ofi-nccl; both on the loader path. Requires cuda and efa. Arguments: nccl_url,
# nccl_sha256, aws_ofi_nccl_url, aws_ofi_nccl_sha256 (all required).
for a in nccl_url nccl_sha256 aws_ofi_nccl_url aws_ofi_nccl_sha256; do hpc_require_arg "$a"; done
hpc_apt_install build-essential xz-utils
work=$(mktemp -d /var/tmp/hpc-nccl.XXXXXX)
trap 'rm -rf "$work"' EXIT

# NCCL
case $HPC_ARG_NCCL_URL in
*.deb)
    hpc_fetch "$HPC_ARG_NCCL_URL" "$HPC_ARG_NCCL_SHA256" "$work/nccl.deb"
    dpkg-deb -x "$work/nccl.deb" "$work/nccl"
    src=$(dirname "$(find "$work/nccl" -name 'libnccl.so*' | head -n1)")
    [ "$src" != . ] || hpc_die "no libnccl.so in $HPC_ARG_NCCL_URL"
    rm -rf /opt/nccl
    mkdir -p /opt/nccl/lib /opt/nccl/include
    cp -a "$src"/libnccl* /opt/nccl/lib/
    find "$work/nccl" -name 'nccl*.h' -exec cp -a {} /opt/nccl/include/ \;
    ;;
*)
    hpc_fetch "$HPC_ARG_NCCL_URL" "$HPC_ARG_NCCL_SHA256" "$work/nccl.tar"
    mkdir "$work/nccl"
    tar -xf "$work/nccl.tar" -C "$work/nccl"
    lib=$(find "$work/nccl" -name 'libnccl.so*' | head -n1)
    [ -n "$lib" ] || hpc_die "no libnccl.so in $HPC_ARG_NCCL_URL"
    rm -rf /opt/nccl
    mkdir -p /opt/nccl
    cp -a "$(dirname "$(dirname "$lib")")"/. /opt/nccl/
    ;;
esac

# aws-ofi-nccl, against the EFA installer's libfabric if there is one, else Debian's.
libfabric=/usr
[ ! -d /opt/amazon/efa/lib ] || libfabric=/opt/amazon/efa
cuda=/usr
[ ! -x /usr/local/cuda/bin/nvcc ] || cuda=/usr/local/cuda
[ "$libfabric" != /usr ] || hpc_apt_install libfabric-dev
hpc_fetch "$HPC_ARG_AWS_OFI_NCCL_URL" "$HPC_ARG_AWS_OFI_NCCL_SHA256" "$work/aws-ofi-nccl.tar"
mkdir "$work/ofi"
tar -xf "$work/aws-ofi-nccl.tar" -C "$work/ofi"
src=$(dirname "$(find "$work/ofi" -maxdepth 2 \( -name configure -o -name autogen.sh \) | head -n1)")
[ "$src" != . ] || hpc_die "no configure or autogen.sh in $HPC_ARG_AWS_OFI_NCCL_URL"
cd "$src"
if [ ! -x configure ]; then
    hpc_apt_install autoconf automake libtool
    ./autogen.sh
fi
opts="--prefix=/opt/aws-ofi-nccl --with-libfabric=$libfabric --with-cuda=$cuda"
if ./configure --help | grep -q -- '--with-hwloc'; then hpc_apt_install libhwloc-dev; fi
if ./configure --help | grep -q -- '--with-nccl'; then opts="$opts --with-nccl=/opt/nccl"; fi
hpc_log "building aws-ofi-nccl: ./configure $opts"
# shellcheck disable=SC2086
./configure $opts </dev/null
make -j"$(nproc)" </dev/null
rm -rf /opt/aws-ofi-nccl
make install </dev/null
cd /
printf '%s\n' /opt/nccl/lib /opt/aws-ofi-nccl/lib >/etc/ld.so.conf.d/hpcforge-nccl.conf
ldconfig
hpc_log "NCCL in /opt/nccl, aws-ofi-nccl in /opt/aws-ofi-nccl"
