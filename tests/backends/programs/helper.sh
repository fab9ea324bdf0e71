#!/bin/sh
# helper.sh MODE [ARGS...]: a stand-in benchmark program for the command
# backend's tests (tests/backends/command_test.cpp). Each mode exercises one
# part of the protocol in docs/backends.md.
mode=$1
shift
# Writes the pid of the last background job ($!) to the file $1, as this
# machine's /proc names it: the run may be in a PID namespace of its own,
# where $! is the namespace's pid (docs/backends.md, "Process groups"). The
# shell reads /proc itself (builtins, no fork): its own pid, then its
# children, the newest last.
last_job_pid() {
  if [ ! -r /proc/self/stat ]; then echo $! > "$1"; return; fi  # no /proc: no namespace
  read -r self _ < /proc/self/stat
  read -r jobs < "/proc/$self/task/$self/children"
  echo "${jobs##* }" > "$1"
}
case "$mode" in
  ok)  # logs first, then the report as the last line
    echo "compiling..."
    echo "running 2 repetitions" >&2
    echo '{"objective": 1.5, "samples": [1.4, 1.6], "metrics": {"flops": 10}, "message": "fine"}'
    ;;
  env)  # the config as environment variables
    echo "{\"objective\": $TESSEL_TILE_M, \"message\": \"order=$TESSEL_ORDER fast=$TESSEL_FAST kind=$TESSEL_KIND depth=${TESSEL_DEPTH-unset} extra=$EXTRA\"}"
    ;;
  write_arg)  # writes $2 to the file $1
    printf '%s' "$2" > "$1"
    echo 1
    ;;
  args)  # placeholders: $1 is a number, $2 a label
    echo "{\"objective\": $1, \"message\": \"$2\"}"
    ;;
  stdin)  # copies stdin to the file $1, answers with a bare number
    cat > "$1"
    echo "log line"
    echo 2.25
    ;;
  pwd)
    echo "{\"objective\": 1, \"message\": \"$(pwd)\"}"
    ;;
  fail)
    echo '{"objective": 1}'
    echo "something broke" >&2
    exit 3
    ;;
  compile_error)
    echo "error: tile too large" >&2
    echo '{"status": "compile_error", "message": "does not fit", "cost": {"compile_s": 0.5}}'
    exit 1
    ;;
  garbage)
    echo "hello world"
    echo "not json {"
    echo "the stderr explains" >&2
    ;;
  empty)
    ;;
  bad_status)
    echo '{"status": "splendid", "objective": 1}'
    ;;
  no_objective)
    echo '{"message": "forgot"}'
    ;;
  time_field)
    echo '{"time": 3, "cost": {"compile_s": 0.25, "run_s": 0.5}}'
    ;;
  pretty)
    printf '{\n  "objective": 4,\n  "samples": [4, 4]\n}\n'
    ;;
  json_then_log)  # a report followed by a log line
    echo '{"objective": 5}'
    echo "done."
    ;;
  crash)
    echo "about to crash" >&2
    kill -SEGV $$
    ;;
  hang)  # a grandchild that would outlive us; its pid goes to $1
    sleep 100 &
    last_job_pid "$1"
    wait
    ;;
  hang_ignoring_term)  # ignores SIGTERM (and so does its grandchild): needs SIGKILL
    trap '' TERM
    sleep 100 &
    last_job_pid "$1"
    while :; do wait; done
    ;;
  leave_behind)  # exits at once, leaving a grandchild that holds stdout open
    sleep 100 &
    last_job_pid "$1"
    echo 2.0
    ;;
  flood)  # 16 MB of garbage JSON on one line: '[' nested millions deep
    head -c 16000000 /dev/zero | tr '\0' '['
    ;;
  flood_lines)  # 16 MB of lines that look like reports but never close
    head -c 16000000 /dev/zero | tr '\0' '{' | fold -w 1000
    ;;
  deep_report)  # a report line nested 100 levels deep in its metrics
    printf '{"objective": 1, "message": '
    head -c 100 /dev/zero | tr '\0' '['
    head -c 100 /dev/zero | tr '\0' ']'
    echo '}'
    ;;
  big)  # megabytes on both pipes before the report
    head -c 3000000 /dev/zero | tr '\0' 'e' >&2
    head -c 3000000 /dev/zero | tr '\0' 'o'
    echo
    echo '{"objective": 7}'
    ;;
  *)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac
