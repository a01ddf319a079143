#!/usr/bin/env bash
# gh-run on aarch64 (a GH200 node's Grace CPU), proven on this x86-64 machine under qemu-user
# emulation: an arm64 Debian root, gh-run's dependencies as PyPI's arm64 wheels, the C readers
# compiled inside the root by its own gcc, then, all under emulation:
#   - the wheel built twice: with the root's compiler (the two C readers inside) and with none on
#     PATH (pure Python: the readers step aside), each installed and asked `gh-run doctor`;
#   - the unit tests of the readers (each fast path against its reference, the ctypes signatures
#     against the C prototypes) and the golden analyses (tests/golden/analysis, byte for byte the
#     files x86-64 wrote);
#   - the in-job analysis script (templates/sbatch/analysis_post.sh.j2, rendered by gh-run here)
#     on real exports, its records byte-identical to those x86-64 writes of the same files.
#
#   bash scripts/test-arm64.sh              # make test-arm64
#   GH_RUN_ARM64_KEEP=DIR bash scripts/test-arm64.sh   # keep the root in DIR, reuse it next time
#   PYTEST_ARGS='-k sqlite' bash scripts/test-arm64.sh  # a part of each pytest run
#
# How the emulation is started, and what it never touches: nothing is registered with the kernel
# (no binfmt_misc entry: the machine is shared). Every arm64 process is started by name through
# qemu-aarch64-static, Debian's qemu-user-static, unpacked here and never installed, inside a
# chroot of the root with its own /proc and /dev bind-mounted in a private mount namespace
# (unshare -m) that ends with the command. Two ways:
#   - `arm64`: a process tree that execs arm64 programs (gcc -> cc1 -> as -> ld, bash ->
#     python3, a test that starts python3) needs the kernel to know arm64 binaries, so PRoot's
#     `-q` (Debian's proot) puts qemu in front of every execve. PRoot does not translate every
#     system call of the root's newer glibc (faccessat2, behind access(), is passed through
#     untranslated), so a relative path there resolves against the wrong folder: Python's
#     os.access('out/x') says no;
#   - `arm64_direct`: one Python process and no exec, qemu alone (`unshare --root --wd`): every
#     system call goes straight to the kernel inside the root. The golden analyses run so.
# Needs root (debootstrap, chroot, unshare), debootstrap, the Debian archive of this system's
# apt sources (scripts/lib/private-apt.sh) and PyPI (pip download).
#
# Measured from nothing on the shared 2-core development machine: 881 s at a load of ~6, 2,252 s
# at a load of ~10 (the readers' tests 596 s, the golden analyses 1,005 s of it); the script
# prints each step's time. Too long for CI beside the rest (DEVELOPERS.md), so `make test-arm64`
# runs it.
#
# The root: `debootstrap --foreign --arch=arm64` (the first stage, native), then the packages it
# downloaded for the second stage unpacked with dpkg-deb, without their maintainer scripts: the
# second stage under emulation takes tens of minutes, and python3, bash and gcc need none of what
# those scripts configure. Nothing is kept across runs (CI starts from nothing) unless
# GH_RUN_ARM64_KEEP names a folder: a root left there by an earlier run is reused (only the
# checkout is copied in again), which is for looking inside and for re-running after a change;
# the versions of the Python packages are those of the repo's .venv (pip freeze), so
# architecture is the only difference from the x86-64 run.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PAPT_WHO="test-arm64"
# shellcheck source=scripts/lib/private-apt.sh
source "$REPO/scripts/lib/private-apt.sh"

SUITE=bookworm
PY_TAG=3.11 # bookworm's python3
PLATFORMS=(manylinux2014_aarch64 manylinux_2_17_aarch64 manylinux_2_28_aarch64)
# The packages of the root: python3 (gh-run), gcc and libc6-dev (the C readers, and the headers
# test_native_boundary.py parses).
INCLUDE=python3,gcc,libc6-dev
# What the tests under emulation need beyond gh-run's own dependencies.
TEST_DEPS=(pytest pytest-timeout hypothesis pycparser setuptools wheel pip)
# The tests run under emulation: each C reader against its reference and the ctypes signatures
# (under PRoot: one of them starts python3), then the golden analyses (qemu alone).
READER_TESTS=(tests/unit/test_sqlite_pages.py tests/unit/test_kineto_scan.py
    tests/unit/test_native_boundary.py)
GOLDEN_TESTS=(tests/unit/test_golden_outputs.py)

