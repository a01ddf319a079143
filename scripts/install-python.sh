#!/usr/bin/env bash
# Install extra CPython interpreters for the tests (`make test` runs the unit tests under each,
# warnings as errors: scripts/test-pythons.sh) from Debian's packages into gh-run's tools prefix:
# 3.13 (trixie) and 3.14 (sid). 3.12 is in no Debian suite (Debian went from 3.11 in bookworm to
# 3.13 in trixie) and PyPI carries no CPython builds, so it is not installed.
#
#   bash scripts/install-python.sh [X.Y...]      # default: 3.13 3.14
#
# Idempotent: a version already installed (and answering `--version`) is left alone. Nothing is
# installed through apt or dpkg and the system's apt sources are never changed: the packages are
# fetched with a private apt configuration in a temporary folder (scripts/lib/private-apt.sh) and
# unpacked with dpkg-deb. Needs root only to write the prefix.
#
# Prefix: $GH_RUN_TOOLS, default /opt/gh-run. Layout (what CPython's own `make install` makes,
# so it finds its standard library from where its program is, and so do venvs made with it):
#
#   $GH_RUN_TOOLS/python/<X.Y>/
#     bin/python<X.Y>      the interpreter (Debian links it statically with libpython)
#     lib/python<X.Y>/     the standard library, lib-dynload/ its C modules
#     lib/*.so*            the suite's glibc and the libraries the interpreter and its C modules
#                          link (OpenSSL, libffi, SQLite, expat, zlib, bz2, lzma, zstd, ...)
#     INSTALLED            what was installed, from which packages, when
#
# Debian builds these against the glibc of their suite (3.13: 2.38 at least, 3.14: 2.42), newer
# than bookworm's 2.36: the interpreter gets its suite's glibc as its program interpreter and
# RPATH (patchelf, from bookworm's package, run from the download), as Apptainer does
# (scripts/install-apptainer.sh); the system's glibc is untouched. The C modules are loaded by
# that interpreter and find their libraries through its RPATH. The install checks with the side
# dynamic linker that every program and C module resolves inside the tree.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PAPT_WHO="install-python"
# shellcheck source=scripts/lib/private-apt.sh
source "$REPO/scripts/lib/private-apt.sh"

# X.Y -> the Debian suite that carries it
declare -A SUITE=([3.13]=trixie [3.14]=sid)
ALL_VERSIONS=(3.13 3.14)
# Dependencies never copied: Python packages of the same build, and data (media types, services,
# time zones: read from the system's /etc and /usr/share when there).
SKIP_DEPS_RE='^(libpython3|python3|media-types|mime-support|netbase|tzdata|readline-common|debconf)'

