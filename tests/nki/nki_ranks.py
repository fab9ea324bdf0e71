"""Ranks joined by collectives, for the NKI interpreter (nki_interp.py).

A kernel file whose module sets RANKS > 1 is one rank's kernel of a plan split
over RANKS NeuronCores (the sharded workloads; docs/nki.md, "Ranks and
collectives"). run() runs RANKS copies of it, each on its own HBM (its shard
of the inputs, from the file's rank_inputs(rank, ...)), its own SBUF and PSUM
and its own counts, in lockstep (nki_interp.Turns, the scheduler of SPMD
programs too): one rank runs at a time, in rank order, until it reaches its
next collective or returns; when every rank has reached the collective it
runs, on numpy, and rank 0 goes on. The ranks must call the
same collectives in the same order (else NkiError).

Semantics of the nki.collectives subset (NKI API: nki.collectives.all_gather,
all_reduce; versions 2.30 to 2.33), for one replica group of every rank and
one tensor per list:
- all_gather(srcs=[s], dsts=[d], replica_group, collective_dim=0): d holds
  every rank's s concatenated along axis 0 in rank order; d's shape is
  (RANKS * s0, ...) or (RANKS, *s.shape) (the same bytes, axis 0 split);
- all_reduce(srcs=[s], dsts=[d], replica_group, op=nl.add): d = the ranks'
  s added in fp32 in rank order, rounded to d's dtype;
- all_to_all(srcs=[s], dsts=[d], replica_group, collective_dim=0): s and d
  of one shape, axis 0 cut into RANKS equal blocks; block q of rank r's d is
  block r of rank q's s.
All take HBM tensors here (the docs also allow SBUF). Each call is counted
in the rank's counts ("collectives": calls and the bytes of the destination),
the terms of the file's STRUCTURE.

A file whose ranks run different kernels (sharded_moe, ep > 1: each rank its
share of the experts) lists them as RANK_KERNELS (rank r runs
RANK_KERNELS[r]); rank_inputs() may then return inputs beyond INPUTS (int32
index tables), passed after INPUTS' in its order, and STRUCTURE is rank
STRUCTURE_RANK's counts (the rank the simulator times).
"""

import threading
import types

import numpy as np

import nki_interp
import nki_language
from nki_interp import HBM, NkiError, Tensor


class ReplicaGroup:
    """nki.collectives.ReplicaGroup: a list of rank lists (the subset: one list of every rank)."""

    def __init__(self, groups):
        self.groups = [list(g) for g in groups]


LOCKSTEP = None  # the run in progress: its nki_interp.Turns, one thread per rank
STATES, CALLS = [], []  # its ranks' interpreter states, and each rank's pending collective


def _hbm(tensors, what):
    if not isinstance(tensors, (list, tuple)) or len(tensors) != 1:
        raise NkiError(f"{what}: one tensor per list (the subset)")
    t = tensors[0]
    if not isinstance(t, Tensor) or t.buffer != HBM:
        raise NkiError(f"{what}: an HBM tensor (the subset), got {getattr(t, 'buffer', t)!r}")
    return t


def _collective(name, check):
    """nki.collectives.<name>: checks the rank's call (check(src, dst, **kwargs)), counts it and
    waits for every rank to reach it."""

    def call(srcs, dsts, replica_group, **kwargs):
        if LOCKSTEP is None:
            raise NkiError(f"{name} outside a multi-rank kernel (RANKS > 1)")
        src, dst = _hbm(srcs, f"{name} srcs"), _hbm(dsts, f"{name} dsts")
        n = LOCKSTEP.n
        if not isinstance(replica_group, ReplicaGroup) or \
                replica_group.groups != [list(range(n))]:
            raise NkiError(f"{name}: the subset's replica group is every rank, "
                           f"ReplicaGroup([{list(range(n))}])")
        check(src, dst, n, **kwargs)
        tally = nki_interp.STATE.counts.collectives.setdefault(name, [0, 0])
        tally[0] += 1
        tally[1] += dst.data.size * nki_interp._DTYPES[dst.dtype]
        nki_interp.STATE.instructions += 1
        rank = nki_interp.STATE.rank
        CALLS[rank] = (src, dst, kwargs)
        LOCKSTEP.sync(rank, name, lambda arrived: _perform(arrived, STATES))

    call.__name__ = name
    return call


