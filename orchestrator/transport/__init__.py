"""How gh-run reaches the machine where the SLURM clients are: this machine, or a login node
over SSH. `base.py` is the interface, `local.py` and `ssh.py` the two transports, `login.py`
the SSH settings of a cluster file made concrete, `registry.py` one transport per destination
per process. May import: core, spec, site, store."""
