"""Runs one of examples/*.py as docs show it and checks that it succeeded.

    run_example.py PATTERN -- COMMAND...

Passes when COMMAND exits 0 and its output (stdout and stderr) has a line
matching the regular expression PATTERN: the example's own closing line,
which it prints only when it got that far with real results.
"""
import re
import subprocess
import sys


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: run_example.py PATTERN -- COMMAND...")
    pattern, command = sys.argv[1], sys.argv[3:]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", timeout=300)
    print(done.stdout)
    if done.returncode != 0:
        sys.exit(f"run_example: exited with {done.returncode}: {' '.join(command)}")
    if not re.search(pattern, done.stdout, re.MULTILINE):
        sys.exit(f"run_example: no line matches {pattern!r}: {' '.join(command)}")
    print(f"run_example: ok, {pattern!r} matched")


if __name__ == "__main__":
    main()