def _check_gather(src, dst, n, collective_dim=None):
    if collective_dim != 0:
        raise NkiError("all_gather: collective_dim=0 (the only one NKI takes for HBM tensors)")
    if dst.shape not in ((n * src.shape[0],) + src.shape[1:], (n,) + src.shape):
        raise NkiError(f"all_gather: dst {dst.shape} does not hold {n} x src {src.shape} "
                       "along axis 0")


def _check_reduce(src, dst, n, op=None):
    if not isinstance(op, nki_language._Op) or op.name != "add":
        raise NkiError("all_reduce: op=nl.add (the subset)")
    if dst.shape != src.shape:
        raise NkiError(f"all_reduce: dst {dst.shape} is not src's shape {src.shape}")


def _check_all_to_all(src, dst, n, collective_dim=None):
    if collective_dim != 0:
        raise NkiError("all_to_all: collective_dim=0 (the only one NKI takes for HBM tensors)")
    if dst.shape != src.shape or src.shape[0] % n:
        raise NkiError(f"all_to_all: src {src.shape} and dst {dst.shape} must be one shape, "
                       f"axis 0 a multiple of {n} ranks")


def _perform(arrived, states):
    """Runs a collective every rank reached ((rank, name) in arrival order)."""
    arrived = [(rank, name, CALLS[rank]) for rank, name in sorted(arrived)]
    names = {name for _, name, _ in arrived}
    if len(names) != 1:
        raise NkiError(f"the ranks reach different collectives: {sorted(names)}")
    name = names.pop()
    srcs = [call[0] for _, _, call in arrived]
    if len({s.shape for s in srcs}) != 1:
        raise NkiError(f"{name}: the ranks' srcs differ in shape: {[s.shape for s in srcs]}")
    if not states[0].compute:
        return
    if name == "all_to_all":  # rank r receives block r of every rank, in rank order
        blocks = [np.split(s.read(), len(srcs)) for s in srcs]
        for rank, _, (_, dst, _) in arrived:
            nki_interp.STATE = states[rank]
            dst.write(np.concatenate([b[rank] for b in blocks]).reshape(dst.shape))
        return
    if name == "all_gather":
        values = np.stack([s.read() for s in srcs])
    else:
        values = np.zeros(srcs[0].shape, dtype=np.float32)
        for s in srcs:
            values = values + s.read()
    for rank, _, (_, dst, _) in arrived:
        nki_interp.STATE = states[rank]
        dst.write(values.reshape(dst.shape))


def make_collectives():
    """The nki.collectives module of the interpreter."""
    ncc = types.ModuleType("nki.collectives")
    ncc.ReplicaGroup = ReplicaGroup
    ncc.all_gather = _collective("all_gather", _check_gather)
    ncc.all_reduce = _collective("all_reduce", _check_reduce)
    ncc.all_to_all = _collective("all_to_all", _check_all_to_all)
    return ncc


