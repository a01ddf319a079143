"""The bottom layer, which every room may use and which imports no other room: errors
(`UserError` exit 2, `RuntimeFailure` exit 1), the base model (`base.Strict`), SLURM units
(`units`), numbers as people read them (`human`), escaping trace text (`escape`), logs as the
terminal showed them (`logtext`), a GPU out-of-memory told from a job's log (`gpu_oom`), the
memory hook's dumps named (`memory_files`), external programs (`tools`), package data
(`shipped`), the home and the user's and site's folders (`paths`), whose files gh-run acts
on (`trust`) and paths read from records that stay inside their folder (`relpaths`)."""
