"""Runs the README's tuning commands one after another in one folder, as a
user following it does: the quick start's `tessel tune`, then each `tessel
tune`, `tune-model`, `serve` and `mcp` line of its "Tuning" block, with
every budget cut to a few evaluations (serve and mcp get an empty stdin).
Each must succeed: before, two of them tuning one space shared its default
study file (<space>.tessel.db), and the second was refused.

Lines that cannot run here are skipped: a placeholder ("..."), a shared
study (postgresql://), or a FILE that is not in the repository (kernel.tsl).

  python3 tests/docs/readme_commands.py BUILD_DIR
"""
import os
import re
import shlex
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import transcripts  # noqa: E402  (its scratch folder, environment and deadline)

RUNS = re.compile(r"^tessel (tune|tune-model|serve|mcp) ")


def readme_commands(text):
    """The commands to run, in order: the quick start's, then the Tuning block's."""
    out = []
    for line in text.split("\n"):
        if line.startswith("build/release/src/cli/tessel tune "):
            out.append("tessel " + line[len("build/release/src/cli/tessel "):])
    block = text[text.index("## Tuning"):]
    block = block[block.index("```") + 3:]
    block = block[:block.index("```")]
    for line in block.split("\n"):
        if RUNS.match(line):
            out.append(line.split("  #")[0].strip())
    return out


def runnable(command, folder):
    if "..." in command or "postgresql://" in command:
        return False
    file = shlex.split(command)[2]
    return os.path.exists(os.path.join(folder, file))


def main(argv):
    source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build = os.path.abspath(argv[1])
    with open(os.path.join(source, "README.md"), encoding="utf-8") as f:
        commands = readme_commands(f.read())
    folder = transcripts.scratch(source, build)
    env = transcripts.environment(folder, build)
    problems, ran = [], 0
    try:
        for command in commands:
            if not runnable(command, folder):
                continue
            short = transcripts.shortened(command)
            done = transcripts.run_or_stop(short, folder, env, "README.md", problems)
            if done is None:
                break
            ran += 1
            if done.returncode != 0:
                problems.append(f"README.md: `{short}` exited {done.returncode}:\n{done.stderr}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for p in problems:
        print(p, end="\n\n")
    print(f"{ran} README commands run, {len(problems)} failed")
    return 1 if problems or ran < 5 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