def _rank_outputs(module, rank, result, n):
    """The rank's returned tensors, checked: SHARDED_OUTPUTS are the rank's part (axis 0 / n)."""
    results = result if isinstance(result, tuple) else (result,)
    sharded = getattr(module, "SHARDED_OUTPUTS", ())
    if len(results) != len(module.OUTPUTS):
        raise NkiError(f"rank {rank} returned {len(results)} tensors, OUTPUTS names "
                       f"{len(module.OUTPUTS)}")
    for (name, (shape, dtype)), t in zip(module.OUTPUTS.items(), results):
        want = (shape[0] // n,) + tuple(shape[1:]) if name in sharded else tuple(shape)
        if not isinstance(t, Tensor) or t.buffer != HBM or t.shape != want or t.dtype != dtype:
            raise NkiError(f"rank {rank}, output {name}: expected an HBM tensor {want} of {dtype}")
    return results


def run(module, kernel, inputs, sbuf_bytes):
    """Runs RANKS ranks of `kernel` (or of RANK_KERNELS, one each), each on
    rank_inputs(rank, **inputs) (inputs None: count only, on inputs that take no memory).
    Returns {name: float64 array}: the sharded outputs concatenated, the others rank 0's
    (every rank must hold the same). nki_interp.structure() then gives rank 0's counts, which
    every rank's must equal (RANK_KERNELS: rank STRUCTURE_RANK's, the others unchecked)."""
    global LOCKSTEP, STATES, CALLS
    n = module.RANKS
    whole = {}
    for name, spec in module.INPUTS.items():
        shape, dtype = spec[0], spec[1]
        if inputs is None:
            whole[name] = nki_interp._shape_only(shape)
            continue
        a = np.asarray(inputs[name])
        if a.shape != tuple(shape):
            raise NkiError(f"input {name}: shape {a.shape} is not {shape}")
        whole[name] = a.astype(np.int32) if dtype == "int32" else nki_interp.round_to(dtype, a)
    states = []
    for rank in range(n):
        state = nki_interp._State()
        state.reset(sbuf_bytes, compute=inputs is not None)
        state.rank = rank
        states.append(state)
    STATES, CALLS = states, [None] * n

    def switch(rank):
        nki_interp.STATE = states[rank]

    lockstep = LOCKSTEP = nki_interp.Turns(n, switch, "rank")

    kernels = getattr(module, "RANK_KERNELS", None)
    if kernels is not None and len(kernels) != n:
        raise NkiError(f"RANK_KERNELS lists {len(kernels)} kernels for {n} ranks")

    def body(rank):
        shards = module.rank_inputs(rank, **whole)
        args = []
        for name in list(module.INPUTS) + [k for k in shards if k not in module.INPUTS]:
            a = np.asarray(shards[name])
            dtype = module.INPUTS[name][1] if name in module.INPUTS else "int32"
            if name not in module.INPUTS and a.dtype != np.int32:
                raise NkiError(f"rank_inputs: {name}, beyond INPUTS, must be an int32 table")
            data = nki_interp._shape_only(a.shape) if inputs is None else np.array(a)
            args.append(Tensor(data, dtype, HBM, name))
        own = kernel if kernels is None else kernels[rank]
        return _rank_outputs(module, rank, own(*args), n)

    threads = [threading.Thread(target=lockstep.run, args=(r, lambda r=r: body(r)))
               for r in range(n)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        LOCKSTEP = None
        nki_interp.STATE = states[getattr(module, "STRUCTURE_RANK", 0) if kernels else 0]
    if lockstep.error is not None:
        raise lockstep.error
    counts = [s.counts.as_dict() for s in states]
    for rank, c in enumerate(counts[1:], 1):
        if c != counts[0] and kernels is None:
            raise NkiError(f"rank {rank} does other work than rank 0 ({c} vs {counts[0]})")
    if inputs is None:
        return None
    sharded = getattr(module, "SHARDED_OUTPUTS", ())
    out = {}
    for i, name in enumerate(module.OUTPUTS):
        parts = [lockstep.results[r][i].data.astype(np.float64) for r in range(n)]
        if name in sharded:
            out[name] = np.concatenate(parts)
            continue
        for rank, p in enumerate(parts[1:], 1):
            if not np.array_equal(p, parts[0], equal_nan=True):
                raise NkiError(f"output {name}: rank {rank} holds other values than rank 0")
        out[name] = parts[0]
    return out
