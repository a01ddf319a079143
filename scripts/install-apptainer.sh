#!/usr/bin/env bash
# Install Apptainer 1.4.5 (Debian sid's package), with its `singularity` command name, into gh-run's
# tools prefix, so that containerized jobs run for real on a Debian 12 machine.
#
#   bash scripts/install-apptainer.sh
#
# Idempotent: when the prefix already holds a working 1.4.5 the script returns at once. Nothing is
# installed through apt or dpkg and the system's apt sources are never changed: packages are
# fetched with a private apt configuration in a temporary folder (scripts/lib/private-apt.sh) and
# unpacked with dpkg-deb. Building images (scripts/build-test-image.sh) also needs mksquashfs
# (Debian's squashfs-tools, which scripts/system-deps.sh installs); running them as root does not.
#
# Prefix: $GH_RUN_TOOLS, default /opt/gh-run. Layout:
#
#   $GH_RUN_TOOLS/bin/apptainer    -> ../apptainer/1.4.5/usr/bin/apptainer
#   $GH_RUN_TOOLS/bin/singularity  -> ../apptainer/1.4.5/usr/bin/apptainer  (the package's
#                                     singularity.apptainer: the same program)
#   $GH_RUN_TOOLS/apptainer/1.4.5/
#     usr/bin/apptainer                        the CLI
#     usr/libexec/apptainer/bin/starter        the starter (sets the container up)
#     usr/libexec/apptainer/lib/offsetpreload.so
#     usr/lib/x86_64-linux-gnu/apptainer/...   symlinks to the two above (where the CLI looks)
#     usr/etc/apptainer/                       apptainer.conf, capability.json, ...
#     usr/var/lib/apptainer/mnt/{session,source}
#     lib/                                     trixie's glibc, bookworm's libseccomp and libsqlite3
#     INSTALLED                                what was installed, from which packages, when
#
# Why it looks like this (measured on Debian 12; see ../shared/notes/real-tools.md):
#   - sid's build asks for glibc >= 2.38 (bookworm has 2.36), for two symbols only, in the CLI and
#     the starter: both get trixie's glibc as interpreter and RPATH (patchelf, from bookworm's
#     package, run from the download); the system's glibc is untouched.
#   - Apptainer finds its files from its executable's path: with the CLI at P/usr/bin/apptainer it
#     reads P/usr/etc/apptainer and keeps sessions in P/usr/var/lib/apptainer. Debian's multiarch
#     starter path puts the starter's idea of the prefix one level off ("failed to resolve session
#     directory"), so the real starter lives in P/usr/libexec and is linked from where the CLI
#     looks for it.
#   - Where root lacks capabilities (some container hosts drop CAP_SYS_RESOURCE from the bounding
#     set), the packaged `root default capabilities = full` makes every root exec fail
#     ("Requesting capability set ... while permitted capability set is ..."): the config then says
#     `file` and capability.json gives root exactly the bounding set. Elsewhere nothing changes.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PAPT_WHO="install-apptainer"
# shellcheck source=scripts/lib/private-apt.sh
source "$REPO/scripts/lib/private-apt.sh"

VERSION="1.4.5"
DEST="$PREFIX/apptainer/$VERSION"
# package suite file-wanted: the libraries that go into lib/ (glibc from trixie: sid's would do as
# well, but trixie's is the release the notes measured).
LIB_PACKAGES=("libc6 trixie" "libseccomp2 bookworm" "libsqlite3-0 bookworm")
# Capability names by bit number (linux/capability.h), for the bounding set in /proc/self/status.
CAPS=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE
    NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO
    SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME
    SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG
    WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF CHECKPOINT_RESTORE)

mkdir -p "$PREFIX/bin" "$PREFIX/apptainer"
exec 9>"$PREFIX/.install-apptainer.lock"
flock 9
STAGE=""
trap 'papt_cleanup; rm -rf "${STAGE:-}"' EXIT

link_bins() {
    ln -sfn "../apptainer/$VERSION/usr/bin/apptainer" "$PREFIX/bin/apptainer"
    ln -sfn "../apptainer/$VERSION/usr/bin/apptainer" "$PREFIX/bin/singularity"
}

installed_ok() {
    local answer
    [[ -f $DEST/INSTALLED ]] || return 1
    answer="$("$DEST/usr/bin/apptainer" --version 2>/dev/null || true)"
    [[ $answer == "apptainer version $VERSION"* ]]
}

