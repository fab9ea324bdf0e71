"""tessel: auto-tuning for compute kernels, from Python (docs/agents.md).

    import tessel
    space = tessel.load_space("examples/sim_matmul.tsl")
    study = tessel.Study(space, backend="sim", seed=1)
    study.run(tessel.stop.evaluations(20) | tessel.stop.target(1e-3))
    print(study.best["objective"], study.best["config"])

Configs are dicts of parameter values (ints, strings, bools, lists for loop
orders); parameters left out take their defaults. Trials, suggestions,
summaries and explanations are plain dicts with the fields `tessel serve`
documents (docs/serve.md): the Study's ops are the ones `tessel serve` and
`tessel mcp` speak.
"""
import json as _json

from . import _tessel

__all__ = ["Error", "Model", "Space", "Study", "gated", "load_space", "parse_space", "stop", "explain",
           "report"]

Error = _tessel.Error
stop = _tessel.stop


def _dumps(value):
    """JSON text of a config or arguments; numpy scalars become numbers."""
    def plain(x):
        if hasattr(x, "item"):
            return x.item()
        if hasattr(x, "tolist"):
            return x.tolist()
        raise TypeError(f"{type(x).__name__} is not a JSON value")
    return _json.dumps(value, default=plain)


class Space:
    """A search space: parameters with finite domains, constraints, a target."""

    def __init__(self, native, origin=None):
        self._s = native
        self._description = None
        # How it was read (file, space, target, set): recorded in a study's
        # spec, so the study file reopens (`tessel show`) as this space.
        self._origin = origin or {}

    @property
    def name(self):
        return self._s.name

    def count(self):
        """The exact number of valid configs."""
        return self._s.count()

    def __len__(self):
        return self._s.count()

    def describe(self):
        """The `space` op's description: typed values, defaults, constants, target numbers."""
        if self._description is None:
            self._description = _json.loads(self._s.describe())
        return self._description

    @property
    def parameters(self):
        return [p["name"] for p in self.describe()["parameters"]]

    def sample(self, n=1, seed=0):
        """n configs drawn uniformly among the valid ones (reproducible from seed)."""
        return _json.loads(self._s.sample(n, seed))

    def configs(self, limit=None):
        """The first `limit` valid configs in rank order (all of them when None)."""
        return _json.loads(self._s.first(self.count() if limit is None else limit))

    def at(self, rank):
        return _json.loads(self._s.at(rank))

    def rank(self, config):
        return self._s.rank(_dumps(config))

    def complete(self, config):
        """The config with the parameters it leaves out filled with their defaults."""
        return _json.loads(self._s.complete(_dumps(config)))

    def is_valid(self, config):
        return self.why_invalid(config) == ""

    def why_invalid(self, config):
        """Why the config is not valid ("" when it is)."""
        try:
            return self._s.why_invalid(_dumps(config))
        except Error as e:
            return str(e)

    def default_config(self):
        text = self._s.default_config()
        return None if text is None else _json.loads(text)

    def neighbours(self, config):
        """Valid configs one move away (one parameter stepped, or one swap in an order)."""
        return _json.loads(self._s.neighbours(_dumps(config)))

    def key(self, config):
        """The config's stable 64-bit key."""
        return self._s.key(_dumps(config))

    def encode(self, configs):
        """The numeric encoding surrogate models use: a numpy array, one row per config."""
        import numpy as np
        if isinstance(configs, dict):
            return np.asarray(self._s.encode(_dumps(configs)), dtype=float)
        return np.asarray([self._s.encode(_dumps(c)) for c in configs], dtype=float)

    def explain(self, config, backend="sim"):
        """Why `config` is as fast as it is on the NeuronCore simulator."""
        return _json.loads(self._s.explain(_dumps(config), backend))

    def __repr__(self):
        return f"<tessel.Space {self.name!r}: {self.count()} valid configs>"


def load_space(path, name="", target=None, set=None):
    """Reads a .tsl file (or a replay file, .json/.json.gz: its parameters are the space);
    `name` picks a space (the first by default), `set` overrides consts. Without a target
    the space is read for trn2, and a Study on the cpu backend reads it for cpu (as the CLI)."""
    sets = {k: str(v) for k, v in (set or {}).items()}
    return Space(_tessel.load(str(path), "", name, target or "", sets),
                 {"file": str(path), "space": name, "target": target, "set": sets})


