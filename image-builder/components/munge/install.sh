# munge: installs munge and libmunge2 with no key; the node agent installs the cluster's key at
# boot. munge.service is made to wait for a key (skipped, not failed, while there is none).
# Arguments: none.
hpc_apt_install munge libmunge2
# Debian's postinst generates a key when there is none: an image must not carry one.
rm -f /etc/munge/munge.key
mkdir -p /etc/systemd/system/munge.service.d
printf '%s\n' '# hpcforge: images carry no key; the node agent installs it, then starts munge.' \
    '[Unit]' 'ConditionPathExists=/etc/munge/munge.key' \
    >/etc/systemd/system/munge.service.d/hpcforge-key.conf
hpc_log "munge $(dpkg-query -W -f '${Version}' munge) installed, no key"
