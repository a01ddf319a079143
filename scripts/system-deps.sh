#!/usr/bin/env bash
# Debian packages the test suite uses beside SLURM (which scripts/devcluster.sh installs):
# shellcheck for every rendered script, chromium for the HTML report check, cron for schedules.
set -euo pipefail
want=(shellcheck chromium cron)
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