def parse_space(text, name="", target=None, set=None):
    """As load_space, from the .tsl text itself."""
    sets = {k: str(v) for k, v in (set or {}).items()}
    return Space(_tessel.load("", text, name, target or "", sets),
                 {"space": name, "target": target, "set": sets})


def explain(space, config, backend="sim"):
    """Why `config` of `space` is as fast as it is on the simulator (Space.explain)."""
    return space.explain(config, backend)


def gated(kernel, reference, inputs, outputs, flops=None, min_bytes=None, timed_calls=0,
          secret=0, tolerance_scale=1.0):
    """A gated Python kernel, for Study(backend=...) (docs/backends.md, "Gated callbacks").

    kernel(config, inputs) -> outputs: config a dict, inputs a list of numpy
    arrays (float32; int32 for labels), one per declared input, outputs an
    array or a list of them, one per declared output. reference(inputs) ->
    outputs, the same in float64. inputs / outputs: "A:MxK:bf16,B:KxN" (dims:
    integers or consts of the space). tessel hands the kernel the gate's
    hidden inputs, times every call itself, judges every call's outputs
    against the reference (and `timed_calls` more, spot-checked); the
    objective is the median call time. flops / min_bytes (a number or a
    let/const of the space) bound the time from below. secret 0: drawn.
    """
    return _tessel.gated_callback(kernel, reference, inputs, outputs,
                                  "" if flops is None else str(flops),
                                  "" if min_bytes is None else str(min_bytes),
                                  int(timed_calls), int(secret), float(tolerance_scale))


