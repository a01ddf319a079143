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

# The system's Debian mirror, and the key it is signed with, taken only from the system's own
# apt sources, so that the private configuration reaches what the system reaches (a site's own
# mirror or proxy included) and nothing else. apt itself reads the sources, both formats: the
# one-line `deb [signed-by=...] URI SUITE COMPONENTS` of sources.list and *.list, and the deb822
# stanzas of *.sources (`apt-get indextargets`). The Debian archive is the `deb` entry with
# component main whose suite is this system's release (VERSION_CODENAME in os-release), else one
# named by a Debian suite alias (stable, testing, unstable, sid, oldstable); -security,
# -updates and -backports suites are other archives. Its Signed-By (a keyring path, or a key
# written into the stanza) goes with it; without one, apt's trusted keys apply, as for the
# system. No such entry: one sentence and exit 1, never a guessed mirror.
# Tests read another apt configuration (PAPT_SYSTEM_ETC: Dir::Etc) and os-release.
papt_system_source() {
    local etc="${PAPT_SYSTEM_ETC:-}" release="${PAPT_OS_RELEASE:-/etc/os-release}" codename=""
    local rows row uri suite="" entry="" pass
    command -v apt-get >/dev/null ||
        papt_die "apt-get is not installed: the tools are taken from Debian packages, so install them on a Debian system (or one with apt and Debian's sources)"
    if [[ -r $release ]]; then
        codename="$(awk -F= '$1 == "VERSION_CODENAME" {gsub(/"/, "", $2); print $2; exit}' "$release")"
    fi
    local opts=()
    [[ -z $etc ]] || opts+=(-o "Dir::Etc=$etc")
    # shellcheck disable=SC2016  # $(...) are apt's format fields, not the shell's
    rows="$(apt-get "${opts[@]}" indextargets --no-release-info \
        --format '$(TARGET_OF)|$(IDENTIFIER)|$(COMPONENT)|$(RELEASE)|$(REPO_URI)|$(SOURCESENTRY)' \
        2>/dev/null | awk -F'|' '$1 == "deb" && $2 == "Packages" && $3 == "main"')" || true
    for pass in codename alias; do
        while IFS='|' read -r _ _ _ suite uri row; do
            [[ -n $uri ]] || continue
            if [[ $pass == codename && -n $codename && $suite == "$codename" ]] ||
                [[ $pass == alias && $suite =~ ^(stable|testing|unstable|sid|oldstable|oldoldstable)$ ]]; then
                PAPT_URI="${uri%/}"
                entry="$row"
                break 2
            fi
        done <<<"$rows"
    done
    if [[ -z $entry ]]; then
        papt_die "no Debian archive in this system's apt sources (apt lists no 'deb' entry of component main for suite ${codename:-stable/testing/unstable} in ${etc:-/etc/apt}/sources.list, sources.list.d/*.list or *.sources): add the Debian mirror this machine uses there, then run again"
    fi
    PAPT_SIGNED_BY="$(papt_signed_by "${entry%:*}" "${entry##*:}")"
    if [[ $PAPT_SIGNED_BY == /* && $PAPT_SIGNED_BY != *[$'\n',]* && ! -r $PAPT_SIGNED_BY ]]; then
        papt_die "the keyring $PAPT_SIGNED_BY that $entry names (Signed-By) is missing; install it (Debian's: debian-archive-keyring) or fix that entry"
    fi
    papt_log "Debian archive $PAPT_URI (suite $suite; $entry)"
}

# papt_write_sources: the private deb822 stanza: the system's Debian mirror and key, the suites
# and components of the tools.
papt_write_sources() {
    printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: %s\n' \
        "$PAPT_URI" "$PAPT_SUITES" "$PAPT_COMPONENTS"
    [[ -z $PAPT_SIGNED_BY ]] || printf 'Signed-By: %s\n' "$PAPT_SIGNED_BY"
}

# papt_signed_by FILE N: the Signed-By of apt sources entry N of FILE (its deb822 stanza N, or
# line N of a one-line file), continuation lines of an inline key included; empty when none.
papt_signed_by() {
    local file="$1" n="$2"
    [[ -r $file ]] || return 0
    if [[ $file == *.sources ]]; then
        awk -v n="$n" '
            BEGIN { stanza = 1 }
            /^[ \t]*$/ { if (seen) stanza++; seen = 0; take = 0; next }
            /^#/ { next }
            { seen = 1 }
            stanza == n && tolower($0) ~ /^signed-by:/ {
                sub(/^[^:]*:[ \t]*/, ""); value = $0; take = 1; next
            }
            stanza == n && take && /^[ \t]/ { value = value "\n" $0; next }
            { take = 0 }
            END { printf "%s", value }
        ' "$file"
    else
        awk -v n="$n" 'NR == n {
            if (match($0, /signed-by=[^] \t]+/)) printf "%s", substr($0, RSTART + 10, RLENGTH - 10)
        }' "$file"
    fi
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
    papt_write_sources >"$PAPT_DIR/sources.list.d/gh-run.sources"
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
