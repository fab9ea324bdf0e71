"""The Python package `tessel` (python/), as a user drives it: spaces, sampling and
counting, a Python callable as the backend, ask/tell, stop conditions, the study
file and resume, explain on the simulator, agent-reported results and tokens,
the interactions op and the report of a study file."""
import math
import os
import pathlib

import numpy as np
import pytest

import tessel

ROOT = pathlib.Path(os.environ.get("TESSEL_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
SMALL = ROOT / "tests" / "cli" / "fixtures" / "small.tsl"
MATMUL = ROOT / "examples" / "matmul.tsl"
SIM_MATMUL = ROOT / "examples" / "sim_matmul.tsl"


def bowl(config):
    """A toy objective over small.tsl: best at tile 16, unroll 2, bufs 2."""
    return 1.0 + abs(config["tile"] - 16) / 8 + abs(config["unroll"] - 2) + 0.1 * config["bufs"]


def test_space_counts_match_enumeration_and_sampling_is_reproducible():
    space = tessel.load_space(SMALL)
    assert space.name == "small"
    assert space.count() == len(space) == 78
    every = space.configs()
    assert len(every) == 78
    assert len({space.key(c) for c in every}) == 78
    assert all(space.is_valid(c) for c in every)
    assert space.at(space.rank(every[40])) == every[40]
    a, b = space.sample(20, seed=7), space.sample(20, seed=7)
    assert a == b and all(space.is_valid(c) for c in a)
    assert space.sample(20, seed=8) != a


def test_space_description_is_typed():
    space = tessel.load_space(MATMUL)
    d = space.describe()
    kinds = {p["name"]: p["kind"] for p in d["parameters"]}
    assert kinds["tile_m"] == "integer" and kinds["order"] == "permutation"
    order = next(p for p in d["parameters"] if p["name"] == "order")
    assert order["values"][0] == ["m", "n", "k"]
    assert d["constants"]["M"] == 4096
    assert d["target"]["name"] == "trn2" and d["target"]["constants"]["partitions"] == 128
    assert space.complete({}) == d["default_config"]
    assert tessel.load_space(MATMUL, set={"M": 8192}).describe()["constants"]["M"] == 8192


def test_invalid_configs_say_why_and_encoding_is_numpy():
    space = tessel.load_space(SMALL)
    assert "tile * unroll must divide N" in space.why_invalid({"tile": 64, "unroll": 4})
    assert "not one of" in space.why_invalid({"tile": 7})
    x = space.encode(space.sample(5, seed=1))
    assert isinstance(x, np.ndarray) and x.shape[0] == 5 and x.shape[1] >= 4
    base = space.default_config()
    assert all(space.is_valid(n) for n in space.neighbours(base))
    with pytest.raises(tessel.Error, match="unknown parameter"):
        space.rank({"tyle": 8})


def test_a_python_callable_is_the_backend_and_stop_conditions_compose():
    space = tessel.load_space(SMALL)
    calls = []

    def measure(config):
        calls.append(config)
        return bowl(config)

    study = tessel.Study(space, backend=measure, seed=3)
    summary = study.run(tessel.stop.evaluations(30) | tessel.stop.target(1.2))
    assert summary["evaluations"] == len(calls) <= 30
    ids, ys = study.objectives()
    assert ys.min() == pytest.approx(study.best["objective"])
    assert study.best["objective"] == pytest.approx(min(bowl(c) for c in calls))
    if summary["termination"] == "target_reached":
        assert study.best["objective"] <= 1.2
    assert study.best["reported"] is False  # measured by the study, not told
    assert "tessel study report" in study.report()


def test_the_same_seed_gives_the_same_trials_at_any_jobs():
    space = tessel.load_space(MATMUL, target="trn2")
    runs = []
    for jobs in (1, 2):
        study = tessel.Study(space, backend="sim", seed=5, jobs=jobs)  # window 4 by default
        study.run(tessel.stop.evaluations(24))
        runs.append([(t["config"], t["status"], t["objective"]) for t in study.trials])
    assert runs[0] == runs[1]
    with pytest.raises(Exception, match="window"):
        tessel.Study(space, backend="sim", window=5000)


def test_backend_failures_are_data():
    space = tessel.load_space(SMALL)

    def flaky(config):
        if config["tile"] == 64:
            raise RuntimeError("kernel crashed")
        if config["bufs"] == 3:
            return {"status": "compile_error", "message": "SBUF overflow"}
        return {"objective": bowl(config), "cost": {"compile_s": 2.0}}

    study = tessel.Study(space, backend=flaky, seed=1, scheduler="fifo")
    study.run(evaluations=40)
    statuses = {t["status"] for t in study.trials}
    assert "ok" in statuses
    failures = study.why_failed()
    groups = {g["status"]: g for g in failures["by_status"]}
    if "runtime_error" in groups:
        assert "kernel crashed" in groups["runtime_error"]["examples"][0]["message"]
    assert "compile_error" in groups


def test_ask_tell_predictions_defaults_tokens():
    space = tessel.load_space(SMALL)
    study = tessel.Study(space, seed=1)  # no backend: the caller measures
    first = study.ask(2)
    assert [s["prediction"]["basis"] for s in first] == ["prior", "prior"]
    assert first[0]["source"] == "baseline"
    for s in first:
        study.tell(s["trial_id"], objective=bowl(s["config"]), tokens=50)
    trial_id = study.enqueue({"tile": 16}, tokens=200, note="mid tiles")  # the rest: defaults
    assert trial_id is not None
    assert study.enqueue({"tile": 16}) is None  # a duplicate
    asked = study.ask(1)[0]
    assert asked["trial_id"] == trial_id and asked["config"]["unroll"] == 2
    assert asked["prediction"]["tokens"] == 200
    assert not math.isnan(asked["prediction"]["mean"])
    told = study.tell(trial_id, objective=bowl(asked["config"]))
    assert told["reported"] is True
    assert study.summary()["tokens"] == 300
    with pytest.raises(tessel.Error, match="already finished"):
        study.tell(trial_id, objective=1.0)
    with pytest.raises(tessel.Error, match="no backend"):
        study.evaluate({"tile": 8})


def test_hostile_input_is_tessel_error(tmp_path):
    # Before: a message quoting a non-UTF-8 line raised UnicodeDecodeError, and a
    # NaN objective a RuntimeError holding the JSON parser's exception text.
    bad = tmp_path / "bad.tsl"
    bad.write_bytes(b"space s {\n  param a : {1, 2}\n  caf\xe9\n}\n")
    with pytest.raises(tessel.Error, match="bad.tsl:3:6") as raised:
        tessel.load_space(bad)
    assert "\ufffd" in str(raised.value)
    study = tessel.Study(tessel.load_space(SMALL), seed=1)
    trial_id = study.ask(1)[0]["trial_id"]
    for nan in (float("nan"), float("inf")):
        with pytest.raises(tessel.Error, match="tell: not a JSON value"):
            study.tell(trial_id, objective=nan)
    assert study.tell(trial_id, objective=1.0)["objective"] == 1.0  # nothing lost


def test_study_errors_name_the_keywords_passed_not_the_spec_fields():
    space = tessel.load_space(SMALL)

    def message(**keywords):
        with pytest.raises(tessel.Error) as raised:
            tessel.Study(space, backend=bowl, **keywords)
        return str(raised.value)

    assert message(token_price=-1) == (
        "tessel.Study: token_price: must be finite and >= 0, not -1")
    assert message(scheduler="lifo") == (
        "tessel.Study: scheduler: must be utility or fifo, not 'lifo'")
    assert message(jobs=100000) == (
        "tessel.Study: jobs = 100000: must be at most 4096 (0 = the backend's concurrency)")
    assert message(window=5000) == (
        "tessel.Study: window = 5000: must be at most 4096 (0 = as many as jobs)")
    with pytest.raises(tessel.Error) as raised:
        tessel.Study(space, verify=True)
    assert str(raised.value) == (
        "tessel.Study: verify: re-measures agent-reported results on the backend; give one "
        "(backend=\"sim\", a callable, tessel.gated(...))")


def test_study_file_and_resume(tmp_path):
    space = tessel.load_space(SMALL)
    db = tmp_path / "small.tessel.db"
    study = tessel.Study(space, backend=bowl, seed=5, db=db)
    study.run(evaluations=6)
    before = [(t["trial_id"], t["objective"]) for t in study.trials]
    del study
    with pytest.raises(tessel.Error, match="resume"):
        tessel.Study(space, backend=bowl, seed=5, db=db)
    again = tessel.Study(space, backend=bowl, seed=5, db=db, resume=True)
    assert [(t["trial_id"], t["objective"]) for t in again.trials] == before
    again.run(evaluations=4)
    assert again.summary()["evaluations"] == 10


def test_resume_goes_on_as_the_study_began(tmp_path):
    # As `tessel tune --resume`: the options that decide the next trials and
    # that resume=True leaves out are the study file's (docs/agents.md).
    space = tessel.load_space(SMALL)
    began = dict(strategy="random", seed=7, scheduler="fifo", window=1)
    whole = tessel.Study(space, backend=bowl, **began)
    whole.run(evaluations=14)
    db = tmp_path / "began.tessel.db"
    first = tessel.Study(space, backend=bowl, db=db, **began)
    assert first.notes == []
    first.run(evaluations=6)
    del first
    again = tessel.Study(space, backend=bowl, db=db, resume=True)
    assert again.notes == [
        "resuming with strategy='random', seed=7, scheduler='fifo', window=1, as it began "
        "(as the study recorded it)"]
    again.run(evaluations=4)
    configs = [t["config"] for t in again.trials]
    assert len(configs) == 10 and configs == [t["config"] for t in whole.trials[:10]]
    del again
    # What the caller gives wins, and the notes say so.
    other = tessel.Study(space, backend=bowl, db=db, resume=True, seed=9, strategy="random")
    assert other.notes == [
        "resuming with scheduler='fifo', window=1, as it began (as the study recorded it)",
        "begun with seed=7; this study proposes with seed=9 as given (leave it out to continue "
        "it as it began)"]
    other.run(evaluations=4)
    assert [t["config"] for t in other.trials[10:]] != [t["config"] for t in whole.trials[10:]]


def test_verify_re_measures_what_an_agent_told():
    space = tessel.load_space(SMALL)
    study = tessel.Study(space, backend=bowl, seed=2, verify=True)
    s = study.ask(1)[0]
    study.tell(s["trial_id"], objective=1e-9)  # too good to be true
    assert study.best is None  # unverified: not the answer yet
    assert study.verify() == 1
    trial = study.trials[s["trial_id"] - 1]
    assert trial["reported"] is False
    assert trial["objective"] == pytest.approx(bowl(s["config"]))
    assert trial["metrics"]["reported_objective"] == 1e-9
    assert study.best["trial_id"] == s["trial_id"]


def test_explain_on_the_simulator():
    space = tessel.load_space(SIM_MATMUL)
    e = tessel.explain(space, {"tile_n": 512})
    assert e["config"]["tile_n"] == 512
    assert e["latency_s"] > 0 and isinstance(e["bottleneck"], str)
    assert isinstance(e["suggestions"], list)
    study = tessel.Study(space, backend="sim", seed=1)
    study.run(evaluations=3)
    assert study.explain()["config"] == study.best["config"]


def test_a_gated_python_kernel_is_checked_and_timed_by_tessel():
    space = tessel.parse_space("space mm { const M = 48  const K = 40  const N = 32 "
                               "param tile : {1, 2, 4}  let flops = 2 * M * N * K }")

    def reference(inputs):
        a, b = inputs
        return a.astype(np.float64) @ b.astype(np.float64)

    calls = []

    def honest(config, inputs):
        calls.append(config["tile"])
        a, b = inputs
        return [a @ b]

    study = tessel.Study(space, backend=tessel.gated(honest, reference, "A:MxK:bf16,B:KxN:bf16",
                                                     "C:MxN", flops="flops", timed_calls=5,
                                                     secret=7),
                         seed=1, scheduler="fifo")
    study.run(evaluations=2)
    assert [t["status"] for t in study.trials] == ["ok", "ok"]
    assert len(calls) >= 2 * (15 + 2 + 5)
    assert all(t["metrics"]["gate_calls"] >= 22 for t in study.trials)

    def lazy(config, inputs):  # skips the last half of K
        a, b = inputs
        return a[:, :20] @ b[:20, :]

    study = tessel.Study(space, backend=tessel.gated(lazy, reference, "A:MxK:bf16,B:KxN:bf16",
                                                     "C:MxN", secret=7),
                         seed=1, scheduler="fifo")
    study.run(evaluations=1)
    trial = study.trials[0]
    assert trial["status"] == "incorrect"
    assert "output C[" in trial["message"]


def made_up(config):
    """Over small.tsl: tile 16 saves 20%; bufs 3 and the scalar engine save nothing
    alone and 30% together."""
    t = 1e-3 * (0.8 if config["tile"] == 16 else 1.0)
    return t * (0.7 if config["bufs"] == 3 and config["engine"] == "scalar" else 1.0)


def test_interactions_and_the_report_of_a_study_file(tmp_path):
    space = tessel.load_space(SMALL)
    db = tmp_path / "made_up.tessel.db"
    study = tessel.Study(space, backend=made_up, strategy="random", seed=5, db=db)
    study.run(evaluations=8)
    target = {"tile": 16, "bufs": 3, "engine": "scalar"}
    before = len(study.trials)
    r = study.interactions(target, budget=4)
    assert r["changes"] == ["tile=16", "bufs=3", "engine=scalar"]
    assert r["spent"] == 4 and len(study.trials) - before <= 4
    assert r["base"]["basis"] == "measured" and r["base"]["objective"] == 1e-3
    assert {p["basis"] for p in r["pairs"] + r["without"]} <= {"measured", "predicted"}
    full = study.interactions(target, budget=100)
    assert full["predicted"] == 0
    assert "bufs=3 gains 0% alone, 30% with engine=scalar (measured)" in full["only_together"]
    assert "budget: " in full["text"]
    with pytest.raises(tessel.Error, match='"budget" must be a whole number'):
        study.interactions(target, budget=-1)
    with pytest.raises(tessel.Error, match="no backend"):
        tessel.Study(space).interactions(target, budget=1)
    del study

    page = tmp_path / "report.html"
    assert tessel.report(db, output=page) == str(page)
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") >= 6
    assert "bufs=3" in html  # the interactions plot: the best against the baseline
    svg = tessel.report(db, format="svg", plot="interactions")
    assert svg.startswith("<?xml") and "<svg" in svg
    with pytest.raises(tessel.Error, match="unknown format 'pdf'"):
        tessel.report(db, format="pdf")
    with pytest.raises(tessel.Error, match="svg format draws one plot: name the plot"):
        tessel.report(db, format="svg")
