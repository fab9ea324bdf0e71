"""A numpy interpreter for the subset of NKI that tessel's emitter writes.

A test and verification tool, like the SDK's own CPU simulation of NKI: it
runs an emitted kernel on numpy arrays so tests can compare it with its
reference. It models no time. Semantics and limits follow the public NKI
documentation (docs/nki.md lists each call, its source page and the checks
made here); anything outside the subset raises NkiError instead of guessing.

    kernel = load_kernel("matmul.py")      # installs the nki modules, imports the file
    outputs = run(kernel, {"A": a, "B": b})
    counts = structure()                     # what the kernel did
    shape_only = count(kernel)               # the same counts without computing (any size)

A kernel file whose module sets LNC > 1 is an SPMD kernel (docs/nki.md, "Two
physical cores"): it is launched as kernel[LNC](...), so run() and count()
run it once per program id (nl.program_id(0)) over the same HBM tensors, each
program with its own SBUF, PSUM and counts; an nl.shared_hbm tensor a program
allocates is the one every program allocates at the same point (NKI: "visible
to all kernel instances in the SPMD grid"), so the outputs are the programs'
writes combined, and structure() is a list, one entry per program id.

The counts are the structure the simulator's lowering of the same plan
states in the kernel file (STRUCTURE; docs/nki.md, "Structure"): matmul and
transpose instructions by shape, DMA transfers and bytes per direction, the
PSUM banks written, and instructions per engine.
"""

import collections
import importlib.util
import itertools
import sys
import threading
import types

import numpy as np

PMAX = 128  # nl.tile_size.pmax: partitions of an SBUF/PSUM tile
PSUM_FMAX = 512  # nl.tile_size.psum_fmax: fp32 elements of one PSUM bank per partition
PSUM_BYTES = 16384  # PSUM per partition: 8 banks x 2 KiB
PSUM_BANK_BYTES = 2048  # one bank per partition (nl.tile_size.psum_bank_fmax_bytes)
STATIONARY_FMAX = 128  # nl.tile_size.gemm_stationary_fmax
MOVING_FMAX = 512  # nl.tile_size.gemm_moving_fmax


class NkiError(Exception):
    """The kernel left the subset, or broke a limit NKI enforces."""


# --- dtypes --------------------------------------------------------------------

_DTYPES = {"bfloat16": 2, "float32": 4, "float16": 2, "int32": 4, "float8_e4m3": 1,
           "float8_e5m2": 1}

# The fp8 formats (nl.float8_e4m3: 1 sign, 4 exponent, 3 mantissa bits; nl.float8_e5m2:
# 5 and 2): significand bits with the implicit one, the smallest normal's exponent, and
# the largest finite value, at which a conversion saturates (as tessel's gate rounds,
# src/gate/element_type.cpp; e4m3 is the OCP "fn" variant, max 448).
_FP8 = {"float8_e4m3": (4, -6, 448.0), "float8_e5m2": (3, -14, 57344.0)}
# nl.float16 (1 sign, 5 exponent, 10 mantissa bits) on the same kind of grid, saturating
# at 65504 as the gate does (numpy's cast to float16 would overflow to inf instead).
_GRIDS = {**_FP8, "float16": (11, -14, 65504.0)}


def _check_dtype(dtype):
    if dtype not in _DTYPES:
        raise NkiError(f"dtype {dtype!r} is outside the interpreter's subset {sorted(_DTYPES)}")
    return dtype


def round_to(dtype, values):
    """`values` as `dtype` stores them (round to nearest even), held in float32 (int32 for int32)."""
    if dtype == "int32":
        v = np.asarray(values)
        if v.dtype.kind == "f":
            raise NkiError("a float -> int32 cast is outside the subset")
        return v.astype(np.int32)
    v = np.asarray(values, dtype=np.float32)
    if dtype == "float32":
        return v
    if dtype in _GRIDS:
        return _round_grid(_GRIDS[dtype], v)
    if dtype == "bfloat16":
        u = np.ascontiguousarray(v).view(np.uint32).astype(np.uint64)
        finite = np.isfinite(v)
        rounded = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
        out = np.where(finite, rounded.view(np.float32), v)
        return out.astype(np.float32)
    raise NkiError(f"dtype {dtype!r} is outside the subset")


