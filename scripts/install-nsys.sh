#!/usr/bin/env bash
# Install the Nsight Systems CLI (nsys) from Debian's non-free packages into gh-run's tools prefix:
# 2023.4.4 (trixie, the default `nsys`), 2022.4.2 (bookworm) and 2024.2.3 (experimental), side by
# side for version tests.
#
#   bash scripts/install-nsys.sh [VERSION...]      # default: 2023.4.4 2022.4.2 2024.2.3
#
# Idempotent: a version already installed (and answering `nsys --version`) is left alone and the
# script returns at once. Nothing is installed through apt or dpkg and the system's apt sources are
# never changed: the packages are fetched with a private apt configuration in a temporary folder
# (scripts/lib/private-apt.sh) and unpacked with dpkg-deb. Needs root only to write the prefix.
#
# Prefix: $GH_RUN_TOOLS, default /opt/gh-run. Layout (self-contained: the tree of one version can be
# copied or packed to another x86-64 machine and run from there, e.g. on a GPU machine):
#
#   $GH_RUN_TOOLS/bin/nsys               -> ../nsys/2023.4.4/target-linux-x64/nsys  (the default)
#   $GH_RUN_TOOLS/bin/nsys-2023.4        -> ../nsys/2023.4.4/target-linux-x64/nsys
#   $GH_RUN_TOOLS/bin/nsys-2022.4        -> ../nsys/2022.4.2/target-linux-x64/nsys
#   $GH_RUN_TOOLS/bin/nsys-2024.2        -> ../nsys/2024.2.3/target-linux-x64/nsys
#   $GH_RUN_TOOLS/nsys/<VERSION>/
#     target-linux-x64/   nsys, its launcher and injection libraries, CUPTI, python/, reports/
#     host-linux-x64/     QdstrmImporter (turns a capture into .nsys-rep), the libraries in its
#                         closure (exporter, analysis, boost, arrow, ...), python/lib, reports/
#     INSTALLED           what was installed, from which packages, when
#
# NVIDIA's own layout, which Debian splits: nsys resolves its real path and runs
# ../host-linux-x64/QdstrmImporter beside it, so both folders sit side by side. Fixes applied:
#   - host-linux-x64/libssh.so.4 is Debian's symlink to a system library: the real file from
#     bookworm's libssh-4 goes in its place (and libssh.so points at it);
#   - host-linux-x64/libpfm.so.4 (bookworm's libpfm4) is added: the importer needs it;
#   - what the programs link beyond glibc, libstdc++ and zlib is copied beside them (their RPATH
#     is $ORIGIN), from bookworm: libelf.so.1 (2023.4's nsys) into target-linux-x64/; libcrypto,
#     the Kerberos/GSSAPI libraries, libkeyutils and libcom_err (libssh's) into host-linux-x64/.
#     A minimal Debian image or a fresh CI machine has none of them; the install checks with ldd
#     that nothing else comes from the system;
#   - 2023.4, 2024.2: `nsys stats` imports nsysstats/gpustats from host-linux-x64/python/lib, where
#     Debian leaves only kernel_helper.py ("No module named 'nsysstats'"; 2024.2's --help-reports
#     then lists nothing): the target's copies go there;
#   - 2024.2: the importer links libarrow.so.500, which Debian ships apart (experimental's
#     libarrow500, which links only glibc and the C++ runtime): copied into host-linux-x64/. The
#     target package's `libc6 (>> 2.42)` comes from two weak GLIBC_PRIVATE references in
#     libToolsInjection64.so (trixie's 2023.4 has the same); every binary needs GLIBC 2.17 at most,
#     so it runs on bookworm unpacked as is.
# Left out, as the CLI never uses them: from host-linux-x64 everything but QdstrmImporter,
# ResolveSymbols, the libraries they link (found with ldd) and python/, reports/, rules/ (so the
# GUI: Qt, ICU, WebEngine, translations, plugins, nsys-ui); from target-linux-x64 CollectX, the
# sqlite3 program, and every CUPTI but the newest (2023.4: libcupti.so.12.4; 2022.4: 11.8).
#
# What else could be dropped, per need (the GPU helper may when packing):
#   - only for GPU metrics (--gpu-metrics-device): target-linux-x64/libnvperf_grfx_host.so
#     (2023.4, 2024.2; 27 MB, ~8 MiB of the ~35 MiB that `xz -9e` packs the 2023.4 tree to) or
#     libnvperf_host.so (2022.4), and target-linux-x64/GpuMetrics/ (2023.4, 2024.2) or
#     GpuMetrics.config (2022.4);
#   - only for GPU context-switch tracing (--gpuctxsw): target-linux-x64/nvgpucs;
#   - only for CUDA tracing (keep on a GPU machine; useless on a CPU-only one): libcupti.so.*,
#     libToolsInjectionCuBLAS64_*.so, libToolsInjectionCuDNN64_*.so, CudaGpuInfoDumper;
#   - only for MPI/UCX/OpenSHMEM tracing: libToolsInjection{MPICH,OpenMPI,OpenSHMEM,UCP}64.so;
#   - only for Vulkan tracing: target-linux-x64/vulkan-layers/;
#   - only for `nsys recipe`: target-linux-x64/python/packages/ (2023.4).
# Everything else (nsys, the launcher, libToolsInjection64/Proxy64/MemoryAllocator, python/,
# reports/, rules/, and all of host-linux-x64/) is needed to profile, export and summarise.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PAPT_WHO="install-nsys"
# shellcheck source=scripts/lib/private-apt.sh
source "$REPO/scripts/lib/private-apt.sh"