# The bounding set, when it lacks a capability Apptainer would ask for: comma-separated names.
bounding_caps_if_reduced() {
    local hex bits i names=()
    hex="$(awk '/^CapBnd:/ {print $2}' /proc/self/status)"
    bits=$((16#$hex))
    for i in "${!CAPS[@]}"; do
        if ((bits >> i & 1)); then names+=("CAP_${CAPS[$i]}"); fi
    done
    ((${#names[@]} < ${#CAPS[@]})) || return 0
    (IFS=,; printf '%s\n' "${names[*]}")
}

configure_capabilities() { # TREE
    local tree="$1" caps json
    caps="$(bounding_caps_if_reduced)"
    [[ -n $caps ]] || return 0
    papt_log "root's bounding set lacks capabilities: root default capabilities = file, with the bounding set"
    sed -i 's/^root default capabilities = full$/root default capabilities = file/' \
        "$tree/usr/etc/apptainer/apptainer.conf"
    json="$(sed 's/^/\t\t\t"/; s/,/",\n\t\t\t"/g; s/$/"/' <<<"$caps")"
    printf '{\n\t"users": {\n\t\t"root": [\n%s\n\t\t]\n\t},\n\t"groups": {}\n}\n' "$json" \
        >"$tree/usr/etc/apptainer/capability.json"
}

smoke_test() { # TREE: the CLI starts and the starter sets up a container from a directory
    local tree="$1" root="$STAGE/smoke-root" out
    mkdir -p "$root/bin" "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/etc"
    # A one-program root file system: a static shell is not at hand, so the check runs the
    # starter on a directory image and only asks the CLI to reach it (exit status of `true`
    # would need a libc inside; `exec` reaching the image is what proves the install).
    "$tree/usr/bin/apptainer" --version >/dev/null ||
        papt_die "apptainer $VERSION does not start (side glibc or RPATH wrong)"
    out="$("$tree/usr/bin/apptainer" exec "$root" /bin/gh-run-no-such-program 2>&1 || true)"
    if [[ $out != *"gh-run-no-such-program"* || $out == *"capabilit"* || $out == *"session directory"* ]]; then
        printf '%s\n' "$out" >&2
        papt_die "apptainer $VERSION cannot start a container (above)"
    fi
}

install() {
    local t0=$SECONDS pkgver tree entry pkg suite v patchelf
    if installed_ok; then
        link_bins
        papt_log "apptainer $VERSION already installed in $DEST ($(du -sm "$DEST" | cut -f1) MB); nothing to do"
        return 0
    fi
    papt_update
    pkgver="$(papt_version apptainer sid)"
    [[ $pkgver == "$VERSION"-* ]] ||
        papt_die "Debian sid offers apptainer '${pkgver:-none}', not $VERSION; the mirror changed: update VERSION in $0"
    local wanted=("apptainer=$pkgver")
    for entry in "${LIB_PACKAGES[@]}"; do
        read -r pkg suite <<<"$entry"
        v="$(papt_version "$pkg" "$suite")"
        [[ -n $v ]] || papt_die "Debian $suite has no $pkg"
        wanted+=("$pkg=$v")
    done
    v="$(papt_version patchelf bookworm)"
    wanted+=("patchelf=$v")
    papt_log "apptainer $VERSION: downloading ${wanted[*]} (~22 MB)"
    papt_download "${wanted[@]}"

    STAGE="$(mktemp -d "$PREFIX/apptainer/.staging-$VERSION.XXXXXX")"
    tree="$STAGE/tree"
    local raw="$STAGE/raw"
    mkdir -p "$raw/apptainer" "$raw/libs" "$raw/patchelf"
    dpkg-deb -x "$(papt_deb apptainer "$pkgver")" "$raw/apptainer"
    dpkg-deb -x "$(papt_deb patchelf "$v")" "$raw/patchelf"
    for entry in "${wanted[@]:1}"; do
        [[ ${entry%%=*} == patchelf ]] && continue
        dpkg-deb -x "$(papt_deb "${entry%%=*}" "${entry#*=}")" "$raw/libs"
    done
    patchelf="$raw/patchelf/usr/bin/patchelf"

    local multi="usr/lib/x86_64-linux-gnu/apptainer"
    mkdir -p "$tree/usr/bin" "$tree/usr/libexec/apptainer/bin" "$tree/usr/libexec/apptainer/lib" \
        "$tree/usr/etc" "$tree/usr/var/lib" "$tree/lib" "$tree/$multi/bin" "$tree/$multi/lib"
    cp "$raw/apptainer/usr/bin/apptainer" "$tree/usr/bin/apptainer"
    cp "$raw/apptainer/$multi/bin/starter" "$tree/usr/libexec/apptainer/bin/starter"
    cp "$raw/apptainer/$multi/lib/offsetpreload.so" "$tree/usr/libexec/apptainer/lib/"
    ln -s ../../../../libexec/apptainer/bin/starter "$tree/$multi/bin/starter"
    ln -s ../../../../libexec/apptainer/lib/offsetpreload.so "$tree/$multi/lib/offsetpreload.so"
    cp -a "$raw/apptainer/etc/apptainer" "$tree/usr/etc/apptainer"
    cp -a "$raw/apptainer/var/lib/apptainer" "$tree/usr/var/lib/apptainer"
    # glibc (libc6 ships /usr/lib/x86_64-linux-gnu in trixie) and the two libraries the programs
    # link, wherever their package put them.
    find "$raw/libs" -regex '.*/x86_64-linux-gnu/[^/]*\.so[.0-9]*' \( -type f -o -type l \) \
        -exec cp -a -t "$tree/lib" {} +
    [[ -e $tree/lib/ld-linux-x86-64.so.2 ]] || papt_die "trixie's libc6 has no ld-linux-x86-64.so.2"
    local prog
    for prog in usr/bin/apptainer usr/libexec/apptainer/bin/starter; do
        "$patchelf" --set-interpreter "$DEST/lib/ld-linux-x86-64.so.2" --force-rpath \
            --set-rpath "$DEST/lib" "$tree/$prog"
    done
    configure_capabilities "$tree"
    cat >"$tree/INSTALLED" <<EOF
Apptainer $VERSION, installed by gh-run's scripts/install-apptainer.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)
from Debian sid main: apptainer $pkgver; with ${wanted[*]:1}
EOF
    # The interpreter path is absolute (the final place), so the tree moves in before the check.
    rm -rf "$DEST"
    mv "$tree" "$DEST"
    if ! (smoke_test "$DEST"); then
        rm -rf "$DEST"
        exit 1
    fi
    link_bins
    papt_log "apptainer $VERSION (+ singularity) installed in $DEST ($(du -sm "$DEST" | cut -f1) MB) in $((SECONDS - t0)) s"
}

install
