"""The timeline: what every reader produces and every metric family reads (`model`), which rank
a trace is (`ranks`), where its training steps are (`step_rules`; what a range's name says:
`step_names`), the interval arithmetic over its events (`intervals`) and grouping its rows by a
column (`columns`)."""
