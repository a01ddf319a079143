# shellcheck shell=bash
# Sourced by bench/gpu_nsys.sh and bench/gpu_ddp.sh: one variant submitted through gh-run (local
# executor) and what its run folder holds collected. The caller defines PYTHON and gh().

yaml_list() { # words -> a YAML flow list of quoted strings (for --set workload.args=...)
  local out="" w
  for w in "$@"; do out+="${out:+, }'${w//\'/\'\'}'"; done
  echo "[$out]"
}

# run_variant SPEC DIR WORDS...: `gh-run submit SPEC --executor local --wait WORDS...` (its output
# in DIR/submit.txt), then the run folder's files and artifacts copied into DIR. Sets RUN_RC
# (submit's exit status) and RUN_DIR (the run folder).
# shellcheck disable=SC2034  # RUN_RC and RUN_DIR are the caller's to read
run_variant() {
  local spec=$1 dir=$2
  shift 2
  mkdir -p "$dir"
  gh submit "$spec" --executor local --wait "$@" >"$dir/submit.txt" 2>&1
  RUN_RC=$?
  RUN_DIR=$(gh status last --json |
    "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)[0]["run"]["run_dir"])')
  if [[ -d $RUN_DIR ]]; then
    find "$RUN_DIR" -maxdepth 1 -type f -exec cp {} "$dir/" \;
    cp "$RUN_DIR"/artifacts/* "$dir/" 2>/dev/null
  fi
  return 0
}
