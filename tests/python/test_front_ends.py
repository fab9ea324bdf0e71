"""The front-ends give one answer (issue 27): `tessel tune --json`, the
`summary` op of `tessel serve` and Python's `Study.run()` report the same
summary JSON for the same study, and a study Python made with `set=` reopens
in `tessel show` as the space it was made with."""
import json
import os
import pathlib
import subprocess

import pytest

import tessel

ROOT = pathlib.Path(os.environ.get("TESSEL_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
TOOL = os.environ["TESSEL_CLI"]
TABLE = str(ROOT / "data" / "bench" / "convolution_RTX_3090.json.gz")
SMALL = str(ROOT / "tests" / "cli" / "fixtures" / "small.tsl")
STUDY = ["--strategy", "random", "--scheduler", "fifo", "--seed", "5", "--jobs", "1", "--no-db"]
# Wall-clock fields: the only ones a rerun may change.
TIMES = {"wall_s", "propose_s", "evaluate_s", "overhead_s", "proposed_at", "finished_at"}


def without_times(value):
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def tool(*args, stdin=None):
    done = subprocess.run([TOOL, *args], input=stdin, capture_output=True, text=True, check=True)
    return done.stdout


def test_tune_json_serve_summary_and_python_run_give_one_summary():
    tuned = json.loads(tool("tune", TABLE, "--budget", "12", "--json", "--quiet", *STUDY))
    served = [json.loads(line) for line in tool(
        "serve", TABLE, *STUDY,
        stdin='{"op": "run", "evaluations": 12}\n{"op": "summary"}\n').splitlines()]
    study = tessel.Study(tessel.load_space(TABLE), backend="replay:" + TABLE, strategy="random",
                         scheduler="fifo", seed=5, jobs=1)
    python = study.run(tessel.stop.evaluations(12))

    summary = without_times(tuned["summary"])
    assert summary["evaluations"] == 12 and summary["best"]["status"] == "ok"
    assert summary["termination"] == "evaluations"
    assert without_times(served[0]["summary"]) == summary
    assert without_times(served[1]["summary"]) == summary
    assert without_times(python) == summary
    assert set(python) == set(tuned["summary"])  # the timing fields are there too


def test_a_python_study_made_with_set_reopens_in_show_as_made(tmp_path):
    db = tmp_path / "small.tessel.db"
    space = tessel.load_space(SMALL, set={"N": 32})
    assert space.count() < 78  # 78 at the file's N = 64
    study = tessel.Study(space, backend=lambda c: 1.0 + c["tile"] / 64, seed=1, db=db,
                         scheduler="fifo")
    study.run(evaluations=5)
    del study
    shown = json.loads(tool("show", str(db), "--json"))
    assert shown["valid_configs"] == space.count()
    assert shown["spec"]["set"] == {"N": "32"}
    assert shown["finished"] == 5


def test_a_python_study_on_the_cpu_backend_without_a_target_is_read_for_cpu(tmp_path):
    gemm = str(ROOT / "examples" / "cpu_gemm.tsl")
    with pytest.raises(tessel.Error, match="target 'trn2' has no field 'simd_bytes'"):
        tessel.load_space(gemm)  # read for trn2: what evaluates it is not known yet
    # given the path, the study reads it for what evaluates it
    study = tessel.Study(gemm, backend="cpu", db=tmp_path / "gemm.tessel.db")
    assert study.space.describe()["target"]["name"] == "cpu"
    assert study.space.count() == tessel.load_space(gemm, target="cpu").count()
    del study
    shown = json.loads(tool("show", str(tmp_path / "gemm.tessel.db"), "--json"))
    assert shown["spec"]["target"] == "cpu" and shown["target"].startswith("cpu")
    # as the CLI records it
    tool("serve", gemm, "--backend", "cpu", "--db", str(tmp_path / "cli.tessel.db"), stdin="")
    cli = json.loads(tool("show", str(tmp_path / "cli.tessel.db"), "--json"))
    assert cli["spec"]["target"] == "cpu" and cli["target"] == shown["target"]


def without_construction(checked):
    return {k: v for k, v in checked.items() if k != "construction_ms"}


def test_check_gives_what_tessel_check_json_prints():
    matmul = str(ROOT / "examples" / "sim_matmul.tsl")
    checked = tessel.check(matmul, set={"M": 1024}, samples=4, seed=9, backend="sim",
                           backend_set={"model": "analytic"})
    cli = json.loads(tool("check", matmul, "--set", "M=1024", "--sample", "4", "--seed", "9",
                          "--json", "--backend", "sim", "--backend-set", "model=analytic"))
    assert without_construction(checked) == without_construction(cli)
    assert checked["constants"]["M"] == 1024 and len(checked["samples"]) == 4
    assert checked["backend"]["name"].startswith("sim")
    with pytest.raises(tessel.Error, match="cannot read"):
        tessel.check(ROOT / "no-such.tsl")


def test_show_gives_what_tessel_show_json_prints(tmp_path):
    db = tmp_path / "table.tessel.db"
    tool("tune", TABLE, "--budget", "8", "--quiet", "--db", str(db), *STUDY[:-1])
    shown = tessel.show(db, top=3)
    assert shown == json.loads(tool("show", str(db), "--json", "--top", "3"))
    assert shown["finished"] == 8 and len(shown["best"]) == 3
