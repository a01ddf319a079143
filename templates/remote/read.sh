#!/bin/sh
# A file from a byte offset, or its last bytes: read.sh PATH from OFFSET | read.sh PATH tail N.
# Exit 3: there is no such file (yet).
[ -f "$1" ] || exit 3
if [ "$2" = tail ]; then exec tail -c "$3" -- "$1"; fi
exec tail -c "+$(($3 + 1))" -- "$1"
