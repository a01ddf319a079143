#!/bin/sh
# A path as the login shell sees it ($VAR, ${VAR:-default}, a leading ~): resolve.sh PATH.
# gh-run passes only paths without quotes, backslashes, backquotes and $( (cluster.py checks
# them), so the eval below expands variables and nothing else. Exit 1: a variable is unset.
set -u
p=$1
# shellcheck disable=SC2088  # a literal "~" is what is matched here, on purpose
case $p in
    "~") p=$HOME ;;
    "~/"*) p=$HOME/${p#"~/"} ;;
esac
eval "p=\"$p\""
printf '%s\n' "$p"
