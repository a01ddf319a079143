#!/bin/sh
# Every entry but folders in the run folders RUN... under ROOT (GNU find): list.sh ROOT RUN...
# (files, links, and FIFOs, sockets and devices, which are refused, never read or skipped)
# One record per entry, NUL-terminated: type, type of a link's target, size, path from ROOT.
# A run folder that does not exist is one record of type x.
cd "$1" || exit 3
shift
for run do
    if [ -d "$run" ]; then
        find "$run" -mindepth 1 ! -type d -printf '%y\t%Y\t%s\t%p\0'
    else
        printf 'x\t-\t0\t%s\0' "$run"
    fi
done
