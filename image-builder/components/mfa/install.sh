# mfa: PAM modules for a second SSH factor on login nodes; the node agent wires the one a
# cluster's `mfa` block names into sshd at boot. Nothing is enabled here, and no module
# configuration is written (Duo's integration keys are the user's secret, never the image's).
# Arguments: google_authenticator (TOTP codes, pam_google_authenticator.so, default true),
# duo (Duo, pam_duo.so, default true).
packages=
[ "${HPC_ARG_GOOGLE_AUTHENTICATOR:-true}" != true ] || packages="$packages libpam-google-authenticator"
[ "${HPC_ARG_DUO:-true}" != true ] || packages="$packages libpam-duo"
[ -n "$packages" ] || hpc_die "mfa: google_authenticator and duo are both false: nothing to install"
hpc_apt_update
for p in $packages; do
    # Debian 14 (forky) ships no libpam-duo: name the argument that leaves it out.
    case $p in libpam-duo) arg=duo ;; *) arg=google_authenticator ;; esac
    [ -n "$(apt-cache policy "$p" 2>/dev/null | sed -n 's/^ *Candidate: *//p' | grep -v '(none)')" ] ||
        hpc_die "mfa: $p is not in the archive of Debian $HPC_SUITE: set $arg = false in the mfa component"
done
# shellcheck disable=SC2086 # a list of package names
hpc_apt_install $packages
hpc_log "installed$packages"
