"""Render: a checked job becomes its script. The Jinja environment (StrictUndefined, the `q`
shell-quoting filter), the template search, `RenderContext` and `render_job`/`render_array`
(`scripts`), a partition's task binding as the job's flags (`binding`), post-processing as
loops over rank ranges, one task per node (`node_post`); the shell itself lives in templates/.
May import: core, nsys, spec, site."""
