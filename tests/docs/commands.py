"""Checks the commands that docs/*.md show without their output (the blocks
tests/docs/transcripts.py does not run), and the links between documents.

1. Flags. Every `tessel SUBCOMMAND ...` line of docs/*.md, in a command
   block, a synopsis or a "$ " transcript marked `<!-- not run: WHY -->`
   (and of README.md's blocks, and every `tessel ...` code span of either),
   has each of its options (`--budget`, `-o`; not what is quoted: a
   command backend's own flags) in `tessel SUBCOMMAND --help`: a renamed or
   removed option fails here even where the command cannot run.
2. Runs. The commands that can run here (the simulator, replay, models,
   show/report/emit, python3 lines), with the files of the repository, run
   as written in a scratch folder of their own per document, in document
   order (as transcripts.py's folder: examples/, data/, the build as
   build/ci, `tessel` and `python3` on PATH), with every `--budget N` cut to
   3 and `--high-budget N` to 2; each must exit 0. A `tessel tune` with no
   stop condition is a problem: it runs until the space is exhausted.
   Skipped, with the reason printed: a block marked `<!-- not run: WHY -->`,
   a synopsis (a placeholder such as FILE, `[`, `|`, `...` outside quotes:
   so a pipe, too), a shared study (`postgresql://`: tests/docs/postgres.py,
   ctest docs_postgres, runs these on a server it starts on loopback), the
   `trainium` backend (a Neuron device), the `cpu` backend (g++ compiles
   every config: seconds a trial; the README's cpu command runs in
   docs_readme_commands and tests/cpu covers the backend), and a FILE the repository does not hold (kernel.tsl: an illustration).
3. The reference. Every option that `tessel SUBCOMMAND --help` lists, for
   every subcommand, is named in docs/cli.md.
4. Links. Every relative Markdown link of README.md and docs/*.md names a
   file that exists (and, with `#anchor`, a heading of it), and every
   `docs/NAME.md` a document mentions exists; no command hides in an
   indented code block, which this test would not see; README.md's
   Documentation table lists every docs/*.md.

  python3 tests/docs/commands.py BUILD_DIR [DOC.md ...]
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import transcripts  # noqa: E402  (its blocks, marks and scratch folder)

TOOL = re.compile(r"^(?:build/(?:release|ci)/src/cli/|~/\.local/bin/)?tessel(?= )")
PYTHON = re.compile(r"^(?:PYTHONPATH=\S+ )?python3 ")
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
PLACEHOLDER = re.compile(r"(?<![\w./-])[A-Z][A-Z_]+(?![\w./-])|\[|\||\.\.\.")
SYNOPSIS_GOES_ON = re.compile(r"^\s+[\[(]")  # a synopsis's indented next line
STOPS = ("--budget", "-n", "--time", "--cost-budget", "--target-objective", "--patience",
         "--high-budget")


def document_commands(text):
    """(command, line number, why it is not run or None), in document order:
    the tool and python3 lines of the blocks that are not transcripts, and
    the "$ tessel" lines of transcripts marked not run. A line ending in `\\`
    goes on on the next, as a synopsis does on an indented line that opens
    with `[` or `(`; a trailing `  # comment` is dropped."""
    out = []
    for mark, body, first in transcripts.blocks(text):
        kind, why = mark if mark else (None, None)
        transcript = bool(body) and body[0].startswith("$ ")
        if kind in ("stdin", "run") or (transcript and kind != "not run"):
            continue
        i = 0
        while i < len(body):
            line, at = body[i], first + i + 1
            if transcript:
                line = line[2:] if line.startswith("$ ") else ""
            while i + 1 < len(body) and (line.rstrip().endswith("\\") or (
                    not transcript and SYNOPSIS_GOES_ON.match(body[i + 1]))):
                i += 1
                line = line.rstrip().rstrip("\\").rstrip() + " " + body[i].strip()
            line = line.split("  #")[0].strip()
            if TOOL.match(line) or PYTHON.match(line):
                out.append((TOOL.sub("tessel", line), at, why))
            i += 1
    return out


def options(command):
    """The options a `tessel` command line names, quoted text left out."""
    return OPTION.findall(QUOTED.sub("''", command))


class tool:
    """`tessel` and what each subcommand's --help lists (asked once each)."""

    def __init__(self, path):
        self.path, self.helps = path, {}

    def help(self, subcommand):
        if subcommand not in self.helps:
            args = [self.path] + ([subcommand] if subcommand else []) + ["--help"]
            done = subprocess.run(args, capture_output=True, text=True,
                                  timeout=transcripts.time_left())
            self.helps[subcommand] = done.stdout if done.returncode == 0 else None
        return self.helps[subcommand]

    def unknown_options(self, command):
        """(subcommand, [options its --help does not list]); subcommand None: no such command."""
        words = command.split()
        subcommand = words[1] if len(words) > 1 and re.fullmatch(r"[a-z-]+", words[1]) else ""
        text = self.help(subcommand)
        if text is None:
            return None, []
        missing = [o for o in options(command)
                   if not re.search(r"(^|[\s,])" + re.escape(o) + r"(?![\w-])", text)]
        return subcommand, missing


    def subcommands(self):
        text = self.help("")
        return re.findall(r"^  ([a-z][a-z-]*) ", text[text.index("Subcommands:"):], re.M)

    def undocumented(self, reference):
        """(subcommand, option) of each option a --help lists that `reference` never names."""
        out = []
        for subcommand in self.subcommands():
            found = re.findall(r"(?:^|[\s,])(--[a-z][\w-]*)", self.help(subcommand), re.M)
            for option in sorted(set(found)):
                if not re.search(re.escape(option) + r"(?![\w-])", reference):
                    out.append((subcommand, option))
        return out


