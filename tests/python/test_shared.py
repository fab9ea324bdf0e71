"""A Python process works a shared study as one more worker (Study.join,
docs/distributed.md): `tessel tune --db postgresql://...` makes the study and
works it, Python joins it on a real PostgreSQL server on loopback
(scripts/pg_cluster), and both share one budget."""
import json
import os
import pathlib
import subprocess
import tempfile

import pytest

import tessel

ROOT = pathlib.Path(os.environ.get("TESSEL_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
TOOL = os.environ["TESSEL_CLI"]
FIXTURES = ROOT / "tests" / "cli" / "fixtures"
PG_CLUSTER = str(ROOT / "scripts" / "pg_cluster")


@pytest.fixture(scope="module")
def server():
    # The server runs as `postgres` when we are root: its directory's parent
    # must be one it can enter.
    parent = tempfile.mkdtemp(prefix="tessel_pg_", dir="/tmp")
    os.chmod(parent, 0o755)
    cluster = os.path.join(parent, "cluster")
    start = subprocess.run([PG_CLUSTER, "start", cluster], capture_output=True, text=True)
    if start.returncode != 0:
        if "no PostgreSQL server binaries" in start.stderr:
            pytest.skip("no PostgreSQL server here (scripts/setup installs it)")
        raise RuntimeError("scripts/pg_cluster start failed:\n" + start.stderr)
    yield start.stdout.strip()
    subprocess.run([PG_CLUSTER, "stop", cluster], capture_output=True)
    os.rmdir(parent)


def test_a_python_worker_shares_the_budget_of_a_study_tune_made(server, tmp_path):
    url = server + "?study=python_join"
    bowl = "command:" + str(FIXTURES / "bowl.sh")
    # The tool evaluates only once the Python worker has begun its first
    # evaluation (bowl.sh: BOWL_WAIT_FOR, BOWL_MARK), so both keep results at
    # any speed; before, a worker that joined after the tool had done all 40
    # would have left it one.
    began = str(tmp_path / "python_began")
    env = dict(os.environ, BOWL_SLEEP="0.03", BOWL_WAIT_FOR=began)
    tune = subprocess.Popen(
        [TOOL, "tune", str(FIXTURES / "small.tsl"), "--backend", bowl, "--budget", "40",
         "--seed", "3", "-q", "--jobs", "1", "--db", url],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the worker's own evaluations run in this process
    os.environ.update(BOWL_SLEEP="0.03", BOWL_MARK=began)
    try:
        worker = tessel.Study.join(url, wait=60, jobs=1, name="python")
        assert worker.space.name == "small"
        summary = worker.run()
    finally:
        del os.environ["BOWL_SLEEP"], os.environ["BOWL_MARK"]
        out, err = tune.communicate(timeout=300)
    assert tune.returncode == 0, err
    assert "40 evaluations done" in out
    assert summary["evaluations"] == 40 and summary["best"]["status"] == "ok"

    shown = json.loads(subprocess.run([TOOL, "show", url, "--json"], capture_output=True,
                                      text=True, check=True).stdout)
    assert shown["finished"] == 40
    # The work was shared: results from both processes.
    workers = subprocess.run(
        ["psql", server, "-tAc", "SELECT count(DISTINCT worker_id) FROM python_join.trials"],
        capture_output=True, text=True, check=True).stdout
    assert int(workers) == 2


def test_joining_what_is_not_a_shared_study_says_why(tmp_path):
    with pytest.raises(tessel.Error, match="postgresql"):
        tessel.Study.join(str(tmp_path / "local.tessel.db"))
