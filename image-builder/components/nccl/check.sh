# nccl check: libnccl.so.2 resolves through ldconfig and the aws-ofi-nccl plugin
# (libnccl-net*.so) is installed with all its libraries found. Arguments: none.
ldconfig -p | grep 'libnccl\.so\.2' || hpc_die "libnccl.so.2 is not in the ldconfig cache"
found=""
for p in /opt/aws-ofi-nccl/lib/libnccl-net*.so; do
    [ -e "$p" ] || continue
    found=1
    ls -l "$p"
    missing=$(ldd "$p" | grep 'not found' || true)
    [ -z "$missing" ] || hpc_die "$p: libraries not found: $missing"
done
[ -n "$found" ] || hpc_die "no aws-ofi-nccl plugin (/opt/aws-ofi-nccl/lib/libnccl-net*.so)"