# The default `nsys` stays 2023.4: clusters/dev.yaml declares it (`nsys.version: "2023.4"`) and
# the other versions are reached by name (nsys-2022.4, nsys-2024.2), as a site with several would.
DEFAULT_VERSION="2023.4.4"
ALL_VERSIONS=(2023.4.4 2022.4.2 2024.2.3)
# version -> the Debian suite that carries it (trixie's 2023.4 build runs on bookworm's glibc;
# sid's does not; experimental's 2024.2 does, see above). Experimental is pinned low by apt, which
# does not matter: the version is always named.
declare -A SUITE=([2023.4.4]=trixie [2022.4.2]=bookworm [2024.2.3]=experimental)
# Libraries the programs link that are not in every base system (a Debian 12 container image has
# none of them), from bookworm (they need glibc 2.34 at most): copied next to the programs, whose
# RPATH is $ORIGIN. Package -> the file it provides -> the folder it goes to.
EXTRA_LIBS=(
    "libssh-4 libssh.so.4 host" "libpfm4 libpfm.so.4 host" "libelf1 libelf.so.1 target"
    "libssl3 libcrypto.so.3 host" "libgssapi-krb5-2 libgssapi_krb5.so.2 host"
    "libkrb5-3 libkrb5.so.3 host" "libk5crypto3 libk5crypto.so.3 host"
    "libkrb5support0 libkrb5support.so.0 host" "libkeyutils1 libkeyutils.so.1 host"
    "libcom-err2 libcom_err.so.2 host"
)
# Per version, beyond EXTRA_LIBS: "package file folder suite" (the package from the version's own
# suite and build: libarrow500 is built from the same source as nsight-systems).
declare -A VERSION_LIBS=([2024.2.3]="libarrow500 libarrow.so.500 host experimental")
# What the programs may still take from the system: glibc, the C++ runtime and zlib, which every
# distribution a GPU cluster runs has.
BASE_LIBS_RE='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libutil|libresolv|libgcc_s|libstdc\+\+|libz)\.so'

