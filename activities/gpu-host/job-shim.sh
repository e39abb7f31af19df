#!/bin/sh
# The process an agent starts for each attempt (POSIX sh: a few ms, where a Node shim costs
# ~50 ms of CPU a job). It leads the attempt's process group, runs the job's command in it,
# writes the command's wait status to <state>.status (and to fd 3, a socket to the agent).
#
# Fencing with re-attach: a watcher checks that the owning agent lives (the parent, or the pid
# a restarted agent wrote into <state>.adopt). When the owner is gone, a new agent may adopt the
# attempt until no agent of the node has reached Temporal for <window> seconds (the mtime of
# <state dir>/contact, which agents touch after every successful probe); then it marks
# <state>.fenced and kills the whole group, so an attempt never outlives the agents that answer
# for it, and a fenced attempt's status is never taken for the job's own.
#
# Where the agent made cgroups for the attempt (':'-separated folders, the cgroup2 one first), the
# command moves itself into them before it runs: everything it starts (setsid or not) stays inside,
# fencing kills them all, and its pids limit counts the job's processes only. The shim stays out,
# so a job that forks up to its limit cannot stop the shim from watching, reporting and fencing.
#
# An image job's command is `podman run` (container-run.ts): its container is conmon's child, not
# in the group, so wherever the group is SIGKILLed the container named in <state>.container (podman's
# path and the name) is removed too, SIGTERM having reached it through podman's signal proxy.
#
# Where the attempt runs as a job user (uid:gid; the agent is root), the command starts through
# job-isolate.sh: that user, its own /proc, its environment from fd 4; the shim itself stays the
# agent's, started with a bare environment (nothing of the job's reaches a root process).
#
#   sh job-shim.sh <grace-s> <window-s> <state-path-prefix> <cgroup-dirs or ""> <uid:gid or ""> <cmd> [args...]
grace=$1
window=$2
adopt="$3.adopt"
status_file="$3.status"
container_file="$3.container"
fenced_file="$3.fenced"
cgroups=$4
cgroup=${cgroups%%:*}
user=$5
contact="${3%/*}/contact"
shift 5
if [ -n "$user" ]; then
  set -- /usr/bin/unshare --mount --propagation private /bin/sh "${0%/*}/job-isolate.sh" "${user%%:*}" "${user#*:}" "$@"
fi
remove_container() {
  if [ -s "$container_file" ]; then
    read -r podman name < "$container_file"
    "$podman" rm --force --time 0 "$name" > /dev/null 2>&1
  fi
}
(
  # The subshell's own pid ($$ is the shim's), then the command in its place.
  read -r me _ < /proc/self/stat
  set -f
  IFS=:
  for d in $cgroups; do echo "$me" > "$d/cgroup.procs"; done 2>/dev/null
  unset IFS
  exec "$@"
) 3>&- &
child=$!
# The job's environment was for the command only.
exec 4<&-
# The command has its own umask (the agent's); what the shim writes from now on (status and
# fenced marks) is private to the agent's user.
umask 077
# Set only now, so the command keeps the default TERM and the job's own PATH; the shim stays
# to report, with the system's tools whatever PATH the job was given.
trap '' TERM INT
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
(
  owner=$PPID
  while :; do
    if [ -s "$adopt" ]; then owner=$(cat "$adopt"); fi
    if kill -0 "$owner" 2>/dev/null; then
      sleep 0.2
      continue
    fi
    # No agent owns the attempt. A restarted one may adopt it; but once no agent of this node
    # has reached Temporal for <window> seconds (the stamp the agents keep), the attempt may be
    # LOST and started elsewhere soon: fence it.
    last=$(stat -c %Y "$contact" 2>/dev/null || echo 0)
    if [ $(($(date +%s) - last)) -le "$window" ]; then
      sleep 0.2
      continue
    fi
    : > "$fenced_file"
    kill -TERM 0
    sleep "$grace"
    remove_container
    if [ -n "$cgroup" ]; then echo 1 > "$cgroup/cgroup.kill" 2>/dev/null; fi
    kill -KILL 0
  done
) 3>&- &
watcher=$!
wait "$child"
status=$?
kill -KILL "$watcher" 2>/dev/null
if [ ! -e "$fenced_file" ]; then
  printf '%s\n' "$status" > "$status_file.tmp" && mv "$status_file.tmp" "$status_file"
  printf '%s\n' "$status" >&3 2>/dev/null
fi
# Whatever the command left behind (in its group, or anywhere in its cgroup) dies with it, even
# with no agent watching, and even a child that ignores SIGTERM.
remove_container
if [ -n "$cgroup" ]; then echo 1 > "$cgroup/cgroup.kill" 2>/dev/null; fi
kill -KILL 0
exit 0