PY="$REPO/.venv/bin/python"
[[ -x $PY ]] || papt_die "no $PY: run make install first (its package versions are the ones tested)"
for tool in debootstrap unshare chroot dpkg-deb; do
    command -v "$tool" >/dev/null || papt_die "$tool is missing; run scripts/system-deps.sh"
done
[[ $(id -u) == 0 ]] || papt_die "needs root (debootstrap, chroot, unshare)"

t_start=$SECONDS
if [[ -n ${GH_RUN_ARM64_KEEP:-} ]]; then
    WORK="$GH_RUN_ARM64_KEEP"
    mkdir -p "$WORK"
else
    WORK="$(mktemp -d "${TMPDIR:-/var/tmp}/gh-run-arm64.XXXXXX")"
    trap 'papt_remove_tree "$WORK"; papt_cleanup' EXIT
fi
ROOT="$WORK/root"
X86=/opt/x86 # inside the root: PRoot, qemu and the x86-64 loader and libraries PRoot needs
step() { papt_log "[$((SECONDS - t_start)) s] $*"; }

# arm64 ARGV... : run a command inside the root under emulation, PRoot before every exec, cwd /src.
arm64() {
    unshare --mount --propagation private -- bash -c '
        root="$1"; shift
        mount --bind /proc "$root/proc" && mount --bind /dev "$root/dev" || exit 1
        exec chroot "$root" /opt/x86/ld-linux-x86-64.so.2 --library-path /opt/x86/lib \
            /opt/x86/proot -q /opt/x86/qemu-aarch64-static -w /src \
            /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
            TMPDIR=/tmp "$@"
    ' bash "$ROOT" "$@"
}

# arm64_direct ARGV... : one arm64 process that execs none, under qemu alone, cwd /src.
arm64_direct() {
    unshare --mount --propagation private -- bash -c '
        root="$1"; shift
        mount --bind /proc "$root/proc" && mount --bind /dev "$root/dev" || exit 1
        exec env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 TMPDIR=/tmp \
            unshare --root="$root" --wd=/src /opt/x86/qemu-aarch64-static "$@"
    ' bash "$ROOT" "$@"
}

timed=() # "what: N s" of each step, printed at the end
# timed WHAT CMD...: run CMD, keep its time under WHAT
timed() {
    local what="$1" t0=$SECONDS
    shift
    "$@"
    timed+=("$what: $((SECONDS - t0)) s")
}

