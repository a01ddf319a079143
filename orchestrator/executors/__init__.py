"""Executors: where a job runs and how it is tracked. One interface (`base`: `Executor`,
`JobStatus`, `not_here`), SLURM (`slurm`: sbatch, scancel; `slurm_watch`: submitit's watcher,
one sacct per poll), bash on this machine (`local`), the choice (`choose`), which SLURM cluster
a controller is (`cluster_identity`) and what its partitions are (`slurm_import`). May import:
core, nsys, spec, site, store, transport."""
