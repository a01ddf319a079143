#!/bin/sh
# What a job started from the login node's crontab needs from a login shell there, and the
# login node's UTC offset (cron fires in its time zone): PATH, SLURM_CONF, offset, one a line.
printf '%s\n' "$PATH" "${SLURM_CONF-}" "$(date +%z)"
