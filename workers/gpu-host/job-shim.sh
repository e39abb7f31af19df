#!/bin/sh
# The process an agent starts for each attempt (POSIX sh: a few ms, where a Node shim costs
# ~50 ms of CPU a job). It leads the attempt's process group, runs the job's command in it,
# and reports the command's wait status on fd 3, a socket to the agent. When that socket closes
# (the agent died), it kills the whole group: an attempt never outlives the agent that answers
# for it (fencing).
#
#   sh job-shim.sh <grace-seconds> <cmd> [args...]
grace=$1
shift
"$@" 3>&- &
child=$!
# Set only now, so the command keeps the default TERM; the shim stays to report.
trap '' TERM INT
(
  while read -r _; do :; done <&3
  kill -TERM 0
  sleep "$grace"
  kill -KILL 0
) &
watcher=$!
wait "$child"
status=$?
kill -KILL "$watcher" 2>/dev/null
printf '%s\n' "$status" >&3