def skip_reason(command, folder, server=None):
    """Why `command` cannot run here (with postgres.py's `server`: there), or None."""
    bare = QUOTED.sub("''", command)
    if PLACEHOLDER.search(bare):
        return "a synopsis"
    if "postgresql://" in command and not server:
        return "a shared study: tests/docs/postgres.py (docs_postgres) runs it on a server"
    if re.search(r"(--backend|--fidelity)[ =]['\"]?trainium", command):
        return "the trainium backend: needs a Neuron device"
    if re.search(r"(--backend|--fidelity)[ =]['\"]?cpu", command):
        return "the cpu backend: g++ compiles every config (docs_readme_commands runs one)"
    words = shlex.split(command)
    files = [w for w in words[1:] if re.search(r"\.(tsl|py|json\.gz|json)$", w)]
    for file in files[:1]:
        if not os.path.exists(os.path.join(folder, file)):
            return f"an illustration: {file} is not in the repository"
    return None


def unbounded(command):
    words = shlex.split(command)
    return words[:2] == ["tessel", "tune"] and not any(w in STOPS for w in words)


def run_document(path, commands, build, server=None):
    """(problems, [(line, command)] run, [(line, command, why)] skipped). With
    `server` (postgres.py's), only the `postgresql://` commands, their URLs
    mapped to it."""
    problems, ran, skipped = [], [], []
    source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    folder = transcripts.scratch(source, build)
    env = transcripts.environment(folder, build)
    try:
        for command, at, why in commands:
            if server and "postgresql://" not in command:
                continue
            why = why or skip_reason(command, folder, server)
            if why:
                skipped.append((at, command, why))
                continue
            if unbounded(command):
                problems.append(f"{path}:{at}: `{command}` has no stop condition (--budget, "
                                "--time, ...): it runs until the space is exhausted")
                continue
            short = transcripts.shortened(server.command(command)[0] if server else command)
            done = transcripts.run_or_stop(short, folder, env, f"{path}:{at}", problems)
            if done is None:
                break
            ran.append((at, short))
            if done.returncode != 0:
                problems.append(f"{path}:{at}: `{short}` exited {done.returncode}:\n"
                                + done.stderr[-2000:])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return problems, ran, skipped


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def prose(path, spans=False):
    """A document's text without its fenced blocks (their lines left empty) and,
    with `spans`, its code spans."""
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"^```.*?^```", lambda m: "\n" * m.group().count("\n"), f.read(),
                      flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text) if spans else text


def anchors(path):
    return {slug(h) for h in re.findall(r"^#+ (.*)$", prose(path), re.M)}


def inline_commands(path):
    """(command, line number, None) of each `tessel ...` code span of a
    document's prose (a span may wrap onto the next line)."""
    text = prose(path)
    return [(" ".join(m.group(1).split()), text.count("\n", 0, m.start()) + 1, None)
            for m in re.finditer(r"`(tessel [a-z][^`]*)`", text)]


