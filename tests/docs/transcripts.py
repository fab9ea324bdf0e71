"""Runs every recorded transcript in README.md and docs/*.md and compares the
output's shape with what the document shows, so the documents cannot drift
from what tessel prints (issue 27).

A transcript is a fenced block whose first line starts with "$ ": each "$ "
line is a command (run by bash), the lines up to the next one are what it
prints on stdout (write `2>&1` in the command to show stderr too). A block
may also be marked by an HTML comment on the line before it:

  <!-- stdin -->          the block is the standard input of the next run
  <!-- run: COMMAND -->   the block is what COMMAND prints
  <!-- not run: WHY -->   the next "$ " block is not run (say why: hardware);
                          before a block of commands, tests/docs/commands.py
                          does not run them either (it checks their options)
  <!-- postgres -->        the next "$ " block works shared studies: not run
                          here, but by tests/docs/postgres.py (ctest
                          docs_postgres), on a server it starts on loopback
                          (its docstring says how the URLs shown map to it)

A command line that ends in "\\" goes on on the next line, as in bash.

Commands run in a scratch folder that links the repository's examples/,
data/, tests/, python/ and the build folder as build/ci, with the built
`tessel` first on PATH and the built Python package on PYTHONPATH; the
transcripts of one document share the folder, in order.

The shape: numbers are compared as numbers of any value ("2,437,920",
"0.00193737", "1e-9" all read as one number), a line "..." stands for any
number of lines, "..." or "…" inside a line for any text, and trailing
blanks are ignored. Everything else must be as written.

Run over every document, it also checks that each file under examples/ is
run by a transcript or a test (an add_test in tests/ or examples/).

  python3 tests/docs/transcripts.py BUILD_DIR [DOC.md ...]
  TESSEL_UPDATE_DOCS=1 python3 tests/docs/transcripts.py ...   rewrites the
      transcripts shown exactly (without "...") with today's output
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?")
MARK = re.compile(r"<!--\s*(stdin|run:|not run:|postgres)\s*(.*?)\s*-->")
# How long one run of this script, or of readme_commands.py, may take, all
# its commands together: a bound for a hang, under ctest's TIMEOUT (900 s,
# tests/docs/CMakeLists.txt) so that the command it stops is named. Not a
# limit per command: `tessel tune examples/cpu_gemm.tsl --backend cpu
# --budget 3`, compiling its kernels in a fresh folder, uses 42 s of CPU;
# beside other builds on 2 cores it took 137 s, and once over 300 s, the
# limit it had (readme_commands.py; this script's was 120 s).
DEADLINE_S = 840
STARTED = time.monotonic()


def time_left():
    """Seconds before DEADLINE_S is reached (at least 1)."""
    return max(DEADLINE_S - (time.monotonic() - STARTED), 1.0)


def blocks(text):
    """((mark, argument), lines, first line's index) for each fenced block, in order."""
    lines = text.split("\n")
    out, i, mark = [], 0, None
    while i < len(lines):
        line = lines[i]
        found = MARK.search(line)
        if found:
            mark = (found.group(1).rstrip(":"), found.group(2))
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append((mark, lines[i + 1:j], i + 1))
            mark, i = None, j + 1
            continue
        if line.strip() and not found:
            mark = None
        i += 1
    return out


def transcripts(text, postgres=False):
    """(command, stdin, expected lines, index of the first expected line) to
    run, in document order: those of blocks marked `<!-- postgres -->` with
    `postgres`, the others without."""
    stdin, out = None, []
    for mark, body, first in blocks(text):
        kind, argument = mark if mark else (None, None)
        if kind == "stdin":
            stdin = "\n".join(body) + "\n"
        elif kind == "run" and not postgres:
            out.append((argument, stdin, body, first))
            stdin = None
        elif body and body[0].startswith("$ ") and kind != "not run" and \
                (kind == "postgres") == postgres:
            command, expected, at, going_on = None, [], first, False
            for n, line in enumerate(body):
                if going_on:
                    command = command[:-1].rstrip() + " " + line.strip()
                    at = first + n + 1
                elif line.startswith("$ "):
                    if command is not None:
                        out.append((command, stdin, expected, at))
                        stdin = None
                    command, expected, at = line[2:].rstrip(), [], first + n + 1
                else:
                    expected.append(line)
                going_on = not expected and command.endswith("\\")
            out.append((command, stdin, expected, at))
            stdin = None
    return out


def run_shell(command, folder, env, stdin=None):
    """`bash -c command` in `folder`, its output captured, in a session of its
    own: past the deadline (time_left) the whole session is killed, not only
    bash (a `tessel` it started would live on), and TimeoutExpired is raised."""
    with subprocess.Popen(["bash", "-c", command], cwd=folder, env=env, text=True,
                          stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True) as process:
        try:
            out, err = process.communicate(stdin, timeout=time_left())
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def run_or_stop(command, folder, env, where, problems, stdin=None, shown=None):
    """run_shell, or None once the deadline stops it, with the problem said
    (`where: `shown` ran past ...`; `shown` defaults to the command)."""
    try:
        return run_shell(command, folder, env, stdin)
    except subprocess.TimeoutExpired:
        problems.append(f"{where}: `{shown or command}` ran past the {DEADLINE_S} s all the "
                        "commands may take (a hang?)")
        return None


BUDGET = re.compile(r"(--budget|-n) \d+")
HIGH_BUDGET = re.compile(r"--high-budget \d+")


def shortened(command):
    """`command` with every `--budget N` (`-n N`) cut to 3 and `--high-budget N`
    to 2: a few evaluations, for the scripts that run commands shown without
    their output."""
    return HIGH_BUDGET.sub("--high-budget 2", BUDGET.sub(r"\1 3", command))


def pattern(line):
    """A regular expression for one expected line."""
    parts = re.split(r"(\.\.\.|…)", line.rstrip())
    regex = ""
    for part in parts:
        if part in ("...", "…"):
            regex += ".*"
            continue
        pieces = NUMBER.split(part)
        regex += NUMBER.pattern.join(re.escape(p) for p in pieces)
    return re.compile(regex)


def matches(expected, actual):
    """Whether `actual` lines have the shape of `expected` (see the module doc)."""
    actual = [line.rstrip() for line in actual]
    while actual and not actual[-1]:
        actual.pop()
    expected = list(expected)
    while expected and not expected[-1].strip():
        expected.pop()

    def at(e, a):
        if e == len(expected):
            return a == len(actual)
        if expected[e].strip() in ("...", "…"):
            return any(at(e + 1, k) for k in range(a, len(actual) + 1))
        return a < len(actual) and pattern(expected[e]).fullmatch(actual[a]) is not None \
            and at(e + 1, a + 1)

    return at(0, 0)


def scratch(source, build):
    folder = tempfile.mkdtemp(prefix="tessel_docs_")
    for name in ("examples", "data", "tests", "python", "docs"):
        os.symlink(os.path.join(source, name), os.path.join(folder, name))
    os.makedirs(os.path.join(folder, "build"))
    os.symlink(build, os.path.join(folder, "build", "ci"))
    # `python3` in a transcript is the interpreter running this (the one the
    # Python package was built for, with numpy).
    os.makedirs(os.path.join(folder, ".bin"))
    os.symlink(sys.executable, os.path.join(folder, ".bin", "python3"))
    return folder


def environment(folder, build):
    """The environment commands run in: the built `tessel` and the scratch
    folder's `python3` first on PATH, the built Python package importable."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.join(folder, ".bin"), os.path.join(build, "src", "cli"),
                                   env.get("PATH", "")])
    env["PYTHONPATH"] = os.path.join(build, "python")
    env.pop("TESSEL_UPDATE_GOLDEN", None)
    return env


def run_document(path, source, build, update=False, server=None):
    """Problems found in one document (empty: every transcript matched). With
    `update`, a transcript shown exactly (no "...") that differs is rewritten
    with what the command printed, as TESSEL_UPDATE_GOLDEN does for goldens.
    With `server` (postgres.py's), the `<!-- postgres -->` transcripts run
    instead, their URLs mapped to it."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    todo = transcripts(text, postgres=server is not None)
    if not todo:
        return []
    problems, folder = [], scratch(source, build)
    env = environment(folder, build)
    try:
        rewrites = []
        for command, stdin, expected, at in todo:
            shown, back = (server.command(command) if server else (command, []))
            done = run_or_stop(shown, folder, env, path, problems, stdin, shown=command)
            if done is None:
                break
            got = (server.output(done.stdout, back) if server else done.stdout).split("\n")
            if not matches(expected, got):
                if update and not any("..." in e or "…" in e for e in expected):
                    rewrites.append((at, len(expected), [g.rstrip() for g in got]))
                    continue
                problems.append(f"{path}: `{shown}` printed (exit {done.returncode}):\n"
                                + done.stdout + done.stderr[-2000:]
                                + "\n--- where the document shows:\n" + "\n".join(expected))
        if rewrites:
            lines = text.split("\n")
            for at, count, got in sorted(rewrites, reverse=True):
                while got and not got[-1]:
                    got.pop()
                lines[at:at + count] = got
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(lines))
            print(f"updated {len(rewrites)} transcripts in {path}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return problems


def self_test():
    """The matcher itself: a changed word, a missing line or an extra one is caught."""
    shown = ["space sim_matmul: 2,437,920 valid configs", "...", "best trial 3 (auto/bo): …",
             "done in 0.21 s"]
    assert matches(shown, ["space sim_matmul: 98,304 valid configs", "a", "b",
                           "best trial 12 (auto/bo): 0.0019 s", "done in 1e-3 s"])
    assert matches(shown, ["space sim_matmul: 5 valid configs", "best trial 1 (auto/bo): y",
                           "done in 2 s", ""])
    assert not matches(shown, ["space sim_matmul: 5 valid config", "best trial 1 (auto/bo): y",
                               "done in 2 s"])
    assert not matches(shown, ["space sim_matmul: 5 valid configs", "best trial 1 (auto/bo): y"])
    assert not matches(["one", "two"], ["one", "two", "three"])
    assert [t[0] for t in transcripts("```\n$ a\nx\n$ b\n```\n<!-- not run: hw -->\n"
                                      "```\n$ c\n```\n<!-- stdin -->\n```\nin\n```\n"
                                      "<!-- run: d -->\n```\nout\n```\n")] == ["a", "b", "d"]
    shared = "<!-- postgres -->\n```\n$ e \\\n    f  # g\nout\n```\n```\n$ h\n```\n"
    assert [t[:3] for t in transcripts(shared, postgres=True)] == [("e f  # g", None, ["out"])]
    assert [t[0] for t in transcripts(shared)] == ["h"]
    assert shortened("tessel tune a -n 50 --budget 9 --high-budget 4") == \
        "tessel tune a -n 3 --budget 3 --high-budget 2"


def self_test_timeout():
    """A command past the deadline is killed with what it started: a `sleep`
    bash put in the background must not outlive it."""
    global DEADLINE_S
    folder, kept = tempfile.mkdtemp(prefix="tessel_docs_"), DEADLINE_S
    began = time.monotonic()
    DEADLINE_S = began - STARTED + 1
    try:
        run_shell("sleep 60 & echo $! > child; wait", folder, dict(os.environ))
        raise AssertionError("run_shell did not time out")
    except subprocess.TimeoutExpired:
        pass
    finally:
        DEADLINE_S = kept
    # (killing bash alone, the sleep would hold its output open 60 s)
    assert time.monotonic() - began < 30, "run_shell waited for the sleep it should have killed"
    with open(os.path.join(folder, "child"), encoding="utf-8") as f:
        child = int(f.read())
    shutil.rmtree(folder)
    for _ in range(50):  # killed at once; reaped by whoever adopted it
        try:
            with open(f"/proc/{child}/stat", encoding="utf-8") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in "ZX":
                    return
        except FileNotFoundError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the sleep run_shell's command started (pid {child}) outlived it")


def examples_not_run(source, commands):
    """The files under examples/ that neither a transcript command (its
    globs expanded) nor a test (an add_test in tests/ or examples/) runs: a
    new example must be run by something, so it cannot rot (issue 27)."""
    named = set()
    for command in commands:
        for token in re.split(r"[\s'\"=:,]+", command):
            at = token.find("examples/")
            if at < 0:
                continue
            path = token[at:]
            found = glob.glob(os.path.join(source, path))
            named.update(os.path.relpath(f, source) for f in found)
            named.add(path)
    tests = ""
    for lists in glob.glob(os.path.join(source, "tests", "*", "CMakeLists.txt")) + \
            [os.path.join(source, "examples", "CMakeLists.txt")]:
        with open(lists, encoding="utf-8") as f:
            tests += "\n".join(re.findall(r"add_test\(([^()]*)\)", f.read(), re.S))
    # a test program that names an example under examples/ (as tests/cli's
    # model_test.cpp runs examples/models/*.tsl) runs it too
    sources = ""
    for pattern in ("*.cpp", "*.py"):
        for name in glob.glob(os.path.join(source, "tests", "**", pattern), recursive=True):
            with open(name, encoding="utf-8") as f:
                sources += f.read()
    missing = []
    for folder, _, files in os.walk(os.path.join(source, "examples")):
        for name in files:
            path = os.path.relpath(os.path.join(folder, name), source)
            stem = os.path.splitext(path)[0]
            if name == "CMakeLists.txt" or path in named or stem in named:
                continue
            if '"' + os.path.relpath(path, "examples") + '"' in sources:
                continue
            if re.search(r"(^|[\s/}])" + re.escape(name) + r"\b", tests) or \
                    re.search(r"COMMAND\s+" + re.escape(os.path.splitext(name)[0]) + r"\b", tests):
                continue
            missing.append(path)
    return sorted(missing)


def main(argv):
    self_test()
    self_test_timeout()
    build = os.path.abspath(argv[1])
    source = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    docs = argv[2:] or [os.path.join(source, "README.md")] + sorted(
        os.path.join(source, "docs", name) for name in os.listdir(os.path.join(source, "docs"))
        if name.endswith(".md"))
    problems, count, commands = [], 0, []
    for doc in docs:
        with open(doc, encoding="utf-8") as f:
            todo = transcripts(f.read())
        count += len(todo)
        commands += [command for command, _, _, _ in todo]
        problems += run_document(doc, source, build, bool(os.environ.get("TESSEL_UPDATE_DOCS")))
    if not argv[2:]:
        problems += [f"{path}: no transcript in README.md or docs/ and no test runs it"
                     for path in examples_not_run(source, commands)]
    for p in problems:
        print(p, end="\n\n")
    print(f"{count} transcripts in {len(docs)} documents, {len(problems)} differ")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
