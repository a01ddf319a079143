"""The timeline: what every reader produces and every metric family reads (`model`), which rank
a trace is (`ranks`), where its training steps are (`step_rules`) and the interval arithmetic
over its events (`intervals`)."""