versions=("$@")
((${#versions[@]})) || versions=("${ALL_VERSIONS[@]}")
for v in "${versions[@]}"; do
    [[ -n ${SUITE[$v]:-} ]] || papt_die "nsys $v is not one gh-run installs; choose from: ${!SUITE[*]}"
done

mkdir -p "$PREFIX/bin" "$PREFIX/nsys"
exec 9>"$PREFIX/.install-nsys.lock"
# Two installs at once (two checkouts running `make deps`) take turns; the second finds it done.
flock 9
trap 'papt_cleanup; rm -rf "${STAGE:-}"' EXIT

installed_ok() { # VERSION: the tree is complete and nsys answers with that version
    local dir="$PREFIX/nsys/$1" answer
    [[ -f $dir/INSTALLED ]] || return 1
    answer="$("$dir/target-linux-x64/nsys" --version 2>/dev/null || true)"
    [[ $answer == *"version $1."* ]]
}

link_bins() { # VERSION
    local v="$1" mm
    mm="$(cut -d. -f1,2 <<<"$v")"
    ln -sfn "../nsys/$v/target-linux-x64/nsys" "$PREFIX/bin/nsys-$mm"
    if [[ $v == "$DEFAULT_VERSION" ]]; then
        ln -sfn "../nsys/$v/target-linux-x64/nsys" "$PREFIX/bin/nsys"
    fi
}

# The GUI is most of the host package and never serves the CLI: skipped while unpacking (the
# closure pass below keeps only what the importer links anyway).
HOST_EXCLUDES=(
    --exclude='*/host-linux-x64/libQt6*' --exclude='*/host-linux-x64/libicu*'
    --exclude='*/host-linux-x64/Plugins' --exclude='*/host-linux-x64/translations'
    --exclude='*/host-linux-x64/resources' --exclude='*/host-linux-x64/libexec'
)
TARGET_EXCLUDES=(--exclude='*/target-linux-x64/CollectX' --exclude='*/target-linux-x64/sqlite3')

unpack() { # DEB DIR-IN-PACKAGE DEST EXCLUDES...
    local deb="$1" inner="$2" dest="$3"
    shift 3
    mkdir -p "$STAGE/unpack"
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$STAGE/unpack" "$@" "./$inner"
    mv "$STAGE/unpack/$inner" "$dest"
    rm -rf "$STAGE/unpack"
}

# HOST-DIR: keep the programs the CLI runs from host-linux-x64 (the importer; the symbol
# resolver), the libraries in their closure (names and the files they link to), and the data
# folders; everything else there serves the GUI. `nsys export` (every --type) and `nsys stats`
# run in the target's nsys itself and need only python/ and reports/ from here.
prune_host() {
    local host="$1" f name deps
    local -A keep=([QdstrmImporter]=1 [ResolveSymbols]=1 [python]=1 [reports]=1 [rules]=1)
    for f in QdstrmImporter ResolveSymbols; do
        deps="$(LD_LIBRARY_PATH="$host" ldd "$host/$f" 2>/dev/null || true)"
        while read -r f; do
            [[ $f == "$host"/* ]] || continue
            keep[$(basename "$f")]=1
            keep[$(basename "$(readlink -f "$f")")]=1
        done < <(awk '$2 == "=>" {print $3}' <<<"$deps")
    done
    for f in "$host"/*; do
        name="${f##*/}"
        [[ -n ${keep[$name]:-} || $name == *.template || $name == *.ini || $name == *.config ]] ||
            rm -rf "$f"
    done
}

prune_cupti() { # TARGET-DIR: keep the newest CUPTI only
    local target="$1" newest f
    newest="$(find "$target" -maxdepth 1 -name 'libcupti.so.*' -printf '%f\n' | sort -V | tail -n 1)"
    for f in "$target"/libcupti.so.*; do
        [[ -e $f && ${f##*/} != "$newest" ]] && rm -f "$f"
    done
    return 0
}

smoke_test() { # DIR VERSION: profile a short program, export it, summarise it
    local dir="$1" v="$2" nsys="$1/target-linux-x64/nsys" out="$STAGE/smoke" report deps
    mkdir -p "$out"
    local prog outside
    for prog in target-linux-x64/nsys host-linux-x64/QdstrmImporter; do
        deps="$(ldd "$dir/$prog" 2>&1 || true)"
        if [[ $deps == *"not found"* ]]; then
            printf '%s\n' "$deps" >&2
            papt_die "nsys $v: $prog misses libraries (above)"
        fi
        # Self-contained: beyond the base libraries, everything resolves inside the tree.
        outside="$(awk -v d="$dir/" '$2 == "=>" && index($3, d) != 1 {print $1}' <<<"$deps" |
            grep -Ev "$BASE_LIBS_RE" || true)"
        [[ -z $outside ]] || papt_die "nsys $v: $prog takes $(tr '\n' ' ' <<<"$outside")from the system; add them to EXTRA_LIBS"
    done
    "$nsys" profile --trace=osrt --sample=none --cpuctxsw=none --force-overwrite=true \
        --output="$out/smoke" /bin/sleep 0.1 >"$out/profile.log" 2>&1 ||
        { cat "$out/profile.log" >&2; papt_die "nsys $v: profiling /bin/sleep failed"; }
    [[ -s $out/smoke.nsys-rep ]] ||
        { cat "$out/profile.log" >&2; papt_die "nsys $v: no .nsys-rep written (importer missing?)"; }
    "$nsys" export --type=sqlite --force-overwrite=true --output="$out/smoke.sqlite" \
        "$out/smoke.nsys-rep" >"$out/export.log" 2>&1 ||
        { cat "$out/export.log" >&2; papt_die "nsys $v: export to SQLite failed"; }
    # The OS-runtime summary under the name this version knows (nsys stats exits 0 either way:
    # the CSV is the proof).
    report=osrt_sum
    [[ $v == 2022.* ]] && report=osrtsum
    "$nsys" stats --report="$report" --format=csv --force-overwrite=true --output="$out/smoke" \
        "$out/smoke.sqlite" >"$out/stats.log" 2>&1 || true
    [[ -s $out/smoke_$report.csv ]] ||
        { cat "$out/stats.log" >&2; papt_die "nsys $v: nsys stats wrote no $report CSV"; }
}

install_version() { # VERSION
    local v="$1" suite="${SUITE[$1]}" t0=$SECONDS pkgver dest tree
    dest="$PREFIX/nsys/$v"
    if installed_ok "$v"; then
        link_bins "$v"
        papt_log "nsys $v already installed in $dest ($(du -sm "$dest" | cut -f1) MB); nothing to do"
        return 0
    fi
    papt_update
    pkgver="$(papt_version nsight-systems "$suite")"
    [[ $pkgver == "$v".* ]] ||
        papt_die "Debian $suite non-free offers nsight-systems '${pkgver:-none}', not $v.x; the mirror changed: update SUITE in $0"
    papt_log "nsys $v: downloading nsight-systems and nsight-systems-target $pkgver ($suite non-free, ~190 MB)"
    local libs=() lib entry lib_suite lib_version entries=("${EXTRA_LIBS[@]}")
    [[ -n ${VERSION_LIBS[$v]:-} ]] && entries+=("${VERSION_LIBS[$v]}")
    for entry in "${entries[@]}"; do
        read -r lib _ _ lib_suite <<<"$entry"
        lib_suite="${lib_suite:-bookworm}"
        lib_version="$(papt_version "$lib" "$lib_suite")"
        [[ -n $lib_version ]] || papt_die "Debian $lib_suite offers no $lib; the mirror changed: update $0"
        libs+=("$lib=$lib_version")
    done
    papt_download "nsight-systems=$pkgver" "nsight-systems-target=$pkgver" "${libs[@]}"

    STAGE="$(mktemp -d "$PREFIX/nsys/.staging-$v.XXXXXX")"
    tree="$STAGE/tree"
    mkdir -p "$tree"
    unpack "$(papt_deb nsight-systems-target "$pkgver")" \
        usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64 "$tree/target-linux-x64" \
        "${TARGET_EXCLUDES[@]}"
    unpack "$(papt_deb nsight-systems "$pkgver")" \
        usr/lib/nsight-systems/host-linux-x64 "$tree/host-linux-x64" "${HOST_EXCLUDES[@]}"
    prune_cupti "$tree/target-linux-x64"

    mkdir -p "$STAGE/libs"
    for lib in "${libs[@]}"; do dpkg-deb -x "$(papt_deb "${lib%%=*}" "${lib#*=}")" "$STAGE/libs"; done
    local soname where file
    for entry in "${entries[@]}"; do
        read -r lib soname where _ <<<"$entry"
        file="$(find "$STAGE/libs" -name "$soname" -print -quit)"
        [[ -n $file ]] || papt_die "package $lib has no $soname"
        rm -f "$tree/$where-linux-x64/$soname"
        cp -L "$file" "$tree/$where-linux-x64/$soname"
    done
    # Debian's libssh.so points into the system; the development name follows the copy.
    ln -sfn libssh.so.4 "$tree/host-linux-x64/libssh.so"
    local py
    mkdir -p "$tree/host-linux-x64/python/lib"
    for py in nsysstats.py gpustats.py; do
        if [[ -f $tree/target-linux-x64/python/lib/$py && ! -f $tree/host-linux-x64/python/lib/$py ]]; then
            cp "$tree/target-linux-x64/python/lib/$py" "$tree/host-linux-x64/python/lib/$py"
        fi
    done
    prune_host "$tree/host-linux-x64"

    smoke_test "$tree" "$v"
    cat >"$tree/INSTALLED" <<EOF
Nsight Systems CLI $v, installed by gh-run's scripts/install-nsys.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)
from Debian $suite non-free: nsight-systems $pkgver, nsight-systems-target $pkgver
with ${libs[*]} (bookworm's, but for those named in VERSION_LIBS)
EOF
    rm -rf "$dest"
    mv "$tree" "$dest"
    rm -rf "$STAGE"
    STAGE=""
    link_bins "$v"
    papt_log "nsys $v installed in $dest ($(du -sm "$dest" | cut -f1) MB) in $((SECONDS - t0)) s"
}

t_all=$SECONDS
for v in "${versions[@]}"; do install_version "$v"; done
papt_log "nsys: $("$PREFIX/bin/nsys" --version 2>/dev/null | head -n 1) is $PREFIX/bin/nsys; $(printf '%s ' "$PREFIX"/bin/nsys-*) ($((SECONDS - t_all)) s in all)"
