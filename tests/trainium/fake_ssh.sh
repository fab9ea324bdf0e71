#!/bin/sh
# tests/trainium/fake_ssh.sh: stands in for ssh in the trainium backend's
# host tests (no real hosts here): `fake_ssh.sh HOST COMMAND` runs COMMAND
# locally with sh -c. A host named in TESSEL_FAKE_SSH_DOWN (comma-separated)
# is unreachable: exit 255, as ssh does. A host named in TESSEL_FAKE_SSH_DIES
# ("host:N") answers N calls, then is lost (a counter file under
# TESSEL_FAKE_SSH_STATE). Each call is logged there as "HOST" per line.
host="$1"
shift
state="${TESSEL_FAKE_SSH_STATE:-/tmp}"
echo "$host" >> "$state/calls.log"
case ",${TESSEL_FAKE_SSH_DOWN}," in
  *",$host,"*) echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255 ;;
esac
for rule in $(echo "${TESSEL_FAKE_SSH_DIES}" | tr ',' ' '); do
  name="${rule%%:*}"
  limit="${rule##*:}"
  if [ "$name" = "$host" ]; then
    count=$(grep -c "^$host\$" "$state/calls.log")
    if [ "$count" -gt "$limit" ]; then
      echo "ssh: connect to host $host port 22: No route to host" >&2
      exit 255
    fi
  fi
done
exec sh -c "$*"