class Study:
    """One tuning study: ask/tell from your own loop, or run() on a backend.

    backend: None (you measure and tell), a spec ("sim", "replay:PATH",
    "command:CMD"), a callable config -> seconds (or a dict with objective,
    status, message, cost, metrics), or tessel.gated(...): a kernel tessel
    checks and times. db: the study file (SQLite); with
    resume=True an existing one is continued. token_price: seconds of cost
    1,000 agent tokens are worth. verify: results you tell cannot be the best
    until re-measured on the backend. jobs: evaluations run at once by run();
    window: proposals in flight (0 = jobs), so the same seed gives the same
    trials at any jobs (docs/scheduler.md).

    Left out (None): strategy "auto", seed 0, scheduler "utility",
    token_price 0, jobs 1, window 4, baseline True; but with resume=True
    the study goes on as it began: each of these the caller leaves out is
    taken from the study file, one it gives wins, and `notes` says which
    (docs/agents.md, "Resuming a study").
    """

    _joined = False  # made by Study.join: run() goes on until the shared study's budget

    # The defaults of the options a resume may take from the study file, by
    # keyword, and each one's field of the study spec (docs/driver.md).
    _recorded = {"strategy": ("strategy", "auto"), "seed": ("seed", 0),
                 "scheduler": ("scheduler", "utility"), "token_price": ("token_price_s", 0.0),
                 "jobs": ("jobs", 1), "window": ("window", 4), "baseline": ("baseline", True)}

    def __init__(self, space, backend=None, strategy=None, seed=None, db=None, resume=False,
                 scheduler=None, token_price=None, verify=False, jobs=None, window=None,
                 baseline=None):
        if not isinstance(space, Space):  # a path: read as `tessel tune FILE` reads it
            space = Space(None, {"file": str(space), "space": "", "target": None, "set": {}})
        self.space = space
        given = {"strategy": strategy, "seed": seed, "scheduler": scheduler,
                 "token_price": token_price, "jobs": jobs, "window": window, "baseline": baseline}
        options = {field: default if given[k] is None else given[k]
                   for k, (field, default) in self._recorded.items()}
        options["token_price_s"] = float(options["token_price_s"])
        # The study spec (docs/driver.md), as `tessel tune` would record it.
        spec = dict(space._origin, **options, db="" if db is None else str(db), verify=verify,
                    backend=backend if isinstance(backend, str) else "")
        self._st = _tessel.Study(space._s, _dumps(spec),
                                 None if isinstance(backend, str) else backend, resume,
                                 [self._recorded[k][0] for k, v in given.items() if v is not None])
        self.notes = self._st.notes()
        if self._st.read_space():  # read for the backend's target (cpu)
            self.space = Space(self._st.space(), dict(space._origin))

    @classmethod
    def join(cls, url, backend=None, settings=None, jobs=0, seed=None, wait=0.0, name=""):
        """One more worker of a shared study (docs/distributed.md), as `tessel worker URL` is:
        the study at `url` (postgresql://...?study=NAME, made by `tessel tune --db URL` or a
        Study with db=URL) rebuilt from what it recorded. backend: a spec replacing the
        study's for this worker (e.g. "trainium" on a host with NeuronCores); settings: a
        dict added to the study's backend settings; jobs: trials evaluated at once (0 = the
        backend's concurrency); seed: this worker's (default: from the study's seed and the
        worker's name); wait: seconds to wait for the study to be created; name: what other
        workers and `tessel show` call it (default host:pid). run() then works the study
        until its budget is spent."""
        self = cls.__new__(cls)
        self._st = _tessel.Study.join(str(url), backend or "",
                                      {str(k): str(v) for k, v in (settings or {}).items()},
                                      jobs, seed, float(wait), name)
        self.space = Space(self._st.space())
        self._joined = True
        self.notes = []
        return self

    def _call(self, op, **args):
        return _json.loads(self._st.call(op, _dumps({k: v for k, v in args.items() if v is not None})))

    def ask(self, n=1):
        """Up to n suggestions (dicts with trial_id, config, prediction, reason)."""
        return self._call("ask", n=n)["suggestions"]

    def tell(self, trial_id, objective=None, status="ok", message=None, cost=None, metrics=None,
             tokens=None, samples=None):
        """Records the result of an asked trial (agent-reported); returns the trial."""
        return self._call("tell", trial_id=trial_id, objective=objective, status=status,
                          message=message, cost=cost, metrics=metrics, tokens=tokens,
                          samples=samples)["trial"]

    def enqueue(self, config, source="agent", tokens=None, note=None):
        """Queues your own config; returns its trial id, or None when already proposed."""
        return self._call("enqueue", config=config, source=source, tokens=tokens, note=note)["trial_id"]

    def evaluate(self, config, source="agent", tokens=None, note=None):
        """Evaluates one config now on the backend; returns the trial."""
        return self._call("evaluate", config=config, source=source, tokens=tokens, note=note)["trial"]

    def run(self, until=None, evaluations=None):
        """Runs on the backend until a stop condition (tessel.stop.*, composable with | and &)
        or for `evaluations` more evaluations (a joined study: until its budget is spent);
        returns the summary dict."""
        if until is None and evaluations is None and self._joined:
            return _json.loads(self._st.run_budget())["summary"]
        if until is None:
            done = self._call("summary")["summary"]["evaluations"]
            until = stop.evaluations(done + (evaluations or 1))
        elif isinstance(until, int):
            until = stop.evaluations(until)
        return _json.loads(self._st.run(until))["summary"]

    def verify(self, max=1):
        """Re-measures the best agent-reported results on the backend; returns how many."""
        return self._call("verify", max=max)["verified"]

    @property
    def best(self):
        """The best trial (a dict), or None."""
        return self._call("best")["best"]

    @property
    def trials(self):
        return self._call("trials")["trials"]

    def summary(self):
        return self._call("summary")["summary"]

    def report(self):
        """The full text report."""
        return self._st.report()

    def explain(self, config=None, trial_id=None):
        """Why a config (default: the best) is as fast as it is on the simulator."""
        return self._call("explain", config=config, trial_id=trial_id)["explanation"]

    def interactions(self, config=None, against=None, budget=0, trial_id=None):
        """Which changes of a config (default: the best) from `against` (default: the
        baseline) help alone and which only together. Figures the study has are measured,
        up to `budget` more are evaluated on the backend (kept as trials), the rest are the
        surrogate's predictions; each point's "basis" says which (docs/report.md)."""
        return self._call("interactions", config=config, against=against, budget=budget,
                          trial_id=trial_id)["interactions"]

    def why_failed(self, trial_id=None, config=None):
        return self._call("why_failed", trial_id=trial_id, config=config)

    def objectives(self):
        """(trial ids, objectives) of the ok trials as numpy arrays, in trial order."""
        import numpy as np
        ok = [t for t in self.trials if t.get("status") == "ok"]
        return (np.asarray([t["trial_id"] for t in ok], dtype=np.int64),
                np.asarray([t["objective"] for t in ok], dtype=float))


