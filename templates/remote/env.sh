#!/bin/sh
# Run "$@" with N more variables read from stdin, one NAME=VALUE per line: values (secrets)
# never appear on a command line of the login node, where `ps` would show them. $1 is N.
n=$1
shift
while [ "$n" -gt 0 ]; do
    IFS= read -r kv || exit 97
    export "${kv?}"
    n=$((n - 1))
done
exec "$@"