make_root() {
    # 1. qemu-user-static, PRoot and its libtalloc: Debian's amd64 packages, unpacked.
    step "qemu-user-static and proot from Debian ($SUITE), unpacked (never installed)"
    papt_update
    local pkgs=() p v deb f
    for p in qemu-user-static proot libtalloc2; do
        v="$(papt_version "$p" "$SUITE")"
        [[ -n $v ]] || papt_die "Debian $SUITE offers no $p"
        pkgs+=("$p=$v")
    done
    papt_download "${pkgs[@]}"
    mkdir -p "$WORK/x86"
    for p in "${pkgs[@]}"; do
        dpkg-deb -x "$(papt_deb "${p%%=*}" "${p#*=}")" "$WORK/x86"
    done

    # 2. The arm64 root: debootstrap's first stage, then its packages unpacked.
    papt_system_source # PAPT_URI: the Debian archive this system uses
    [[ -e $ROOT ]] && papt_remove_tree "$ROOT" # a root left half-made by an interrupted run
    step "debootstrap --foreign --arch=arm64 --variant=minbase --include=$INCLUDE $SUITE"
    debootstrap --foreign --arch=arm64 --variant=minbase --include="$INCLUDE" "$SUITE" "$ROOT" \
        "$PAPT_URI" >"$WORK/debootstrap.log" 2>&1 ||
        { tail -n 20 "$WORK/debootstrap.log" >&2; papt_die "debootstrap failed"; }
    step "unpacking the root's $(find "$ROOT/var/cache/apt/archives" -name '*.deb' | wc -l) packages"
    for deb in "$ROOT"/var/cache/apt/archives/*.deb; do
        # merged /usr: the root's /bin, /lib, /sbin stay links into /usr
        dpkg-deb --fsys-tarfile "$deb" | tar -x --keep-directory-symlink -C "$ROOT"
    done
    rm -rf "$ROOT"/var/cache/apt/archives/*.deb
    # what base-passwd's script would have written: users for pwd lookups (pytest's tmp_path)
    for f in passwd group; do
        [[ -s $ROOT/etc/$f ]] || cp "$ROOT/usr/share/base-passwd/$f.master" "$ROOT/etc/$f"
    done
    # debootstrap leaves /proc a link to the host's: a folder, for the bind mount
    rm -f "$ROOT/proc" && mkdir -p "$ROOT/proc" "$ROOT/src" "$ROOT/out" "$ROOT$X86/lib"
    cp "$WORK/x86/usr/bin/proot" "$WORK/x86/usr/bin/qemu-aarch64-static" "$ROOT$X86/"
    cp -L "$WORK/x86/usr/lib/x86_64-linux-gnu/libtalloc.so.2" "$ROOT$X86/lib/"
    cp -L /lib/x86_64-linux-gnu/libc.so.6 "$ROOT$X86/lib/"
    cp -L /lib64/ld-linux-x86-64.so.2 "$ROOT$X86/"
    step "the root answers: $(arm64 /usr/bin/uname -m), $(arm64 /usr/bin/python3 --version)"

    # 3. gh-run's dependencies and the tests' as PyPI's arm64 wheels, at the .venv's versions.
    step "arm64 wheels from PyPI (the versions of $REPO/.venv)"
    "$PY" -m pip freeze --exclude-editable | grep -v ' @ ' >"$WORK/constraints.txt"
    local deps=() plat=()
    mapfile -t deps < <("$PY" -c '
import sys, tomllib
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' \
        "$REPO/pyproject.toml")
    for p in "${PLATFORMS[@]}"; do plat+=(--platform "$p"); done
    local site="$ROOT/usr/local/lib/python$PY_TAG/dist-packages"
    "$PY" -m pip install -q --no-warn-script-location --target "$site" --only-binary=:all: \
        --python-version "$PY_TAG" --implementation cp "${plat[@]}" -c "$WORK/constraints.txt" \
        "${deps[@]}" "${TEST_DEPS[@]}" 2>"$WORK/pip.log" ||
        { grep -v '^WARNING: Location' "$WORK/pip.log" | tail -n 20 >&2; papt_die "pip could not fetch the arm64 wheels"; }
    touch "$WORK/root.ready"
}

if [[ -e $WORK/root.ready ]]; then
    step "reusing the arm64 root of an earlier run in $WORK"
else
    timed "root and wheels" make_root
fi

# 4. The checkout (its tracked and new files, as `git status` sees them) into the root, afresh.
step "the checkout into the root"
rm -rf "$ROOT/src" "$ROOT/out" "$ROOT/opt/gh-run-cc" "$ROOT/opt/gh-run-nocc" "$ROOT/opt/nocc"
mkdir -p "$ROOT/src" "$ROOT/out"
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' | tar -c --null -T - -f -) |
    tar -x -C "$ROOT/src"

# 5. The wheel, under emulation, with the root's compiler and with none on PATH, each from its own
# copy of the checkout (setuptools builds in the source folder: a second build would reuse the
# first one's compiled parts).
wheels() {
    cp -a "$ROOT/src" "$ROOT/build-cc"
    cp -a "$ROOT/src" "$ROOT/build-nocc"
    step "gh-run's wheel built on aarch64 with gcc"
    arm64 python3 -m pip wheel -q --no-deps --no-build-isolation -w /out/cc /build-cc >"$WORK/wheel-cc.log" 2>&1 ||
        { tail -n 30 "$WORK/wheel-cc.log" >&2; papt_die "the wheel did not build with a compiler"; }
    mkdir -p "$ROOT/opt/nocc"
    ln -s /usr/bin/python3 "$ROOT/opt/nocc/python3"
    step "gh-run's wheel built on aarch64 with no compiler on PATH"
    # PATH without /usr/bin: no cc, gcc or aarch64-linux-gnu-gcc to find, as on a node without one
    arm64 /usr/bin/env PATH=/opt/nocc /opt/nocc/python3 -m pip wheel -q --no-deps \
        --no-build-isolation -w /out/nocc /build-nocc >"$WORK/wheel-nocc.log" 2>&1 ||
        { tail -n 30 "$WORK/wheel-nocc.log" >&2; papt_die "the wheel did not build without a compiler"; }
    rm -rf "$ROOT/build-cc" "$ROOT/build-nocc"
    local wheel_cc wheel_nocc native_cc native_nocc kind whl doctor
    wheel_cc="$(ls "$ROOT"/out/cc/gh_run-*.whl)"
    wheel_nocc="$(ls "$ROOT"/out/nocc/gh_run-*.whl)"
    native_cc="$(python3 -m zipfile -l "$wheel_cc" | grep -c '_\(kineto_scan\|sqlite_pages\)\..*aarch64.*\.so ' || true)"
    native_nocc="$(python3 -m zipfile -l "$wheel_nocc" | grep -c '\.so ' || true)"
    # setuptools tags both for this Python and machine (the project declares extensions); what
    # differs is what is inside
    [[ $wheel_cc == *linux_aarch64.whl && $native_cc == 2 ]] ||
        papt_die "the wheel built with gcc is $(basename "$wheel_cc") with $native_cc aarch64 readers, not 2"
    [[ $native_nocc == 0 ]] ||
        papt_die "the wheel built without a compiler holds $native_nocc compiled parts"
    step "wheels: $(basename "$wheel_cc") with the 2 C readers; without a compiler, $(basename "$wheel_nocc") with none"
    for kind in cc nocc; do
        whl="$(basename "$(ls "$ROOT/out/$kind"/gh_run-*.whl)")"
        arm64 python3 -m pip install -q --no-deps --no-index --target "/opt/gh-run-$kind" \
            "/out/$kind/$whl" >"$WORK/install-$kind.log" 2>&1 ||
            { tail -n 20 "$WORK/install-$kind.log" >&2; papt_die "the $kind wheel did not install"; }
        # -P: the installed wheel, not the checkout in the working folder
        doctor="$(arm64 /usr/bin/env PYTHONPATH="/opt/gh-run-$kind" python3 -P -m orchestrator \
            doctor 2>&1 | grep '(_kineto_scan)\|(_sqlite_pages)' || true)"
        step "installed $kind wheel, gh-run doctor: ${doctor//$'\n'/ | }"
        if [[ $kind == cc ]]; then
            [[ $(grep -c "^built .*: /opt/gh-run-cc/orchestrator/.*aarch64-linux-gnu\.so$" <<<"$doctor") == 2 ]] ||
                papt_die "gh-run doctor of the wheel built with gcc does not use its 2 C readers"
        else
            [[ $(grep -c "^not used " <<<"$doctor") == 2 ]] ||
                papt_die "gh-run doctor of the wheel built without a compiler does not say it does without the C readers"
        fi
    done
}
timed "wheels (gcc, none)" wheels

# 6. gh-run installed from the checkout as `make install` does (editable): the C readers
# compiled in place by the root's gcc, and the data folders (templates/, docs/schema/,
# examples/) mapped into the package, which `report` and the in-job analysis read.
install_checkout() {
    step "gh-run installed in the root from its checkout (editable), the C readers compiled there"
    arm64 python3 -m pip install -q --no-deps --no-build-isolation --no-index \
        --break-system-packages -e /src >"$WORK/editable.log" 2>&1 ||
        { tail -n 30 "$WORK/editable.log" >&2; papt_die "gh-run did not install from its checkout on aarch64"; }
    [[ $(find "$ROOT/src/orchestrator" -name '_*.cpython-*-aarch64-linux-gnu.so' | wc -l) == 2 ]] ||
        papt_die "the editable install compiled no aarch64 C readers (see $WORK/editable.log)"
}
timed "gh-run installed from the checkout" install_checkout

# 7. The tests, one pytest process at a time.
# shellcheck disable=SC2086  # PYTEST_ARGS: words on purpose
reader_tests() {
    step "the readers' unit tests under emulation (PRoot: one test starts python3)"
    arm64 /usr/bin/env GH_RUN_NO_SKIPS=1 python3 -m pytest -q -p no:cacheprovider \
        "${READER_TESTS[@]}" ${PYTEST_ARGS:-} || papt_die "the readers' tests failed on aarch64"
}
# shellcheck disable=SC2086  # PYTEST_ARGS: words on purpose
golden_tests() {
    step "the golden analyses under emulation (qemu alone), byte for byte x86-64's files"
    arm64_direct /usr/bin/python3 -m pytest -q -p no:cacheprovider \
        "${GOLDEN_TESTS[@]}" ${PYTEST_ARGS:-} || papt_die "the golden analyses differ on aarch64"
}
timed "readers' tests" reader_tests
timed "golden analyses" golden_tests

# 8. The in-job analysis script, rendered here, run there: records equal to x86-64's.
in_job() {
    step "the in-job analysis script on aarch64 against x86-64"
    rm -rf "$WORK/x86-records"
    "$PY" "$REPO/scripts/lib/in_job_arm64.py" prepare "$ROOT/src" "$WORK/x86-records"
    arm64 bash /src/.arm64-in-job/run.sh
    "$PY" "$REPO/scripts/lib/in_job_arm64.py" compare "$ROOT/src" "$WORK/x86-records"
}
timed "in-job analysis" in_job
step "gh-run on aarch64: all passed in $((SECONDS - t_start)) s ($(printf '%s; ' "${timed[@]}"))"
