# health-checks: installs /usr/local/sbin/hpc-node-health, Slurm's HealthCheckProgram: runs
# `hpc-node health <this node>` for the cluster named in /etc/hpcforge/cluster.env.
# Requires hpc-node and slurm. Arguments: none.
[ -x /usr/local/bin/hpc-node ] || hpc_die "health-checks requires the hpc-node component"
cat >/usr/local/sbin/hpc-node-health <<'WRAPPER'
#!/bin/sh
# Slurm HealthCheckProgram (installed by hpc-image's health-checks component):
# hpc-node-health [NODE] [hpc-node options]; NODE defaults to this slurmd's node name.
# HPC_CLUSTER and AWS_REGION come from /etc/hpcforge/cluster.env (written at boot).
set -eu
# Slurm runs it with a bare environment: read the system's /etc/environment (proxies, AWS
# endpoints) as a login would.
set -a
[ ! -r /etc/environment ] || . /etc/environment
[ ! -r /etc/hpcforge/cluster.env ] || . /etc/hpcforge/cluster.env
set +a
case ${1:-} in "" | -*) set -- "${SLURMD_NODENAME:-$(hostname -s)}" "$@" ;; esac
case " $* " in *" --cluster "*) ;; *) [ -z "${HPC_CLUSTER:-}" ] || set -- "$@" --cluster "$HPC_CLUSTER" ;; esac
case " $* " in *" --region "*) ;; *) [ -z "${AWS_REGION:-}" ] || set -- "$@" --region "$AWS_REGION" ;; esac
exec /usr/local/bin/hpc-node health "$@"
WRAPPER
chmod 0755 /usr/local/sbin/hpc-node-health
hpc_log "installed /usr/local/sbin/hpc-node-health"
