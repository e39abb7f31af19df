#!/bin/sh
# How job-shim.sh starts a job's command as the job's own user (an agent running as root with
# job users, activities/gpu-host/job-users.ts). It runs as root, with a bare environment (the
# job's could carry LD_PRELOAD for a root process), in a mount namespace of its own (`unshare
# --mount`), where it mounts a /proc that shows the job only its own user's processes
# (hidepid=invisible): no other job's environment, command line or files under /proc/PID, and not
# the agent's. Then it becomes the job's user, with no groups, no capabilities and no way to gain
# privilege again (setpriv); only then does bash take the job's environment from fd 4 (NUL-
# separated NAME=VALUE, written there by the agent: never a file, never a command line) and run
# the command in its place: the same pid and process group, so the shim's signals and wait status
# are the command's own.
#
#   unshare --mount --propagation private sh job-isolate.sh <uid> <gid> <cmd> [args...]   (fd 4: the environment)
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
uid=$1
gid=$2
shift 2
if ! mount -t proc -o hidepid=invisible proc /proc; then
  echo "gpuplane: could not mount /proc with hidepid for the job; not starting it" >&2
  exit 126
fi
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all -- \
  /bin/bash -c 'unset PATH; while IFS= read -r -d "" kv; do export "$kv"; done <&4; exec 4<&-; exec "$@"' gpuplane-job "$@"