versions=("$@")
((${#versions[@]})) || versions=("${ALL_VERSIONS[@]}")
for v in "${versions[@]}"; do
    [[ -n ${SUITE[$v]:-} ]] || papt_die "Python $v is not one gh-run installs; choose from: ${ALL_VERSIONS[*]}"
done

mkdir -p "$PREFIX/python"
exec 9>"$PREFIX/.install-python.lock"
flock 9
STAGE=""
trap 'papt_cleanup; rm -rf "${STAGE:-}"' EXIT

installed_ok() { # X.Y
    local dest="$PREFIX/python/$1" answer
    [[ -f $dest/INSTALLED ]] || return 1
    answer="$("$dest/bin/python$1" --version 2>/dev/null || true)"
    [[ $answer == "Python $1."* ]]
}

# Each apt-cache call reads every list (about 1.5 s here), so packages are asked about together.
# versions_in SUITE PKG...: "PKG=VERSION" for each package SUITE offers.
versions_in() {
    local suite="$1"
    shift
    apt-cache "${PAPT_OPTS[@]}" madison "$@" 2>/dev/null |
        awk -F'|' -v s="$suite" '$3 ~ ("[ /]" s "[/ ]") {
            gsub(/ /, "", $1); gsub(/ /, "", $2); if (!seen[$1]++) print $1 "=" $2
        }'
}

# lib_depends PKG=VERSION...: the packages they depend on (first alternative of each), less
# SKIP_DEPS_RE.
lib_depends() {
    apt-cache "${PAPT_OPTS[@]}" show "$@" 2>/dev/null | awk '
        /^(Pre-)?Depends:/ {
            sub(/^[^:]*: /, ""); n = split($0, deps, ", ")
            for (i = 1; i <= n; i++) { split(deps[i], alt, " [|(]"); split(alt[1], w, " "); print w[1] }
        }' | sed 's/:any$//' | grep -Ev "$SKIP_DEPS_RE" | sort -u
}

# check_closure DEST: every ELF file of the tree resolves its libraries inside it.
check_closure() {
    local dest="$1" f out bad=""
    while IFS= read -r f; do
        out="$("$dest/lib/ld-linux-x86-64.so.2" --library-path "$dest/lib" --list "$f" 2>&1 || true)"
        if [[ $out == *"not found"* ]] || awk -v d="$dest/" '$2 == "=>" && index($3, d) != 1 {found = 1} END {exit !found}' <<<"$out"; then
            bad+="$f: $(awk -v d="$dest/" '$2 == "=>" && index($3, d) != 1 {printf "%s ", $1} /not found/ {printf "%s(missing) ", $1}' <<<"$out")"$'\n'
        fi
    done < <(find "$dest/bin" "$dest/lib/python"* -type f \( -name 'python3*' -o -name '*.so' \))
    [[ -z $bad ]] || { printf '%s' "$bad" >&2; papt_die "Python: the files above take libraries from outside $dest"; }
}

smoke_test() { # DEST X.Y: the interpreter starts, finds its standard library, loads its C modules
    local py="$1/bin/python$2" out
    out="$("$py" -I -c '
import sys, ssl, sqlite3, ctypes, lzma, bz2, zlib, hashlib, decimal, uuid, json, venv
assert sys.prefix == sys.base_prefix, sys.prefix
print(sys.version.split()[0], sys.prefix, ssl.OPENSSL_VERSION, sqlite3.sqlite_version)
' 2>&1)" || { printf '%s\n' "$out" >&2; papt_die "Python $2 does not run (above)"; }
    [[ $out == *" $1 "* ]] || papt_die "Python $2 finds its prefix elsewhere: $out"
    papt_log "Python $2: $out"
}

install_version() { # X.Y
    local v="$1" suite="${SUITE[$1]}" t0=$SECONDS dest="$PREFIX/python/$1" pkgver
    if installed_ok "$v"; then
        papt_log "Python $v already installed in $dest ($(du -sm "$dest" | cut -f1) MB); nothing to do"
        return 0
    fi
    papt_update
    pkgver="$(papt_version "python$v-minimal" "$suite")"
    [[ $pkgver == "$v".* ]] ||
        papt_die "Debian $suite offers python$v-minimal '${pkgver:-none}', not $v.x; the mirror changed: update SUITE in $0"
    local wanted=("python$v-minimal=$pkgver" "libpython$v-minimal=$pkgver" "libpython$v-stdlib=$pkgver")
    # their libraries, and one level further what those link (readline's libtinfo, ...)
    local libs deps
    mapfile -t libs < <(lib_depends "${wanted[@]}")
    mapfile -t deps < <(versions_in "$suite" libc6 "${libs[@]}")
    mapfile -t libs < <({ printf '%s\n' libc6 "${libs[@]}"; lib_depends "${deps[@]}"; } | sort -u)
    mapfile -t deps < <(versions_in "$suite" "${libs[@]}")
    ((${#deps[@]} == ${#libs[@]})) ||
        papt_die "Debian $suite lacks some of ${libs[*]} (found ${deps[*]})"
    wanted+=("${deps[@]}")
    local patchelf_version
    patchelf_version="$(papt_version patchelf bookworm)"
    papt_log "Python $v: downloading ${wanted[*]} and patchelf=$patchelf_version ($suite)"
    papt_download "${wanted[@]}" "patchelf=$patchelf_version"

    STAGE="$(mktemp -d "$PREFIX/python/.staging-$v.XXXXXX")"
    local raw="$STAGE/raw" tree="$STAGE/tree"
    mkdir -p "$raw/py" "$raw/libs" "$raw/patchelf" "$tree/bin" "$tree/lib"
    for entry in "${wanted[@]:0:3}"; do dpkg-deb -x "$(papt_deb "${entry%%=*}" "${entry#*=}")" "$raw/py"; done
    for entry in "${wanted[@]:3}"; do dpkg-deb -x "$(papt_deb "${entry%%=*}" "${entry#*=}")" "$raw/libs"; done
    dpkg-deb -x "$(papt_deb patchelf "$patchelf_version")" "$raw/patchelf"

    cp "$raw/py/usr/bin/python$v" "$tree/bin/python$v"
    cp -a "$raw/py/usr/lib/python$v" "$tree/lib/python$v"
    find "$raw/libs" -regex '.*/x86_64-linux-gnu/[^/]*\.so[.0-9]*' \( -type f -o -type l \) \
        -exec cp -a -t "$tree/lib" {} +
    [[ -e $tree/lib/ld-linux-x86-64.so.2 ]] || papt_die "$suite's libc6 has no ld-linux-x86-64.so.2"
    "$raw/patchelf/usr/bin/patchelf" --set-interpreter "$dest/lib/ld-linux-x86-64.so.2" \
        --force-rpath --set-rpath "$dest/lib" "$tree/bin/python$v"
    cat >"$tree/INSTALLED" <<EOF
CPython $v for gh-run's tests, installed by scripts/install-python.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)
from Debian $suite main: ${wanted[*]}
EOF
    # The interpreter path is absolute (the final place), so the tree moves in before the checks.
    rm -rf "$dest"
    mv "$tree" "$dest"
    if ! (check_closure "$dest" && smoke_test "$dest" "$v"); then
        rm -rf "$dest"
        exit 1
    fi
    rm -rf "$STAGE"
    STAGE=""
    papt_log "Python $v installed in $dest ($(du -sm "$dest" | cut -f1) MB) in $((SECONDS - t0)) s"
}

t_all=$SECONDS
for v in "${versions[@]}"; do install_version "$v"; done
papt_log "Python: $(printf '%s ' "$PREFIX"/python/*/bin/python3.*)($((SECONDS - t_all)) s in all)"
