# shellcheck shell=bash
# Downloading Debian packages from other suites and components than the system's, without
# touching the system: a private apt configuration in a temporary folder (deb822 sources with the
# system's own mirror and keyring, its own lists and cache), `apt-get download`, `dpkg-deb`.
# Nothing is installed by apt or dpkg; /etc/apt and /var/lib/apt are only read.
#
# Sourced by scripts/install-nsys.sh, install-apptainer.sh and build-test-image.sh, which also
# take the tools prefix (PREFIX) and the logging helpers from here. One configuration serves
# both (bookworm, trixie, sid, experimental: nsys 2024.2; main, non-free), so when GH_RUN_APT_DIR
# names an existing folder (scripts/install-tools.sh exports one) the second installer reuses the
# first's lists.
PAPT_SUITES="bookworm trixie sid experimental"
# The tools prefix every installer writes under (docs/profiling.md).
# shellcheck disable=SC2034  # read by the scripts that source this file
PREFIX="${GH_RUN_TOOLS:-/opt/gh-run}"
PAPT_COMPONENTS="main non-free"

papt_log() { printf '[%s] %s\n' "${PAPT_WHO:-install}" "$*" >&2; }
papt_die() {
    papt_log "ERROR: $*"
    exit 1
}

# The system's Debian mirror and keyring (from /etc/apt/sources.list.d/debian.sources, the
# deb822 file Debian 12 images carry), so the private configuration reaches what the system
# reaches; the public mirror and Debian's keyring otherwise.
papt_system_source() {
    local file=/etc/apt/sources.list.d/debian.sources uri="" key=""
    if [[ -r $file ]]; then
        uri="$(awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}' "$file")"
        key="$(awk '/^Signed-By:/ {print $2; exit}' "$file")"
    fi
    PAPT_URI="${uri:-http://deb.debian.org/debian}"
    PAPT_KEYRING="${key:-/usr/share/keyrings/debian-archive-keyring.gpg}"
    [[ -r $PAPT_KEYRING ]] || papt_die "Debian's archive keyring $PAPT_KEYRING is missing; install debian-archive-keyring"
}

papt_opts() {
    local d="$PAPT_DIR"
    PAPT_OPTS=(
        -o "Dir::Etc::SourceList=/dev/null"
        -o "Dir::Etc::SourceParts=$d/sources.list.d"
        -o "Dir::Etc::Preferences=/dev/null"
        -o "Dir::Etc::PreferencesParts=$d/preferences.d"
        -o "Dir::State::Lists=$d/lists"
        -o "Dir::Cache=$d/cache"
        -o "Dir::Cache::archives=$d/cache/archives"
        -o "Debug::NoLocking=1"
        -o "APT::Sandbox::User=root"
        -o "Acquire::Languages=none"
        -o "Acquire::Retries=3"
    )
}

# papt_update: create (or reuse) the private folder and fetch the package lists once.
papt_update() {
    if [[ -n ${PAPT_DIR:-} ]]; then
        return 0
    elif [[ -n ${GH_RUN_APT_DIR:-} && -d ${GH_RUN_APT_DIR:-} ]]; then
        PAPT_DIR="$GH_RUN_APT_DIR"
        PAPT_OWNED=0
    else
        PAPT_DIR="$(mktemp -d "${TMPDIR:-/tmp}/gh-run-apt.XXXXXX")"
        PAPT_OWNED=1
    fi
    papt_opts
    local stamp="$PAPT_DIR/updated"
    [[ -e $stamp ]] && return 0
    papt_system_source
    mkdir -p "$PAPT_DIR/sources.list.d" "$PAPT_DIR/preferences.d" "$PAPT_DIR/lists/partial" \
        "$PAPT_DIR/cache/archives/partial" "$PAPT_DIR/debs"
    cat >"$PAPT_DIR/sources.list.d/gh-run.sources" <<EOF
Types: deb
URIs: $PAPT_URI
Suites: $PAPT_SUITES
Components: $PAPT_COMPONENTS
Signed-By: $PAPT_KEYRING
EOF
    local t0=$SECONDS
    papt_log "private apt lists ($PAPT_SUITES; $PAPT_COMPONENTS) from $PAPT_URI into $PAPT_DIR"
    if ! apt-get "${PAPT_OPTS[@]}" -qq update >"$PAPT_DIR/update.log" 2>&1; then
        tail -n 20 "$PAPT_DIR/update.log" >&2
        papt_die "apt-get update (private lists) failed; is $PAPT_URI reachable?"
    fi
    papt_log "lists fetched in $((SECONDS - t0)) s"
    : >"$stamp"
}

# papt_version PKG SUITE: the version SUITE offers (empty when none).
papt_version() {
    # awk reads to the end: leaving early would break apt-cache's pipe and, under pipefail,
    # this function with it.
    apt-cache "${PAPT_OPTS[@]}" madison "$1" 2>/dev/null |
        awk -F'|' -v s="$2" '!found && $3 ~ ("[ /]" s "[/ ]") {gsub(/ /, "", $2); print $2; found = 1}'
}

# papt_download PKG=VERSION...: the .deb files into $PAPT_DIR/debs (already there: kept).
papt_download() {
    (cd "$PAPT_DIR/debs" && apt-get "${PAPT_OPTS[@]}" -qq download "$@" >>"$PAPT_DIR/download.log" 2>&1) || {
        tail -n 20 "$PAPT_DIR/download.log" >&2
        papt_die "apt-get download $* failed"
    }
}

# papt_deb PKG VERSION: the path of a downloaded .deb (apt escapes ':' in versions as %3a).
papt_deb() {
    local f="$PAPT_DIR/debs/${1}_${2//:/%3a}_amd64.deb"
    [[ -f $f ]] || papt_die "downloaded package $1 $2 not found in $PAPT_DIR/debs"
    printf '%s\n' "$f"
}

papt_cleanup() {
    if [[ ${PAPT_OWNED:-0} == 1 && -n ${PAPT_DIR:-} ]]; then
        rm -rf "$PAPT_DIR"
    fi
}

# papt_remove_tree DIR: remove a build folder that may still hold mounts. debootstrap mounts proc
# (and sys) inside the root it builds and unmounts them when it ends, but an unmount that finds the
# mount busy (any process reading under it at that moment) leaves it there; a plain `rm -rf` then
# walks into the live /proc or /sys. So: detach every mount under DIR, deepest first, and never
# cross into another file system.
papt_remove_tree() {
    local dir="$1" mnt
    [[ -d $dir ]] || return 0
    dir="$(cd "$dir" && pwd -P)"
    while read -r mnt; do
        umount -l "$mnt" 2>/dev/null || papt_log "could not unmount $mnt"
    done < <(awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r)
    rm -rf --one-file-system "$dir"
}
