# lib.sh: hpc-image puts this in front of every component's install.sh and check.sh
# (scripts never source it). POSIX sh plus `local` (dash, bash); see README.md for the contract.
set -eu
: "${HPC_COMPONENT:=unknown}"
export DEBIAN_FRONTEND=noninteractive
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}"

# hpc_log MSG...: "[component] MSG" on stderr.
hpc_log() {
    printf '[%s] %s\n' "$HPC_COMPONENT" "$*" >&2
}

# hpc_die MSG...: log MSG and exit 1.
hpc_die() {
    hpc_log "error: $*"
    exit 1
}

# hpc_retry N CMD...: run CMD, retrying up to N more times (5 s apart) before failing.
hpc_retry() {
    local left="$1"
    shift
    until "$@"; do
        [ "$left" -gt 0 ] || return 1
        left=$((left - 1))
        hpc_log "failed: $* (retrying, $left more)"
        sleep 5
    done
}

hpc_apt_update() {
    hpc_retry 2 apt-get -q -o DPkg::Lock::Timeout=600 update </dev/null || hpc_die "apt-get update failed"
    HPC_APT_UPDATED=1
}

# hpc_apt_install PKG...: install without recommends, keeping existing config files.
# Updates the package lists first once per script run (or when there are none).
hpc_apt_install() {
    if [ -z "${HPC_APT_UPDATED:-}" ] || ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
        hpc_apt_update
    fi
    hpc_log "apt-get install $*"
    # On a freshly booted EC2 builder, unattended-upgrades may hold the dpkg lock for a while.
    hpc_retry 2 apt-get -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        install "$@" </dev/null || hpc_die "apt-get install $* failed"
}

# hpc_fetch URL SHA256 DEST: download URL (http(s):// or file://) to DEST, verifying its sha256.
# DEST only ever appears complete and verified.
hpc_fetch() {
    [ $# -eq 3 ] || hpc_die "usage: hpc_fetch URL SHA256 DEST"
    local url="$1" want dest="$3" got
    want=$(printf '%s' "$2" | tr 'A-F' 'a-f')
    command -v curl >/dev/null 2>&1 || hpc_apt_install curl ca-certificates
    mkdir -p "$(dirname "$dest")"
    rm -f "$dest.part"
    hpc_log "downloading $url"
    if ! curl -fsSL --retry 5 --retry-delay 3 --retry-connrefused --connect-timeout 30 \
        -o "$dest.part" "$url" </dev/null; then
        rm -f "$dest.part"
        hpc_die "download of $url failed"
    fi
    got=$(sha256sum "$dest.part" | cut -d' ' -f1)
    if [ "$got" != "$want" ]; then
        rm -f "$dest.part"
        hpc_die "sha256 mismatch for $url: expected $want, got $got"
    fi
    mv -f "$dest.part" "$dest"
}

# hpc_arg NAME: the value of $HPC_ARG_<NAME> ("" when unset); NAME in any case.
hpc_arg() {
    local var
    var=HPC_ARG_$(printf '%s' "$1" | tr 'a-z-' 'A-Z_')
    case $var in *[!A-Z0-9_]*) hpc_die "bad argument name: $1" ;; esac
    eval "printf '%s' \"\${$var:-}\""
}

# hpc_require_arg NAME: fail unless $HPC_ARG_<NAME> is set and not empty.
hpc_require_arg() {
    [ -n "$(hpc_arg "$1")" ] || hpc_die "component $HPC_COMPONENT: argument $1 is required"
}

