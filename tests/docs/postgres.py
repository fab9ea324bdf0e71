"""Runs what docs/*.md show of shared studies (PostgreSQL) on a
real server, which it starts on loopback (scripts/pg_cluster) and stops at
the end: the transcripts marked `<!-- postgres -->` (run and compared as
tests/docs/transcripts.py does the others) and the `postgresql://` commands
shown without their output (run as tests/docs/commands.py runs the others,
budgets cut to a few evaluations; each must exit 0).

The URLs shown name a server the test does not have (db.example), so each
command's URLs are mapped to the test's server before it runs, and what it
prints is mapped back before it is compared:

- `postgresql://[USER@]HOST[:PORT]/DATABASE?...`, for any HOST but
  127.0.0.1, becomes `postgresql://tessel@127.0.0.1:P/DATABASE?...` (P: the
  test server's port); the database `tuning` (the one docs/distributed.md
  creates) becomes one of the test server's, and any other name is kept, so
  `/nosuch` still names a database that does not exist. A URL on 127.0.0.1
  is left as written: it names a loopback port on purpose (port 1: no server).
- the word `URL` (docs/distributed.md: "the study's URL as given") becomes
  the test server's study `url`.
- in the output, each URL the command was given is shown as the document
  wrote it, and the server's `"127.0.0.1", port P` as the host and port the
  document named (5432 when it named none).

The transcripts run first, then the commands; each has a database of its
own on the server (`tuning` maps to `transcripts` or `commands`), so that
the study one makes is not in the other's way, while the documents of one
phase share it (docs/report.md draws the study docs/distributed.md made).

With no PostgreSQL server binaries here it skips (exit 77), unless
TESSEL_REQUIRE_POSTGRES=1 (CI: scripts/test), which makes that a failure.

  python3 tests/docs/postgres.py BUILD_DIR [DOC.md ...]
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import commands  # noqa: E402  (the commands shown without their output)
import transcripts  # noqa: E402  (the transcripts, their folder and deadline)

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PG_CLUSTER = os.path.join(SOURCE, "scripts", "pg_cluster")
URL = re.compile(r"postgresql://(?:[^@/\s'\"]*@)?([^/:\s'\"]+)(?::(\d+))?/([^?\s'\"]*)"
                 r"(\?[^\s'\"]*)?")
WORD_URL = re.compile(r"(?<![\w'\"/])URL(?![\w'\"])")
SKIP = 77


class server:
    """The test's server, and the mapping of the URLs shown to it (above)."""

    def __init__(self, url):
        self.base = url  # postgresql://tessel@127.0.0.1:PORT/tessel
        self.port = URL.fullmatch(url).group(2)
        self.database = "tessel"

    def use(self, database):
        """Maps `tuning` to `database` (created empty) from now on."""
        done = subprocess.run(["psql", "-qAtX", self.base, "-c", f"CREATE DATABASE {database}"],
                              capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"psql: CREATE DATABASE {database}: {done.stderr}")
        self.database = database

    def command(self, command):
        """(the command as run, [(printed, as shown)] to map its output back)."""
        back = []

        def mapped(m):
            host, port, database, query = m.group(1), m.group(2), m.group(3), m.group(4) or ""
            if host == "127.0.0.1":
                return m.group()
            database = self.database if database == "tuning" else database
            url = f"postgresql://tessel@127.0.0.1:{self.port}/{database}{query}"
            back.append((url, m.group()))
            back.append((f'"127.0.0.1", port {self.port}', f'"{host}", port {port or 5432}'))
            return url

        command = URL.sub(mapped, command)
        study = f"postgresql://tessel@127.0.0.1:{self.port}/{self.database}?study=url"
        if WORD_URL.search(command):
            command = WORD_URL.sub(f"'{study}'", command)
            back.append((study, "URL"))
        return command, back

    @staticmethod
    def output(text, back):
        for printed, shown in sorted(back, key=lambda pair: -len(pair[0])):
            text = text.replace(printed, shown)
        return text


def self_test():
    s = server("postgresql://tessel@127.0.0.1:5999/tessel")
    run, back = s.command("tessel copy a.db 'postgresql://tessel@db.example/tuning?study=m'")
    assert run == "tessel copy a.db 'postgresql://tessel@127.0.0.1:5999/tessel?study=m'"
    printed = 'to postgresql://tessel@127.0.0.1:5999/tessel?study=m: "127.0.0.1", port 5999'
    assert s.output(printed, back) == \
        'to postgresql://tessel@db.example/tuning?study=m: "db.example", port 5432'
    assert s.command("tessel show 'postgresql://tessel@127.0.0.1:1/tessel?study=m'")[1] == []
    assert s.command("tessel show 'postgresql://db:7/nosuch?study=m'")[0] == \
        "tessel show 'postgresql://tessel@127.0.0.1:5999/nosuch?study=m'"
    run, back = s.command("tessel worker URL  # URL")
    assert run.startswith("tessel worker 'postgresql://tessel@127.0.0.1:5999/tessel?study=url'")
    assert s.output(f"'{run.split(chr(39))[1]}' holds", back) == "'URL' holds"


def start(parent):
    """The server's URL, or None when this machine has no PostgreSQL server
    binaries (the message printed)."""
    done = subprocess.run([PG_CLUSTER, "start", os.path.join(parent, "cluster")],
                          capture_output=True, text=True, timeout=300)
    if done.returncode == 0:
        return done.stdout.strip()
    if "no PostgreSQL server binaries" not in done.stderr:
        raise RuntimeError("scripts/pg_cluster start failed:\n" + done.stderr)
    print(done.stderr.strip())
    return None


def main(argv):
    self_test()
    build = os.path.abspath(argv[1])
    # docs/*.md, as docs_commands: README.md's shared-study lines are a list
    # of examples, not a sequence (its copy would need the study file the
    # line above it makes, into a study the line before that filled)
    docs = argv[2:] or sorted(glob.glob(os.path.join(SOURCE, "docs", "*.md")))
    # The server runs as `postgres` when we are root: its folder's parent
    # must be one it can enter.
    parent = tempfile.mkdtemp(prefix="tessel_docs_pg_", dir="/tmp")
    os.chmod(parent, 0o755)
    try:
        url = start(parent)
        if url is None:
            if os.environ.get("TESSEL_REQUIRE_POSTGRES") == "1":
                print("TESSEL_REQUIRE_POSTGRES=1: failing instead of skipping")
                return 1
            return SKIP
        at = server(url)
        problems, shown, ran = [], 0, 0
        at.use("transcripts")
        for doc in docs:
            with open(doc, encoding="utf-8") as f:
                shown += len(transcripts.transcripts(f.read(), postgres=True))
            problems += transcripts.run_document(doc, SOURCE, build, server=at)
        at.use("commands")
        for doc in docs:
            with open(doc, encoding="utf-8") as f:
                todo = commands.document_commands(f.read())
            found, done, _ = commands.run_document(os.path.relpath(doc, SOURCE), todo, build,
                                                   server=at)
            problems += found
            ran += len(done)
    finally:
        subprocess.run([PG_CLUSTER, "stop", os.path.join(parent, "cluster")],
                       capture_output=True, timeout=120)
        shutil.rmtree(parent, ignore_errors=True)
    for p in problems:
        print(p, end="\n\n")
    print(f"{shown} shared-study transcripts and {ran} shared-study commands run on {url}, "
          f"{len(problems)} problems")
    return 1 if problems or (not argv[2:] and (shown < 5 or ran < 4)) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
