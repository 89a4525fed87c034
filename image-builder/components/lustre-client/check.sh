# lustre-client check: the lustre module exists for the running kernel and mount.lustre is
# installed. Arguments: none.
modinfo lustre | grep -E '^(filename|version):' || hpc_die "no lustre module for the running kernel $(uname -r)"
[ -x /sbin/mount.lustre ] || hpc_die "/sbin/mount.lustre is missing"
ls -l /sbin/mount.lustre
