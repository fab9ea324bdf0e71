"""nki.isa for the NKI interpreter (nki_interp.py): the instructions an emitted kernel
calls, each checked against the limits the NKI documentation states (docs/nki.md) and
counted on its engine. core_barrier, which needs the SPMD grid, stays in nki_interp.py.
"""

import numpy as np

import nki_interp
from nki_interp import (HBM, MOVING_FMAX, PMAX, PSUM, SBUF, STATIONARY_FMAX,
                        _DTYPES, _ENGINE, _FP8, _PERF_MODE, _REDUCE_CMD, NkiError,
                        _check_dtype, _engine_can_touch, _engine_of, _Indirect, _issue,
                        _same_shape, _tile)
from nki_language import _Index, _ndarray, _Op


def _op(op, allowed, what):
    if not isinstance(op, _Op) or op.name not in allowed:
        raise NkiError(f"{what}: op {op!r} is outside the subset ({', '.join(allowed)})")
    return op.fn


def _operand(x, data, what):
    """A compile-time scalar or a [partitions, 1] vector broadcast along the free dims."""
    if isinstance(x, (int, float, np.floating)):
        return lambda: np.float32(x)
    t = _tile(x, what)
    if t.shape != (data.shape[0], 1):
        raise NkiError(f"{what}: a vector operand must be [{data.shape[0]}, 1], got {t.shape}")
    return lambda: t.read().reshape((data.shape[0],) + (1,) * (len(data.shape) - 1))


_DIRECTIONS = {(HBM, SBUF): "hbm->sbuf", (SBUF, HBM): "sbuf->hbm", (SBUF, SBUF): "sbuf->sbuf",
               (HBM, HBM): "hbm->hbm"}


def _indirect_copy(dst, src):
    """dma_copy through an index tile: a gather into SBUF or a scatter out of it."""
    tile = src if isinstance(dst, _Indirect) else dst
    _tile(tile, "dma_copy tile", (SBUF,))
    _same_shape(dst, src, "dma_copy")
    state = nki_interp.STATE
    state.instructions += 1
    indirect = dst if isinstance(dst, _Indirect) else src
    tally = state.counts.dma.setdefault("sbuf->hbm" if indirect is dst else "hbm->sbuf", [0, 0])
    tally[0] += 1
    tally[1] += tile.data.size * _DTYPES[indirect.dtype]
    if not state.compute:
        return
    if indirect is dst:
        dst.scatter(src.read())
    else:
        dst.write(src.gather())


def dma_copy(dst, src, **kwargs):
    if kwargs:
        raise NkiError(f"dma_copy: arguments {sorted(kwargs)} are outside the subset")
    if isinstance(dst, _Indirect) or isinstance(src, _Indirect):
        return _indirect_copy(dst, src)
    _tile(dst, "dma_copy dst", (SBUF, HBM))
    _tile(src, "dma_copy src", (SBUF, HBM))
    _same_shape(dst, src, "dma_copy")
    nki_interp.STATE.instructions += 1
    # bytes as the HBM side stores them (the source's when both are on chip)
    side = dst if dst.buffer == HBM and src.buffer != HBM else src
    tally = nki_interp.STATE.counts.dma.setdefault(_DIRECTIONS[(src.buffer, dst.buffer)], [0, 0])
    tally[0] += 1
    tally[1] += src.data.size * _DTYPES[side.dtype]
    if nki_interp.STATE.compute:
        dst.write(src.data if src.dtype == "int32" and dst.dtype == "int32" else src.read()
                  if dst.dtype != "int32" else src.data)


