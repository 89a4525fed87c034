# mfa check: each module the component installed is in a PAM module directory and its
# libraries resolve, and the TOTP enrolment program runs. Arguments: google_authenticator, duo.
pairs=
[ "${HPC_ARG_GOOGLE_AUTHENTICATOR:-true}" != true ] ||
    pairs="$pairs libpam-google-authenticator:pam_google_authenticator.so"
[ "${HPC_ARG_DUO:-true}" != true ] || pairs="$pairs libpam-duo:pam_duo.so"
for pair in $pairs; do
    package=${pair%%:*}
    module=${pair#*:}
    path=$(dpkg -L "$package" | grep "/security/$module\$" | head -n 1)
    [ -n "$path" ] && [ -f "$path" ] || hpc_die "$package installs no PAM module $module"
    if ldd "$path" | grep -q 'not found'; then
        ldd "$path"
        hpc_die "$module has unresolved libraries"
    fi
    ls -l "$path"
done
case "$pairs" in
*pam_google_authenticator.so*)
    command -v google-authenticator >/dev/null || hpc_die "google-authenticator (enrolment) is missing"
    ;;
esac
hpc_log "PAM modules present:$pairs"
