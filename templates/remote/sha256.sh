#!/bin/sh
# The cluster side's manifest: size and sha256 of each FILE (paths from ROOT), one line each,
# in order; "missing -" for one that is not a regular file: sha256.sh ROOT FILE...
cd "$1" || exit 3
shift
for f do
    if [ -f "$f" ] && [ ! -h "$f" ]; then
        h=$(sha256sum <"$f") || h="unreadable -"
        s=$(wc -c <"$f" | tr -d ' ')
        printf '%s %s\n' "$s" "${h%% *}"
    else
        printf 'missing -\n'
    fi
done