def _double_row(stationary, moving):
    """perf_mode=double_row (fp8 on NeuronCore-v3): [rows, 2, free] tiles whose two rows
    per partition pair up, contraction 2 x rows (element [p, j] is contraction row
    j * rows + p). The public docs say the mode packs two fp8 element pairs per PE row;
    this layout is tessel's reading of it (docs/nki.md), not checked by neuronx-cc."""
    for t, w in ((stationary, "stationary"), (moving, "moving")):
        if len(t.shape) != 3 or t.shape[1] != 2:
            raise NkiError(f"nc_matmul double_row: {w} must be a [rows, 2, free] tile, got "
                           f"{t.shape}")
        if t.dtype not in _FP8:
            raise NkiError(f"nc_matmul double_row: {w} is {t.dtype}; the mode is for fp8")
    return 2 * stationary.shape[0], stationary.shape[2], moving.shape[2]


def _operand_rows(t):
    """A matmul operand as [contraction, free] float32 (double_row: the pairs stacked)."""
    x = t.read()
    return x if x.ndim == 2 else np.concatenate([x[:, 0, :], x[:, 1, :]], axis=0)


def nc_matmul(dst, stationary, moving, accumulate=None, perf_mode=None, **kwargs):
    if kwargs:
        raise NkiError(f"nc_matmul: arguments {sorted(kwargs)} are outside the subset")
    if accumulate not in (True, False):
        raise NkiError("nc_matmul: pass accumulate=True or False explicitly")
    if perf_mode not in (None, _PERF_MODE.none, _PERF_MODE.double_row):
        raise NkiError(f"nc_matmul: perf_mode {perf_mode!r} is outside the subset")
    _tile(dst, "nc_matmul dst", (PSUM,))
    _tile(stationary, "nc_matmul stationary", (SBUF,))
    _tile(moving, "nc_matmul moving", (SBUF,))
    if perf_mode == _PERF_MODE.double_row:
        k, m, n = _double_row(stationary, moving)
        k2 = 2 * moving.shape[0]
    elif len(stationary.shape) != 2 or len(moving.shape) != 2:
        raise NkiError("nc_matmul: stationary and moving must be 2-D tiles")
    else:
        k, m = stationary.shape
        k2, n = moving.shape
    if k != k2:
        raise NkiError(f"nc_matmul: contraction (partition) sizes {k} and {k2} differ")
    if m > STATIONARY_FMAX:
        raise NkiError(f"nc_matmul: stationary free size {m} > {STATIONARY_FMAX}")
    if n > MOVING_FMAX:
        raise NkiError(f"nc_matmul: moving free size {n} > {MOVING_FMAX}")
    if dst.shape != (m, n):
        raise NkiError(f"nc_matmul: dst {dst.shape} is not [{m}, {n}]")
    if stationary.dtype != moving.dtype:
        raise NkiError("nc_matmul: stationary and moving dtypes differ")
    if len(dst.banks()) != 1:
        raise NkiError("nc_matmul: dst must lie in one PSUM bank (2 KiB per partition)")
    _issue("tensor", "nc_matmul")
    nki_interp.STATE.counts.matmul[(k, m, n)] += 1
    if not nki_interp.STATE.compute:
        return dst.write(None)
    product = _operand_rows(stationary).T @ _operand_rows(moving)  # fp32, as PSUM accumulates
    if accumulate:
        dst.write(dst.read() + product)
    else:
        dst.write(product)


def nc_transpose(dst, data, engine=None):
    _tile(dst, "nc_transpose dst", (PSUM,))
    _tile(data, "nc_transpose data", (SBUF,))
    if len(data.shape) != 2 or data.shape[0] > PMAX or data.shape[1] > PMAX:
        raise NkiError(f"nc_transpose: a 2-D tile of at most {PMAX} x {PMAX}, got {data.shape}")
    if engine not in (None, _ENGINE.tensor):
        raise NkiError("nc_transpose: the subset transposes on the Tensor Engine")
    if dst.shape != data.shape[::-1]:
        raise NkiError(f"nc_transpose: dst {dst.shape} is not {data.shape[::-1]}")
    _issue("tensor", "nc_transpose")
    nki_interp.STATE.counts.transpose[data.shape] += 1
    dst.write(data.read().T if nki_interp.STATE.compute else None)


