#!/bin/sh
# spec/without-userns.sh [-u USER] COMMAND [ARG...]
#
# Runs COMMAND where user namespaces are disabled, as on a host or in a
# container with user.max_user_namespaces = 0, without touching the host's
# own setting: a fresh user namespace whose uids and gids 0-65535 map to
# the same ids outside, in which user.max_user_namespaces is set to 0 (the
# limit holds for that namespace and everything below it). COMMAND runs as
# root of that namespace — uid 0 with capabilities there, none on the host —
# or, with -u, as USER (through runuser). docs/testing.md uses it to run the
# suite without user namespaces. Needs root.
set -eu

user=""
if [ "${1:-}" = "-u" ]; then user=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: $0 [-u USER] COMMAND [ARG...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "without-userns: needs root (to map uids 0-65535)" >&2; exit 2; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkfifo "$dir/go"

# The child unshares, then waits for its uid and gid maps; it execs again
# once mapped, so that it is uid 0 of the namespace with its capabilities.
unshare --user -- /bin/sh -c '
  read -r _ < "$0"
  exec /bin/sh -c "
    echo 0 > /proc/sys/user/max_user_namespaces
    if [ -n \"\$0\" ]; then exec runuser -u \"\$0\" -- \"\$@\"; else exec \"\$@\"; fi
  " "$@"
' "$dir/go" "$user" "$@" &
pid=$!

own=$(readlink /proc/self/ns/user)
i=0
while [ "$(readlink "/proc/$pid/ns/user" 2>/dev/null || echo "$own")" = "$own" ]; do
  i=$((i + 1))
  [ $i -lt 3000 ] || { echo "without-userns: the child never entered its namespace" >&2; kill "$pid"; exit 1; }
  sleep 0.01
done
echo "0 0 65536" > "/proc/$pid/uid_map"
echo "0 0 65536" > "/proc/$pid/gid_map"
echo go > "$dir/go"
status=0
wait "$pid" || status=$?
exit $status
