#!/usr/bin/env bash
# Debian packages the test suite uses beside SLURM (which scripts/devcluster.sh installs):
# ShellCheck for every rendered script, chromium for the HTML report check, cron for schedules,
# debootstrap and squashfs-tools (mksquashfs) to build the test container image
# (scripts/build-test-image.sh). Nsight Systems and Apptainer are not system packages here:
# scripts/install-tools.sh puts them under $GH_RUN_TOOLS without touching apt's sources.
set -euo pipefail
want=(shellcheck chromium cron debootstrap squashfs-tools)
missing=()
for pkg in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