def link_problems(path, source):
    """The relative links and docs/NAME.md mentions of one document that do not
    resolve, and the commands it shows in indented code blocks."""
    problems, here = [], os.path.dirname(path)
    for target in re.findall(r"\]\(([^)\s]+)\)", prose(path, spans=True)):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(here, file)) if file else path
        if not os.path.exists(resolved):
            problems.append(f"{path}: link ({target}): no file {os.path.relpath(resolved, source)}")
        elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
            problems.append(f"{path}: link ({target}): no heading #{anchor} there")
    for at in re.finditer(r"\n\n {4}(?:tessel|python3|PYTHONPATH=\S+|scripts/\S+) .*", prose(path)):
        problems.append(f"{path}: `{at.group().strip()}`: an indented code block; fence it "
                        "(```) so that its commands are checked")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for named in sorted(set(re.findall(r"(?<![\w/.-])(docs/[a-z0-9_-]+\.md)", text))):
        if not os.path.exists(os.path.join(source, named)):
            problems.append(f"{path}: names {named}, which does not exist")
    return problems


def self_test():
    """The parts that decide what is checked: a renamed flag is caught."""
    text = ("```\ntessel tune a.tsl --budget 3 \\\n  --db x.db  # note\n"
            "tessel show DB\n       [--top N]\n```\n"
            "<!-- not run: hw -->\n```\n$ tessel show DB --top 3\nout\n```\n")
    assert document_commands(text) == [("tessel tune a.tsl --budget 3 --db x.db", 2, None),
                                       ("tessel show DB [--top N]", 4, None),
                                       ("tessel show DB --top 3", 9, "hw")]
    assert options("tessel tune f --backend 'command:./b --tile {t}' -n 3 [--db PATH|URL]") == \
        ["--backend", "-n", "--db"]
    assert skip_reason("tessel check FILE... [--json]", ".") == "a synopsis"
    assert skip_reason("tessel tune examples/m.tsl --backend cpu", ".").startswith("the cpu")
    assert unbounded("tessel tune f.tsl --backend sim") and not unbounded("tessel tune f -n 3")
    assert slug("`tessel tune` and tune-model: a, b") == "tessel-tune-and-tune-model-a-b"


def option_problems(checker, name, commands):
    """Each `tessel` line's subcommand and options, against its --help."""
    problems = []
    for command, at, _ in commands:
        if not command.startswith("tessel "):
            continue
        subcommand, missing = checker.unknown_options(command)
        if subcommand is None:
            problems.append(f"{name}:{at}: `{command}`: no such tessel subcommand")
        problems += [f"{name}:{at}: `{command}`: tessel {subcommand} has no option {option} "
                     f"(tessel {subcommand} --help)" for option in missing]
    return problems


def reference_problems(checker, source, docs):
    """docs/cli.md against every --help, README's table, every document's links,
    the options of the README's commands (docs_readme_commands runs some) and
    of every document's `tessel ...` code spans."""
    with open(os.path.join(source, "docs", "cli.md"), encoding="utf-8") as f:
        reference = f.read()
    problems = [f"docs/cli.md: `tessel {subcommand} --help` lists {option}, which it never names"
                for subcommand, option in checker.undocumented(reference)]
    with open(os.path.join(source, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    problems += [f"README.md: {os.path.relpath(doc, source)} is not in its Documentation table"
                 for doc in docs if f"| [{os.path.relpath(doc, source)}](" not in readme]
    for doc in [os.path.join(source, "README.md")] + docs:
        problems += [p.replace(source + os.sep, "") for p in link_problems(doc, source)]
        name = os.path.relpath(doc, source)
        problems += option_problems(checker, name, inline_commands(doc))
    with open(os.path.join(source, "README.md"), encoding="utf-8") as f:
        problems += option_problems(checker, "README.md", document_commands(f.read()))
    return problems


def main(argv):
    self_test()
    build = os.path.abspath(argv[1])
    source = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    docs = argv[2:] or sorted(glob.glob(os.path.join(source, "docs", "*.md")))
    checker = tool(os.path.join(build, "src", "cli", "tessel"))
    problems, ran, skipped, checked = [], 0, [], 0
    for doc in docs:
        with open(doc, encoding="utf-8") as f:
            commands = document_commands(f.read())
        name = os.path.relpath(doc, source)
        checked += sum(1 for command, _, _ in commands if command.startswith("tessel "))
        problems += option_problems(checker, name, commands)
        found, done, left = run_document(name, commands, build)
        problems += found
        ran += len(done)
        skipped += [(name, at, command, why) for at, command, why in left]
    if not argv[2:]:
        problems += reference_problems(checker, source, docs)
    for name, at, command, why in skipped:
        print(f"skipped {name}:{at}: {why}: `{command[:100]}`")
    for p in problems:
        print(p, end="\n\n")
    print(f"{checked} documented tessel commands' options checked, {ran} commands run, "
          f"{len(skipped)} skipped, {len(problems)} problems")
    return 1 if problems or (not argv[2:] and ran < 10) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
