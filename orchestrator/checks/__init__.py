"""Job checks: a job before it is a run. `prepare` (spec and cluster loaded, the partition
fitted, run folder, render), `preflight` (every check, each returning its problem and fix:
`fit_partition`, `submit_host`, `check_job`), `doctor` and its setup report
(`setup_report`), the controller's answer in the spec's words (`controller_answer`), GPU
counters closed to a job (`gpu_counters`), what a job needs of its partition's nodes
(`node_fit`: one node-wide collector per node, the runtime, the image's architecture read by
`sif_arch`, the GPU binding), which nsys the nodes run and so what `check` judges
(`nsys_where`). May import: core, nsys, spec, site, store, render, transport, executors,
analysis (the native readers' state for `doctor`)."""
