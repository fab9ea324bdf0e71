"""nki.language for the NKI interpreter (nki_interp.py): tile allocation (nl.ndarray and
its buffers), nl.arange index expressions, the element-wise ops the instructions take, and
the SPMD grid's program ids.
"""

import types

import numpy as np

import nki_interp
from nki_interp import (HBM, MOVING_FMAX, PMAX, PSUM, PSUM_BANK_BYTES, PSUM_BYTES, PSUM_FMAX,
                        SBUF, STATIONARY_FMAX, _DTYPES, NkiError, Tensor, _check_dtype,
                        _shape_only)


class _Op:
    def __init__(self, name, fn):
        self.name, self.fn = name, fn

    def __repr__(self):
        return f"nl.{self.name}"


def _silu(x):
    return x / (np.float32(1) + np.exp(-x))


_OPS = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply,
    "maximum": np.maximum, "minimum": np.minimum, "max": np.maximum,
    "equal": lambda a, b: (a == b).astype(np.float32),
    "greater": lambda a, b: (a > b).astype(np.float32),
    "exp": np.exp, "log": np.log, "square": np.square, "silu": _silu,
    "rsqrt": lambda x: np.float32(1) / np.sqrt(x), "copy": lambda x: x,
}


class _Index:
    """nl.arange(n) and affine expressions of it, for nisa.iota."""

    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.int64)

    def __getitem__(self, key):
        return _Index(self.values[key])

    def _bin(self, other, fn):
        o = other.values if isinstance(other, _Index) else other
        if not isinstance(o, (int, np.ndarray)):
            raise NkiError("iota expressions combine arange() indices and integers only")
        return _Index(fn(self.values, o))

    def __add__(self, o): return self._bin(o, np.add)
    def __radd__(self, o): return self._bin(o, np.add)
    def __sub__(self, o): return self._bin(o, np.subtract)
    def __rsub__(self, o): return self._bin(o, lambda a, b: b - a)
    def __mul__(self, o): return self._bin(o, np.multiply)
    def __rmul__(self, o): return self._bin(o, np.multiply)


def _ndarray(shape, dtype, buffer=None, name=""):
    state = nki_interp.STATE
    _check_dtype(dtype)
    shape = tuple(shape)
    if not shape or any(not isinstance(n, (int, np.integer)) or n <= 0 for n in shape):
        raise NkiError(f"ndarray: bad shape {shape}")
    if buffer not in (SBUF, PSUM, HBM):
        raise NkiError(f"ndarray: buffer must be nl.sbuf, nl.psum or nl.shared_hbm, got {buffer!r}")
    np_type = np.int32 if dtype == "int32" else np.float32
    if buffer == HBM and state.hbm_allocated < len(state.shared_hbm):  # another program's
        t = state.shared_hbm[state.hbm_allocated]
        state.hbm_allocated += 1
        if t.shape != shape or t.dtype != dtype:
            raise NkiError(f"ndarray: program {state.program} allocates shared HBM {shape} "
                           f"{dtype} where program 0 allocated {t.shape} {t.dtype}")
        return t
    if state.compute:
        data = np.full(shape, 0 if dtype == "int32" else np.nan, dtype=np_type)  # unwritten = NaN
    elif buffer == HBM:
        data = _shape_only(shape)
    else:
        data = np.empty(shape, dtype=np_type)  # for the views' offsets; never written
    base = 0
    if buffer in (SBUF, PSUM):
        if shape[0] > PMAX:
            raise NkiError(f"ndarray {name}: partition dimension {shape[0]} > {PMAX}")
        per_partition = int(np.prod(shape[1:], dtype=np.int64)) * _DTYPES[dtype]
        if buffer == PSUM:
            if dtype != "float32":
                raise NkiError("PSUM tiles in the subset are float32")
            # each PSUM tensor starts on a bank boundary
            base = -(-state.psum_used // PSUM_BANK_BYTES) * PSUM_BANK_BYTES
            state.psum_used = base + per_partition
            if state.psum_used > PSUM_BYTES:
                raise NkiError(f"PSUM overflow: {state.psum_used} B per partition > {PSUM_BYTES}"
                               " (each tensor starts on a 2 KiB bank)")
        else:
            state.sbuf_used += per_partition
            if state.sbuf_used > state.sbuf_capacity:
                raise NkiError(
                    f"SBUF overflow: {state.sbuf_used} B per partition > {state.sbuf_capacity}")
    t = Tensor(data, dtype, buffer, name, base=base)
    if buffer == HBM:
        state.shared_hbm.append(t)
        state.hbm_allocated += 1
    return t


def _program_id(axis=0):
    if axis != 0:
        raise NkiError(f"program_id({axis}): the subset launches a one-axis grid")
    return nki_interp.STATE.program


def _num_programs(axis=0):
    if axis != 0:
        raise NkiError(f"num_programs({axis}): the subset launches a one-axis grid")
    return nki_interp.STATE.grid


def _range(*args):
    if not all(isinstance(a, (int, np.integer)) for a in args):
        raise NkiError("loop bounds must be Python integers (the kernel is traced)")
    return range(*args)


def make():
    nl = types.ModuleType("nki.language")
    for name in _DTYPES:
        setattr(nl, name, name)
    nl.sbuf, nl.psum, nl.shared_hbm, nl.hbm, nl.private_hbm = SBUF, PSUM, HBM, HBM, HBM
    nl.ndarray = _ndarray
    nl.affine_range = nl.sequential_range = nl.static_range = _range
    nl.arange = lambda n: _Index(np.arange(n))
    nl.program_id, nl.num_programs = _program_id, _num_programs
    nl.tile_size = types.SimpleNamespace(pmax=PMAX, psum_fmax=PSUM_FMAX,
                                         gemm_stationary_fmax=STATIONARY_FMAX,
                                         gemm_moving_fmax=MOVING_FMAX)
    for name, fn in _OPS.items():
        setattr(nl, name, _Op(name, fn))
    return nl