# hpc_enable_apt_components COMP...: add archive components (contrib non-free ...) to Debian's
# sources (deb822 debian.sources and/or legacy sources.list), idempotently.
hpc_enable_apt_components() {
    local f deb822 changed=""
    for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
        [ -f "$f" ] || continue
        deb822=0
        [ "${f##*.}" != sources ] || deb822=1
        awk -v add="$*" -v deb822="$deb822" '
            function extend(line, first,   n, w, na, a, i, j, have, out) {
                n = split(line, w, /[ \t]+/); na = split(add, a, " "); out = line
                for (j = 1; j <= na; j++) {
                    have = 0
                    for (i = first; i <= n; i++) if (w[i] == a[j]) have = 1
                    if (!have) out = out " " a[j]
                }
                return out
            }
            deb822 && /^Components:/ { print extend($0, 2); next }
            !deb822 && /^[ \t]*deb(-src)?[ \t]/ { sub(/[ \t]+$/, ""); print extend($0, 3); next }
            { print }' "$f" >"$f.hpc-new"
        if cmp -s "$f" "$f.hpc-new"; then
            rm -f "$f.hpc-new"
        else
            cat "$f.hpc-new" >"$f" && rm -f "$f.hpc-new"
            changed=1
            hpc_log "enabled apt components $* in $f"
        fi
    done
    [ -z "$changed" ] || unset HPC_APT_UPDATED
}

# hpc_kernel_versions: the kernel versions installed in the target, one a line (never
# `uname -r`, which in a chroot is the build host's kernel).
hpc_kernel_versions() {
    local d
    for d in /lib/modules/*/kernel; do
        [ -d "$d" ] || continue
        d=${d%/kernel}
        echo "${d##*/}"
    done | sort -V
}

# hpc_dkms_autoinstall: build and install every DKMS module for each kernel of the target
# (`dkms autoinstall -k`), then remove any DKMS module-signing private key (an image carries none).
hpc_dkms_autoinstall() {
    local v
    for v in $(hpc_kernel_versions); do
        dkms autoinstall -k "$v" </dev/null || hpc_die "dkms autoinstall -k $v failed"
    done
    rm -f /var/lib/dkms/mok.key
}

# hpc_nvidia_module_version [KVER]: print the version of the NVIDIA kernel module for kernel
# KVER (default: the running one); fails when there is none. Debian names it nvidia-current.
hpc_nvidia_module_version() {
    local m
    for m in nvidia nvidia-current; do
        modinfo ${1:+-k "$1"} -F version "$m" 2>/dev/null && return 0
    done
    return 1
}

# hpc_start_munge_for_check: (check.sh only) make sure munged runs; with no installed key it
# runs on a temporary key under /run/hpc-check (removed by hpc_check_cleanup).
hpc_start_munge_for_check() {
    if [ ! -s /etc/munge/munge.key ]; then
        hpc_log "no /etc/munge/munge.key: using a temporary key under /run/hpc-check"
        mkdir -p /run/hpc-check /run/systemd/system/munge.service.d
        chmod 0755 /run/hpc-check
        if [ ! -s /run/hpc-check/munge.key ]; then
            (umask 077 && dd if=/dev/urandom of=/run/hpc-check/munge.key bs=1024 count=1 2>/dev/null)
        fi
        chown munge:munge /run/hpc-check/munge.key
        chmod 0400 /run/hpc-check/munge.key
        # zz-: drop-ins apply in file name order across directories; this one comes last.
        printf '%s\n' '[Unit]' 'ConditionPathExists=' '[Service]' 'ExecStart=' \
            'ExecStart=/usr/sbin/munged --key-file=/run/hpc-check/munge.key' \
            >/run/systemd/system/munge.service.d/zz-hpc-check.conf
        systemctl daemon-reload
        HPC_CHECK_CLEANUP="${HPC_CHECK_CLEANUP:-} munge"
    fi
    if ! systemctl restart munge.service || ! systemctl is-active -q munge.service; then
        systemctl status --no-pager munge.service || true
        journalctl -b --no-pager -n 30 -u munge.service || true
        hpc_die "munge.service did not start"
    fi
}

# hpc_check_cleanup: (check.sh only) stop what the check started on temporary files and
# remove them. Safe to call more than once (use it as an EXIT trap).
hpc_check_cleanup() {
    case " ${HPC_CHECK_CLEANUP:-} " in *" munge "*)
        systemctl stop munge.service || true
        rm -f /run/systemd/system/munge.service.d/zz-hpc-check.conf /run/hpc-check/munge.key
        rmdir /run/systemd/system/munge.service.d /run/hpc-check 2>/dev/null || true
        systemctl daemon-reload || true ;;
    esac
    HPC_CHECK_CLEANUP=""
}
