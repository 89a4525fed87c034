# mfa: PAM modules for a second SSH factor on login nodes; the node agent wires the one a
# cluster's `mfa` block names into sshd at boot. Nothing is enabled here, and no module
# configuration is written (Duo's integration keys are the user's secret, never the image's).
# Arguments: google_authenticator (TOTP codes, pam_google_authenticator.so, default true),
# duo (Duo, pam_duo.so, default true).
packages=
[ "${HPC_ARG_GOOGLE_AUTHENTICATOR:-true}" != true ] || packages="$packages libpam-google-authenticator"
[ "${HPC_ARG_DUO:-true}" != true ] || packages="$packages libpam-duo"
[ -n "$packages" ] || hpc_die "mfa: google_authenticator and duo are both false: nothing to install"
# shellcheck disable=SC2086 # a list of package names
hpc_apt_install $packages
hpc_log "installed$packages"
