# health-checks check: the HealthCheckProgram wrapper is installed and executable, the hpc-node
# binary it calls is present, and the wrapper is valid sh. Arguments: none.
w=/usr/local/sbin/hpc-node-health
[ -x "$w" ] || hpc_die "$w is missing or not executable"
[ -x /usr/local/bin/hpc-node ] || hpc_die "/usr/local/bin/hpc-node is missing"
sh -n "$w" || hpc_die "$w is not valid sh"
ls -l "$w" /usr/local/bin/hpc-node
/usr/local/bin/hpc-node --version
