#!/bin/sh
# The last N bytes of each FOLDER/JOB_*_log.err, each followed by a NUL: tails.sh N FOLDER JOB.
for f in "$2/$3"_*_log.err; do
    if [ -f "$f" ]; then
        tail -c "$1" -- "$f"
        printf '\0'
    fi
done