def _round_grid(fmt, v):
    """Nearest-even rounding to an fp8 or fp16 grid: the quantum of each value's binade (subnormals
    share the smallest normal binade's), then saturation; NaN and +-inf pass through."""
    precision, min_exponent, largest = fmt
    x = v.astype(np.float64)
    finite = np.isfinite(x) & (x != 0)
    _, e = np.frexp(np.where(finite, x, 1.0))  # x = m 2^e, 0.5 <= |m| < 1
    quantum = np.maximum(e - 1, min_exponent) - (precision - 1)
    r = np.ldexp(np.rint(np.ldexp(x, -quantum)), quantum)
    r = np.clip(r, -largest, largest)
    return np.where(finite, r, x).astype(np.float32)


# --- tensors -------------------------------------------------------------------

SBUF, PSUM, HBM = "sbuf", "psum", "hbm"


def _contiguous(keys, shape):
    """Whether basic slicing `keys` of a contiguous array keeps it one run: the axes
    before the first one of extent > 1 have extent 1, and every axis after it is whole."""
    cut = False
    for i, n in enumerate(shape):
        k = keys[i] if i < len(keys) else slice(None)
        lo, hi = (k, k + 1) if not isinstance(k, slice) else (k.start or 0,
                                                              n if k.stop is None else k.stop)
        if cut and hi - lo != n:
            return False
        cut = cut or hi - lo > 1
    return True