class Model:
    """A model's step: a .tsl file with a model block (docs/models.md), its kernels timed
    on `backend` for `target`. step() is `tessel model`; tune() is `tessel tune-model`.

        model = tessel.Model("examples/models/dense_60m.tsl", set={"layers": 2})
        print(model.step()["step_s"])
        result = model.tune(budget=40, db_dir="dense.tessel")
        print(result["before_s"], "->", result["after_s"])

    Both return the dicts `tessel model --json` and `tessel tune-model --json` give per
    target (the `model` and `tune_model` agent ops give the same).
    """

    def __init__(self, path, model=None, target="trn2", set=None, backend="sim",
                 backend_set=None, gate=True):
        # The model spec (docs/models.md, "From C++"), as the ops read it.
        self._spec = {"file": str(path), "model": model or "", "target": target,
                      "set": {k: str(v) for k, v in (set or {}).items()}, "backend": backend,
                      "backend_set": {k: str(v) for k, v in (backend_set or {}).items()},
                      "gate": gate}

    def step(self):
        """The step at the kernels' default configs: per kernel and in total, by category and
        group, FLOPs, bytes, shares and the roofline."""
        return _json.loads(_tessel.model_step(_dumps(self._spec)))

    def step_text(self):
        """step() as the tables `tessel model` prints."""
        return _tessel.model_step_text(_dumps(self._spec))

    def tune(self, budget=None, cost_budget=None, allocate="utility", strategy=None, seed=None,
             db_dir=None, resume=False, overwrite=False, scheduler=None):
        """Tunes every kernel under one budget (evaluations, or seconds of cost), one study
        file per kernel in db_dir (default <model>.tessel; db_dir=False keeps nothing on
        disk); resume=True continues them. Left out (None): strategy "auto", seed 0,
        scheduler "utility"; but with resume=True each kernel study goes on with its own, as
        it began (as `tessel tune-model --resume` does), and the result's "notes" says what
        was taken. Returns the step before and after, and per kernel its evaluations, best
        config and gap to the roofline."""
        given = {"strategy": strategy, "seed": seed, "scheduler": scheduler}
        spec = dict(self._spec, budget=budget or 0, cost_budget=float(cost_budget or 0),
                    allocate=allocate, resume=resume, overwrite=overwrite, no_db=db_dir is False,
                    db_dir="" if db_dir in (None, False) else str(db_dir),
                    **{k: v for k, v in given.items() if v is not None})
        return _json.loads(_tessel.tune_model(_dumps(spec)))

    def __repr__(self):
        return f"<tessel.Model {self._spec['file']!r} on {self._spec['target']}>"


def check(path, name="", target=None, set=None, samples=3, seed=0, backend=None,
          backend_set=None):
    """What `tessel check --json` says of a space: sizes, valid fraction, groups, what each
    constraint rejects, `samples` uniform samples and, with `backend`, what the backend refuses
    in the space and the defaults it applies. Raises tessel.Error as load_space does."""
    spec = {"file": str(path), "space": name, "target": target or "",
            "set": {k: str(v) for k, v in (set or {}).items()}}
    return _json.loads(_tessel.check(_dumps(spec), samples, seed, backend or "",
                                     {k: str(v) for k, v in (backend_set or {}).items()}))


def show(db, top=10):
    """What `tessel show --json` says of a study file: its spec, counts by status, cost, the
    `top` best trials, learned constraints and the multi-fidelity statistics."""
    return _json.loads(_tessel.show(str(db), top))


def report(db, output=None, format="html", plot=None, top=12):
    """The report of a study file, as `tessel report` draws it (docs/report.md): the
    self-contained HTML page, or with format="svg" the one plot named by `plot`. Written
    to `output` when given (its path is returned), else returned as text."""
    text = _tessel.study_report(str(db), format, plot or "", top)
    if output is None:
        return text
    with open(output, "w", encoding="utf-8") as f:
        f.write(text)
    return str(output)