def memset(dst, value, engine=None):
    _tile(dst, "memset dst")
    e = _engine_of(engine, ("vector", "gpsimd"), "memset")
    _engine_can_touch(e, dst, what="memset")
    _issue(e, "memset")
    dst.write(np.full(dst.shape, value, dtype=np.float32) if nki_interp.STATE.compute else None)


def tensor_copy(dst, src, engine=None):
    _tile(dst, "tensor_copy dst")
    _tile(src, "tensor_copy src")
    e = _engine_of(engine, ("vector", "scalar", "gpsimd"), "tensor_copy")
    _engine_can_touch(e, dst, src, what="tensor_copy")
    _same_shape(dst, src, "tensor_copy")
    _issue(e, "tensor_copy")
    dst.write(src.read() if nki_interp.STATE.compute else None)


def tensor_tensor(dst, data1, data2, op, engine=None):
    for t, w in ((dst, "dst"), (data1, "data1"), (data2, "data2")):
        _tile(t, f"tensor_tensor {w}")
    e = _engine_of(engine, ("vector", "gpsimd"), "tensor_tensor")
    _engine_can_touch(e, dst, data1, data2, what="tensor_tensor")
    _same_shape(data1, data2, "tensor_tensor")
    _same_shape(dst, data1, "tensor_tensor")
    fn = _op(op, ("add", "subtract", "multiply", "maximum", "minimum"), "tensor_tensor")
    _issue(e, "tensor_tensor")
    dst.write(fn(data1.read(), data2.read()) if nki_interp.STATE.compute else None)


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None,
                  reverse1=False, engine=None):
    _tile(dst, "tensor_scalar dst")
    _tile(data, "tensor_scalar data")
    e = _engine_of(engine, ("vector", "scalar", "gpsimd"), "tensor_scalar")
    _engine_can_touch(e, dst, data, what="tensor_scalar")
    _same_shape(dst, data, "tensor_scalar")
    allowed = ("add", "subtract", "multiply", "maximum", "equal", "greater")
    f0 = _op(op0, allowed, "tensor_scalar op0")
    a = _operand(operand0, data, "tensor_scalar operand0")
    f1 = b = None
    if op1 is not None:
        f1 = _op(op1, allowed, "tensor_scalar op1")
        b = _operand(operand1, data, "tensor_scalar operand1")
    elif operand1 is not None:
        raise NkiError("tensor_scalar: operand1 without op1")
    _issue(e, "tensor_scalar")
    if not nki_interp.STATE.compute:
        return dst.write(None)
    x = data.read()
    x = f0(a(), x) if reverse0 else f0(x, a())
    if f1 is not None:
        x = f1(b(), x) if reverse1 else f1(x, b())
    dst.write(np.asarray(x, dtype=np.float32))


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False,
                         reverse1=False):
    _tile(dst, "scalar_tensor_tensor dst")
    _tile(data, "scalar_tensor_tensor data")
    _tile(operand1, "scalar_tensor_tensor operand1")
    _same_shape(dst, data, "scalar_tensor_tensor")
    _same_shape(data, operand1, "scalar_tensor_tensor")
    allowed = ("add", "subtract", "multiply", "maximum")
    f0 = _op(op0, allowed, "scalar_tensor_tensor op0")
    f1 = _op(op1, allowed, "scalar_tensor_tensor op1")
    a = _operand(operand0, data, "scalar_tensor_tensor operand0")
    _issue("vector", "scalar_tensor_tensor")
    if not nki_interp.STATE.compute:
        return dst.write(None)
    x = f0(a(), data.read()) if reverse0 else f0(data.read(), a())
    x = f1(operand1.read(), x) if reverse1 else f1(x, operand1.read())
    dst.write(np.asarray(x, dtype=np.float32))