class Tensor:
    """A tensor in HBM, SBUF or PSUM, or a basic-slice view of one. `root` is
    the whole allocation and `base` its first byte per partition (PSUM: a bank
    boundary), so a view knows which PSUM banks it covers."""

    def __init__(self, data, dtype, buffer, name="", root=None, base=0, contiguous=True):
        self.data, self.dtype, self.buffer, self.name = data, dtype, buffer, name
        self.root, self.base = (data if root is None else root), base
        self.contiguous = contiguous  # one run of the root's elements (count() data has none)

    @property
    def shape(self):
        return tuple(self.data.shape)

    def __getitem__(self, key):
        keys = key if isinstance(key, tuple) else (key,)
        for k in keys:
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise NkiError(f"{self.name}: strided slices are outside the subset")
                continue
            if isinstance(k, (int, np.integer)):
                continue
            raise NkiError(f"{self.name}: index {k!r} is outside the subset (ints and slices only)")
        for k, n in zip(keys, self.data.shape):
            if isinstance(k, slice):
                lo, hi = k.start or 0, n if k.stop is None else k.stop
                if lo < 0 or hi > n or lo >= hi:
                    raise NkiError(f"{self.name}: slice {lo}:{hi} out of bounds of {n} (or empty)")
            elif not 0 <= k < n:
                raise NkiError(f"{self.name}: index {k} out of bounds of {n}")
        view = self.data[key]
        if not isinstance(view, np.ndarray) or view.ndim == 0:
            raise NkiError(f"{self.name}: indexing down to a scalar is outside the subset")
        return Tensor(view, self.dtype, self.buffer, self.name, self.root, self.base,
                      self.contiguous and _contiguous(keys, self.data.shape))

    def reshape(self, shape):
        if self.buffer != HBM:
            raise NkiError("reshape of an on-chip tile is outside the subset")
        if not self.contiguous:
            raise NkiError(f"{self.name}: reshape of a non-contiguous view")
        if int(np.prod(shape, dtype=np.int64)) != self.data.size:
            raise NkiError(f"{self.name}: reshape of {self.shape} into {tuple(shape)}")
        if not STATE.compute:  # shape-only tensors
            return Tensor(_shape_only(shape), self.dtype, HBM, self.name)
        return Tensor(self.data.reshape(shape), self.dtype, HBM, self.name)

    def ap(self, pattern, offset=0, vector_offset=None, indirect_dim=0):
        """An HBM access pattern; with vector_offset, an indirect one (a gather or scatter of rows:
        row p at offset + vector_offset[p] * pattern[0][0], its elements pattern[1][0] apart)."""
        if self.buffer != HBM or self.data is not self.root:
            raise NkiError(f"{self.name}: ap() of a whole HBM tensor only (the subset)")
        if len(pattern) != 2 or indirect_dim != 0 or vector_offset is None:
            raise NkiError(f"{self.name}: the subset's ap() is [[row stride, rows], [step, width]] "
                           "with vector_offset and indirect_dim=0")
        _tile(vector_offset, "ap vector_offset", (SBUF,))
        if vector_offset.dtype != "int32" or vector_offset.shape != (pattern[0][1], 1):
            raise NkiError(f"ap vector_offset: an int32 [{pattern[0][1]}, 1] tile in SBUF, got "
                           f"{vector_offset.dtype} {vector_offset.shape}")
        return _Indirect(self, [tuple(p) for p in pattern], offset, vector_offset)

    def banks(self):
        """The PSUM banks this view covers (per partition: its first to last byte)."""
        if self.buffer != PSUM:
            return range(0)
        item = self.root.itemsize
        offset = self.data.__array_interface__["data"][0] - self.root.__array_interface__["data"][0]
        lo = offset % self.root.strides[0]
        hi = lo + sum((n - 1) * s for n, s in zip(self.data.shape[1:], self.data.strides[1:]))
        first = (self.base + lo // item * 4) // PSUM_BANK_BYTES
        last = (self.base + hi // item * 4 + 3) // PSUM_BANK_BYTES
        return range(first, last + 1)

    def write(self, values):
        if self.buffer == PSUM:
            STATE.counts.psum_banks.update(self.banks())
        if not STATE.compute:
            return
        values = np.asarray(values)
        if values.shape != self.data.shape:
            raise NkiError(f"{self.name}: writing shape {values.shape} into {self.data.shape}")
        self.data[...] = round_to(self.dtype, values)

    def read(self):
        """The values as float32 (the engines compute in fp32)."""
        return self.data.astype(np.float32)

    def _no_arithmetic(self, *_):
        raise NkiError("Python arithmetic on tiles is outside the subset: use nki.isa calls")

    __add__ = __sub__ = __mul__ = __truediv__ = __neg__ = __radd__ = __rmul__ = _no_arithmetic


class _Indirect:
    """A gather or scatter of HBM rows through an index tile (Tensor.ap)."""

    def __init__(self, tensor, pattern, offset, index):
        self.tensor, self.pattern, self.offset, self.index = tensor, pattern, offset, index
        self.dtype, self.buffer, self.name = tensor.dtype, HBM, tensor.name

    @property
    def shape(self):
        return (self.pattern[0][1], self.pattern[1][1])

    def _flat(self):
        """The element offsets, [rows, width], checked against the tensor's size."""
        (row_stride, _), (step, width) = self.pattern
        rows = self.index.data[:, 0].astype(np.int64)
        where = self.offset + rows[:, None] * row_stride + np.arange(width)[None, :] * step
        if where.size and (where.min() < 0 or where.max() >= self.tensor.data.size):
            raise NkiError(f"{self.name}: an indirect access out of bounds (oob_mode=error)")
        return where

    def gather(self):
        return self.tensor.data.reshape(-1)[self._flat()].astype(np.float32)

    def scatter(self, values):
        self.tensor.data.reshape(-1)[self._flat()] = round_to(self.dtype, values)


def _shape_only(shape):
    """A read-only array of `shape` that takes no memory (count mode's HBM tensors)."""
    return np.broadcast_to(np.zeros((), dtype=np.float32), tuple(shape))


class Counts:
    """What a kernel did, in the simulator's terms (docs/nki.md, "Structure")."""

    ENGINES = ("tensor", "vector", "scalar", "gpsimd")

    def __init__(self):
        self.matmul = collections.Counter()  # (contraction, stationary free, moving free)
        self.transpose = collections.Counter()  # (partitions, free) of the input
        self.dma = {}  # "hbm->sbuf": [transfers, bytes]
        self.psum_banks = set()
        self.engines = collections.Counter()
        self.collectives = {}  # "all_gather": [calls, bytes of the destinations] (nki_ranks.py)

    def as_dict(self):
        """The form of an emitted file's STRUCTURE (collectives only when a rank calls any)."""
        out = {
            "matmul": dict(self.matmul),
            "transpose": dict(self.transpose),
            "dma": {k: tuple(v) for k, v in self.dma.items()},
            "psum_banks": len(self.psum_banks),
            "engines": {e: self.engines[e] for e in self.ENGINES},
        }
        if self.collectives:
            out["collectives"] = {k: tuple(v) for k, v in self.collectives.items()}
        return out


class _State:
    def __init__(self):
        self.reset()

    def reset(self, sbuf_bytes=196608, compute=True, grid=1):
        self.sbuf_capacity = sbuf_bytes
        self.instructions = 0
        self.compute = compute  # False: validate and count, never compute (count())
        self.grid = grid  # programs in the SPMD launch grid (the kernel file's LNC)
        self.shared_hbm = []  # the nl.shared_hbm tensors, in the order programs allocate them
        self.program_counts = []
        self.cores = {}  # program -> its core's state while another program runs
        self.start_program(0)

    _CORE = ("sbuf_used", "psum_used", "hbm_allocated", "counts")

    def start_program(self, program):
        """Program `program` of the grid starts: on its own physical core (SBUF, PSUM, counts)."""
        self.program = program
        self.sbuf_used = 0
        self.psum_used = 0
        self.hbm_allocated = 0
        self.counts = Counts()
        self.program_counts.append(self.counts)
        self.cores[program] = tuple(getattr(self, f) for f in self._CORE)

    def switch_to(self, program):
        """Program `program` runs on from where it stopped (a core barrier): its core's state."""
        self.cores[self.program] = tuple(getattr(self, f) for f in self._CORE)
        self.program = program
        for f, v in zip(self._CORE, self.cores[program]):
            setattr(self, f, v)


STATE = _State()


def _tile(t, what, buffers=(SBUF, PSUM)):
    if not isinstance(t, Tensor):
        raise NkiError(f"{what}: expected a tile, got {type(t).__name__}")
    if t.buffer not in buffers:
        raise NkiError(f"{what}: a tile in {t.buffer} where {'/'.join(buffers)} is required")
    if t.buffer in (SBUF, PSUM) and t.shape[0] > PMAX:
        raise NkiError(f"{what}: partition dimension {t.shape[0]} > {PMAX}")
    return t


def _issue(engine, what):
    """Counts one instruction on `engine` (a name in Counts.ENGINES)."""
    STATE.instructions += 1
    STATE.counts.engines[engine] += 1


def _engine_of(engine, allowed, what):
    """The engine an `engine=` argument names, among `allowed`; the kernel must say."""
    for name in allowed:
        if engine is getattr(_ENGINE, name):
            return name
    raise NkiError(f"{what}: pass engine= one of {', '.join('nisa.engine.' + a for a in allowed)}"
                   f" (the structure check counts instructions per engine)")


def _engine_can_touch(engine, *tiles, what=""):
    if engine == "gpsimd" and any(t.buffer == PSUM for t in tiles if isinstance(t, Tensor)):
        raise NkiError(f"{what}: GpSimd Engine cannot access PSUM")


def _same_shape(a, b, what):
    if a.shape != b.shape:
        raise NkiError(f"{what}: shapes {a.shape} and {b.shape} differ")


# --- nki.isa's namespaces (the instructions are in nki_isa.py) -------------------

_ENGINE = types.SimpleNamespace(vector=object(), scalar=object(), gpsimd=object(),
                                tensor=object(), unknown=object())
_REDUCE_CMD = types.SimpleNamespace(idle="idle", reset="reset", reduce="reduce",
                                    reset_reduce="reset_reduce")
_PERF_MODE = types.SimpleNamespace(none="none", double_row="double_row")  # nisa.matmul_perf_mode


# --- the SPMD grid: programs run one at a time, switching at core barriers ----------

class Turns:
    """Threads that run one at a time: thread i holds the turn until it returns or reaches
    a sync point (sync()), and the turn goes to the lowest-numbered thread neither waiting
    nor finished. A sync point releases when every thread has reached it: `perform` runs
    once, then thread 0 goes on. The one scheduler of an SPMD launch's programs (sync at
    nisa.core_barrier: a program's reads after it see every program's writes before it;
    without a barrier program 0 runs to the end before program 1 starts, so a read of
    shared HBM that another program writes later sees it unwritten, NaN) and of a
    multi-rank kernel's ranks (sync at each nki.collectives call, nki_ranks.py).
    `switch(i)` makes thread i's interpreter state current; `noun` names a thread in errors
    ("program", "rank"). A thread that returns while others wait at a sync point, or that
    reaches one after another returned, is an error (NkiError), as is the first exception
    of any thread; the others stop where they wait (`error` holds it)."""

    def __init__(self, n, switch, noun):
        self.n, self.switch, self.noun = n, switch, noun
        self.cond = threading.Condition()
        self.turn = 0
        self.arrived = []  # (thread, what) at the pending sync point
        self.finished = [False] * n
        self.results = [None] * n
        self.error = None

    def _wait(self, i):
        self.cond.wait_for(lambda: self.turn == i or self.error is not None)
        if self.error is not None:
            raise _Aborted()
        self.switch(i)

    def _fail(self, error):
        if self.error is None:
            self.error = error
        self.cond.notify_all()

    def _pass(self):
        """Hands the turn on (the caller holds cond)."""
        waiting = {q for q, _ in self.arrived}
        self.turn = next((q for q in range(self.n)
                          if not self.finished[q] and q not in waiting), None)
        self.cond.notify_all()

    def run(self, i, body):
        """Thread i's body: waits for its turn, runs body() and keeps what it returns."""
        try:
            with self.cond:
                self._wait(i)
            result = body()
            with self.cond:
                if self.arrived:
                    raise NkiError(f"{self.noun} {i} returned while {self.noun}(s) "
                                   f"{[q for q, _ in self.arrived]} wait in "
                                   f"{self.arrived[0][1]}")
                self.results[i], self.finished[i] = result, True
                self._pass()
        except _Aborted:
            pass
        except BaseException as e:  # noqa: B036 (handed to the caller, as `error`)
            with self.cond:
                self._fail(e)

    def sync(self, i, what, perform=None):
        """Thread i reaches sync point `what`; returns when every thread has reached it
        and perform(arrived) (if given) has run."""
        with self.cond:
            if any(self.finished):
                raise NkiError(f"{self.noun} {i} reaches {what} after {self.noun} "
                               f"{self.finished.index(True)} returned: they differ")
            self.arrived.append((i, what))
            if len(self.arrived) < self.n:
                self._pass()
            else:
                arrived, self.arrived = self.arrived, []
                if perform is not None:
                    perform(arrived)
                self.turn = 0
                self.cond.notify_all()
            self._wait(i)


class _Aborted(Exception):
    """Another program of the grid failed: this one stops where it waits."""


_GRID = [None]  # the grid of the launch in progress (None: one program)


def core_barrier(data, cores, engine=None):
    """nisa.core_barrier (NKI 2.33; nki.lnc.core_barrier later): every program of the grid
    waits here until all have arrived; `data` is the shared HBM tensor they synchronise on."""
    what = "core_barrier"
    if _GRID[0] is None:
        raise NkiError(f"{what}: only in an SPMD kernel of LNC = 2 programs")
    if tuple(cores) != (0, 1):
        raise NkiError(f"{what}: cores must be (0, 1) (the two cores sharing an HBM stack)")
    _tile(data, what, buffers=(HBM,))
    if not any(data.root is t.root for t in STATE.shared_hbm):
        raise NkiError(f"{what}: data must be an nl.shared_hbm tensor the programs allocate")
    if engine is None:
        engine = _ENGINE.gpsimd  # the documented default
    _issue(_engine_of(engine, ("gpsimd", "vector", "scalar", "tensor"), what), what)
    _GRID[0].sync(STATE.program, what)


def _make_isa():
    import nki_isa  # noqa: E402 (it imports this module)
    isa = types.ModuleType("nki.isa")
    for fn in nki_isa.INSTRUCTIONS + (core_barrier,):
        setattr(isa, fn.__name__, fn)
    isa.engine = _ENGINE
    isa.reduce_cmd = _REDUCE_CMD
    isa.matmul_perf_mode = _PERF_MODE
    return isa


def _jit(fn):
    fn.nki_kernel = True
    return fn


def install():
    """Puts the interpreter's `nki`, `nki.language`, `nki.isa` and `nki.collectives`
    (nki_ranks.py) in sys.modules."""
    import nki_language  # noqa: E402 (it imports this module)
    import nki_ranks  # noqa: E402 (it imports this module)
    nki = types.ModuleType("nki")
    nki.language, nki.isa, nki.jit = nki_language.make(), _make_isa(), _jit
    nki.collectives = nki_ranks.make_collectives()
    sys.modules.update({"nki": nki, "nki.language": nki.language, "nki.isa": nki.isa,
                        "nki.collectives": nki.collectives})


_counter = itertools.count()


def load_kernel(path):
    """Imports an emitted kernel file under the interpreter."""
    install()
    spec = importlib.util.spec_from_file_location(f"emitted_{next(_counter)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _kernel(module):
    if getattr(module, "RANK_KERNELS", None):  # one per rank (nki_ranks.py): rank 0's
        return module.RANK_KERNELS[0]
    kernels = [f for f in vars(module).values() if getattr(f, "nki_kernel", False)]
    if len(kernels) != 1:
        raise NkiError(f"expected one @nki.jit kernel, found {len(kernels)}")
    return kernels[0]


def _outputs(module, result):
    results = result if isinstance(result, tuple) else (result,)
    if len(results) != len(module.OUTPUTS):
        raise NkiError(f"the kernel returned {len(results)} tensors, OUTPUTS names "
                       f"{len(module.OUTPUTS)}")
    for (name, (shape, dtype)), t in zip(module.OUTPUTS.items(), results):
        if not isinstance(t, Tensor) or t.buffer != HBM or t.shape != tuple(shape) or \
                t.dtype != dtype:
            raise NkiError(f"output {name}: expected an HBM tensor {shape} of {dtype}")
    return results


def _grid(module):
    grid = getattr(module, "LNC", 1)
    if not isinstance(grid, int) or not 1 <= grid <= 2:
        raise NkiError(f"LNC = {grid!r}: a launch grid of 1 or 2 programs (trn2's LNC degrees)")
    return grid


def _launch(module, kernel, args):
    """Runs the kernel once per program id of its grid; returns its outputs (shared HBM)."""
    if STATE.grid == 1:
        return _outputs(module, kernel(*args))
    for program in range(1, STATE.grid):
        STATE.start_program(program)
    STATE.switch_to(0)
    grid = Turns(STATE.grid, STATE.switch_to, "program")
    threads = [threading.Thread(target=grid.run, args=(p, lambda: kernel(*args)))
               for p in range(STATE.grid)]
    _GRID[0] = grid
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        _GRID[0] = None
    if grid.error is not None:
        raise grid.error
    results = None
    for program, result in enumerate(grid.results):
        outputs = _outputs(module, result)
        if results is not None and any(a is not b for a, b in zip(outputs, results)):
            raise NkiError(f"program {program} returned other tensors than program 0")
        results = outputs
    return results


def structure():
    """What the last run() or count() did: Counts.as_dict(), or for an SPMD kernel a list
    of them, one per program id (the form of the kernel file's STRUCTURE)."""
    dicts = [c.as_dict() for c in STATE.program_counts]
    return dicts if STATE.grid > 1 else dicts[0]


def run(module, inputs, sbuf_bytes=196608):
    """Runs the module's @nki.jit kernel on {name: numpy array}; returns {name: float64 array}.
    structure() then says what it did."""
    kernel = _kernel(module)
    if getattr(module, "RANKS", 1) > 1:  # ranks joined by collectives
        import nki_ranks  # noqa: E402
        return nki_ranks.run(module, kernel, inputs, sbuf_bytes)
    STATE.reset(sbuf_bytes, grid=_grid(module))
    args = []
    for name, spec in module.INPUTS.items():
        shape, dtype = spec[0], spec[1]
        a = np.asarray(inputs[name])
        if a.shape != tuple(shape):
            raise NkiError(f"input {name}: shape {a.shape} is not {shape}")
        data = a.astype(np.int32) if dtype == "int32" else round_to(dtype, a)
        args.append(Tensor(np.array(data), dtype, HBM, name))
    results = _launch(module, kernel, args)
    return {name: t.data.astype(np.float64) for name, t in zip(module.OUTPUTS, results)}


def count(module, sbuf_bytes=196608):
    """Traces the kernel without computing and returns its counts (structure()): every
    check of run() but none of the arithmetic, on inputs that take no memory, so kernels of
    any size are counted in a fraction of the time run() takes. A kernel whose control
    flow read data would be refused (Python loops here see only integers)."""
    kernel = _kernel(module)
    if getattr(module, "RANKS", 1) > 1:
        import nki_ranks  # noqa: E402
        nki_ranks.run(module, kernel, None, sbuf_bytes)
        return structure()
    STATE.reset(sbuf_bytes, compute=False, grid=_grid(module))
    args = [Tensor(_shape_only(spec[0]), spec[1], HBM, name)
            for name, spec in module.INPUTS.items()]
    _launch(module, kernel, args)
    return structure()
