"""tessel.Model: a model's step and its tuning from Python are the driver's, the same as
`tessel model --json` and `tessel tune-model --json` give (docs/models.md)."""
import json
import os
import pathlib
import subprocess

import pytest

import tessel

ROOT = pathlib.Path(os.environ.get("TESSEL_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
TWO = ROOT / "tests" / "cli" / "fixtures" / "two_kernels.tsl"


def cli_json(*args):
    out = subprocess.run([os.environ["TESSEL_CLI"], *args, "--json"], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out)["targets"][0]


def test_the_step_is_what_tessel_model_reports():
    step = tessel.Model(TWO).step()
    assert [k["name"] for k in step["kernels"]] == ["norm", "proj"]
    cli = cli_json("model", str(TWO))
    assert cli["configs"] == "default"
    assert step == cli
    # a const override reaches every kernel that uses it
    smaller = tessel.Model(TWO, set={"rows": 512}).step()
    assert smaller["kernels"][0]["sets"]["rows"] == "512"
    assert smaller["step_s"] < step["step_s"]


def test_tune_is_tune_model_and_resumes(tmp_path):
    result = tessel.Model(TWO).tune(budget=6, seed=2, db_dir=tmp_path / "py")
    assert result["evaluations"] == 6
    assert sum(k["evaluations"] for k in result["kernels"]) == 6
    assert result["after_s"] <= result["before_s"]
    cli = cli_json("tune-model", str(TWO), "--budget", "6", "--seed", "2", "--quiet",
                   "--db-dir", str(tmp_path / "cli"))
    for r in (result, cli):
        del r["db_dir"]
    assert result == cli
    with pytest.raises(tessel.Error, match="pass --resume"):
        tessel.Model(TWO).tune(budget=8, seed=2, db_dir=tmp_path / "py")
    more = tessel.Model(TWO).tune(budget=8, seed=2, db_dir=tmp_path / "py", resume=True)
    assert more["evaluations"] == 8
    assert more["before_s"] == result["before_s"]


def test_tune_resumed_goes_on_as_it_began(tmp_path):
    # Before: resume=True without the first call's seed and strategy went on
    # with auto and seed 0 (the tune_model op had no resuming hook).
    began = {"seed": 5, "strategy": "random"}
    whole = tessel.Model(TWO).tune(budget=12, db_dir=tmp_path / "whole", **began)
    tessel.Model(TWO).tune(budget=6, db_dir=tmp_path / "resumed", **began)
    more = tessel.Model(TWO).tune(budget=12, db_dir=tmp_path / "resumed", resume=True)
    # and says what it took (before: the result had no notes)
    assert more.pop("notes") == [
        "resuming with strategy='random', seed=5, as it began (as the study recorded it)"]
    assert "notes" not in whole
    for r in (whole, more):
        del r["db_dir"]
    assert more == whole


def test_bad_arguments_are_named():
    with pytest.raises(tessel.Error, match="\"allocate\" must be utility, even or share"):
        tessel.Model(TWO).tune(budget=2, allocate="greedy", db_dir=False)


def test_errors_name_the_keywords_passed_not_the_spec_fields():
    def message(call):
        with pytest.raises(tessel.Error) as raised:
            call()
        return str(raised.value)

    model = tessel.Model(TWO)
    assert message(lambda: model.tune(db_dir=False)) == (
        "tessel.Model.tune: needs a budget: budget=N (evaluations) or cost_budget=SECONDS")
    assert message(lambda: model.tune(budget=2, cost_budget=-1, db_dir=False)) == (
        "tessel.Model.tune: cost_budget: must be finite and >= 0, not -1")
    assert message(lambda: model.tune(budget=2, scheduler="lifo", db_dir=False)) == (
        "tessel.Model.tune: scheduler: must be utility or fifo, not 'lifo'")
    assert message(lambda: model.tune(budget=2, db_dir=False, resume=True)) == (
        "tessel.Model.tune: db_dir=False: keeps nothing on disk, so there is nothing to resume "
        "or overwrite")


def test_step_text_is_what_tessel_model_prints():
    printed = subprocess.run([os.environ["TESSEL_CLI"], "model", str(TWO)], check=True,
                             capture_output=True, text=True, cwd=ROOT).stdout
    assert tessel.Model(TWO).step_text() == printed
    assert printed.startswith("model ") and "\nby category:" in printed
