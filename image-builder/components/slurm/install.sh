# slurm: installs slurmd, slurmctld, slurm-client and pam_slurm_adopt (+ slurmdbd and MariaDB's server with
# accounting) from Debian, installed disabled: the node's boot script enables the daemons its
# role runs (head-init: MariaDB for local accounting, slurmdbd, slurmctld). Requires munge.
# Arguments: version ("distro", or a Debian package version to pin), accounting ("true"/"false").
version=${HPC_ARG_VERSION:-distro}
accounting=${HPC_ARG_ACCOUNTING:-false}
case $accounting in true | false) ;; *) hpc_die "accounting must be true or false, not '$accounting'" ;; esac
dpkg-query -W -f '${Status}' munge 2>/dev/null | grep -q 'ok installed' ||
    hpc_die "slurm requires the munge component"

# libpam-slurm-adopt: compute nodes admit a user by SSH only while a job of theirs runs there.
pkgs="slurmd slurmctld slurm-client libpam-slurm-adopt"
daemons="slurmd slurmctld"
if [ "$accounting" = true ]; then
    pkgs="$pkgs slurmdbd"
    daemons="$daemons slurmdbd"
fi
dbpkgs=""
[ "$accounting" = false ] || dbpkgs="mariadb-server mariadb-client"
if [ "$version" != distro ]; then
    pkgs=$(for p in $pkgs; do printf '%s=%s ' "$p" "$version"; done)
fi
# shellcheck disable=SC2086 # word splitting intended
hpc_apt_install $pkgs $dbpkgs
# munge's postinst may have made a key if munge came in only now; an image carries none.
rm -f /etc/munge/munge.key

# The daemons must not start without their config: Debian's units say so; make sure.
for d in $daemons; do
    conf=/etc/slurm/slurm.conf
    [ "$d" != slurmdbd ] || conf=/etc/slurm/slurmdbd.conf
    unit=""
    for u in /usr/lib/systemd/system/"$d".service /lib/systemd/system/"$d".service; do
        [ -n "$unit" ] || [ ! -f "$u" ] || unit=$u
    done
    [ -n "$unit" ] || hpc_die "no $d.service unit installed"
    if ! grep -q "^ConditionPathExists=$conf" "$unit"; then
        hpc_log "$unit lacks ConditionPathExists=$conf: adding a drop-in"
        mkdir -p "/etc/systemd/system/$d.service.d"
        printf '[Unit]\nConditionPathExists=%s\n' "$conf" >"/etc/systemd/system/$d.service.d/hpcforge-conf.conf"
    fi
    systemctl disable "$d.service" 2>/dev/null || true
done
if [ -n "$dbpkgs" ]; then
    # Only a head node with local accounting runs the database; it enables it at boot.
    systemctl disable mariadb.service 2>/dev/null || true
fi
hpc_log "slurm $(dpkg-query -W -f '${Version}' slurmd) installed; $daemons disabled until the boot script enables them"
