"""Input: the job file. YAML with line numbers, `extends:` and `--set` (`yamlio`), the `JobSpec`
and its parts (`job`), the container (`container`), the process environment (`envvars`),
NeMo's overrides (`nemo`). A file's own shape is its model's validation. May import: core,
nsys (a job's `profile:` is `nsys.profile.ProfileSpec`)."""