def _axes(axis, rank, what):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if not axes or 0 in axes or sorted(axes) != list(range(rank - len(axes), rank)):
        raise NkiError(f"{what}: axis {axis} must be the trailing free axes of a rank-{rank} tile")
    return axes


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False):
    _tile(dst, "tensor_reduce dst")
    _tile(data, "tensor_reduce data")
    fn = _op(op, ("add", "max"), "tensor_reduce")
    axes = _axes(axis, len(data.shape), "tensor_reduce")
    reduced = tuple(1 if i in axes else n for i, n in enumerate(data.shape) if keepdims or
                    i not in axes)
    if dst.shape != reduced:
        raise NkiError(f"tensor_reduce: dst {dst.shape} is not the reduced shape {reduced}")
    _issue("vector", "tensor_reduce")
    if not nki_interp.STATE.compute:
        return dst.write(None)
    x = data.read()
    r = np.sum(x, axis=axes, keepdims=keepdims, dtype=np.float32) if fn is np.add \
        else np.max(x, axis=axes, keepdims=keepdims)
    dst.write(-r if negate else r)


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=_REDUCE_CMD.idle):
    _tile(dst, "activation dst")
    _tile(data, "activation data")
    _same_shape(dst, data, "activation")
    fn = _op(op, ("exp", "log", "square", "silu", "rsqrt", "copy"), "activation")
    s = _operand(scale, data, "activation scale")
    b = _operand(bias, data, "activation bias") if bias is not None else None
    if reduce_res is None:
        if reduce_op is not None or reduce_cmd != _REDUCE_CMD.idle:
            raise NkiError("activation: reduce_op/reduce_cmd without reduce_res")
    else:
        _op(reduce_op, ("add",), "activation reduce_op")
        if reduce_cmd != _REDUCE_CMD.reset_reduce:
            raise NkiError(
                "activation: the subset reduces with reduce_cmd=nisa.reduce_cmd.reset_reduce")
        _tile(reduce_res, "activation reduce_res")
        if reduce_res.shape != (data.shape[0], 1):
            raise NkiError(f"activation: reduce_res must be [{data.shape[0]}, 1]")
    _issue("scalar", "activation")
    if not nki_interp.STATE.compute:
        dst.write(None)
        return reduce_res.write(None) if reduce_res is not None else None
    x = data.read() * s()
    if b is not None:
        x = x + b()
    with np.errstate(over="ignore", under="ignore"):
        y = np.asarray(fn(np.asarray(x, dtype=np.float32)), dtype=np.float32)
    dst.write(y)
    if reduce_res is not None:
        reduce_res.write(np.sum(y.reshape(y.shape[0], -1), axis=1, keepdims=True,
                                dtype=np.float32))


def reciprocal(dst, data):
    _tile(dst, "reciprocal dst")
    _tile(data, "reciprocal data")
    _same_shape(dst, data, "reciprocal")
    _issue("vector", "reciprocal")
    if not nki_interp.STATE.compute:
        return dst.write(None)
    with np.errstate(divide="ignore"):
        dst.write(np.float32(1) / data.read())


def iota(expr, dtype):
    """The legacy form (SDK 2.26): a constant tile in SBUF from an arange() expression."""
    if not isinstance(expr, _Index) or expr.values.ndim != 2:
        raise NkiError("iota: a 2-D affine expression of nl.arange() indices is required")
    if expr.values.shape[0] > PMAX:
        raise NkiError(f"iota: partition dimension {expr.values.shape[0]} > {PMAX}")
    out = _ndarray(expr.values.shape, _check_dtype(dtype), SBUF, "iota")
    _issue("gpsimd", "iota")
    out.write(expr.values.astype(np.float32) if dtype != "int32" else expr.values)
    return out


INSTRUCTIONS = (dma_copy, nc_matmul, nc_transpose, memset, tensor_copy, tensor_tensor,
                tensor_scalar, scalar_tensor_tensor, tensor_reduce, activation, reciprocal, iota)
