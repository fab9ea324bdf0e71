"""The NKI interpreter's ranks and collectives (nki_ranks.py): semantics, counts, and the
errors of ranks that do not meet.

    python3 ranks_test.py        (ctest nki.ranks)

Exit 0 when all hold; 77 without numpy.
"""

import os
import sys
import types

try:
    import numpy as np
except ImportError:
    print("ranks_test: numpy is missing (Debian: python3-numpy); skipped")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nki_interp  # noqa: E402

nki_interp.install()
import nki.collectives as ncc  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

RANKS = 4
ROWS, COLS = 64, 32  # a rank's shard of x: rows rank * ROWS ...


def module_of(kernel, outputs, sharded=()):
    """A kernel file of RANKS ranks, each given rows rank * ROWS ... of x [RANKS * ROWS, COLS]."""
    module = types.ModuleType("ranks_kernel")
    module.RANKS = RANKS
    module.INPUTS = {"x": ((RANKS * ROWS, COLS), "float32")}
    module.OUTPUTS = outputs
    module.SHARDED_OUTPUTS = sharded
    module.rank_inputs = lambda rank, x: {"x": x[rank * ROWS:(rank + 1) * ROWS, :]}
    kernel.nki_kernel = True
    module.kernel = kernel
    return module


def to_private(x, scale=None):
    """x through SBUF into a private HBM tensor (times `scale` when given)."""
    t = nl.ndarray((ROWS, COLS), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if scale is not None:
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=scale,
                           engine=nisa.engine.vector)
    mine = nl.ndarray((ROWS, COLS), dtype=nl.float32, buffer=nl.private_hbm)
    nisa.dma_copy(dst=mine, src=t)
    return mine


def group():
    return ncc.ReplicaGroup([list(range(RANKS))])


def gather():
    """all_gather: every rank holds the ranks' shards in rank order; chunked views too."""
    def kernel(x):
        y = nl.ndarray((RANKS * ROWS, COLS), dtype=nl.float32, buffer=nl.shared_hbm)
        mine = to_private(x)
        ncc.all_gather(srcs=[mine], dsts=[y], replica_group=group(), collective_dim=0)
        return y

    x = np.arange(RANKS * ROWS * COLS, dtype=np.float64).reshape(RANKS * ROWS, COLS)
    module = module_of(kernel, {"y": ((RANKS * ROWS, COLS), "float32")})
    assert np.array_equal(nki_interp.run(module, {"x": x})["y"], x)
    want = {"all_gather": (1, RANKS * ROWS * COLS * 4)}
    assert nki_interp.structure()["collectives"] == want, nki_interp.structure()
    assert nki_interp.count(module)["collectives"] == want

    def chunked(x):  # two chunks of columns, each gathered into a [RANKS, ROWS, half] view
        y = nl.ndarray((RANKS * ROWS, COLS), dtype=nl.float32, buffer=nl.shared_hbm)
        mine = to_private(x)
        for c in range(2):
            half = COLS // 2
            ncc.all_gather(srcs=[mine[:, c * half:(c + 1) * half]],
                           dsts=[y.reshape((RANKS, ROWS, COLS))[:, :, c * half:(c + 1) * half]],
                           replica_group=group(), collective_dim=0)
        return y

    module = module_of(chunked, {"y": ((RANKS * ROWS, COLS), "float32")})
    assert np.array_equal(nki_interp.run(module, {"x": x})["y"], x)
    assert nki_interp.structure()["collectives"] == {"all_gather": (2, RANKS * ROWS * COLS * 4)}


def reduce():
    """all_reduce: the ranks' sources added in fp32, rounded to the destination (bf16)."""
    def kernel(x):
        y = nl.ndarray((ROWS, COLS), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        mine = to_private(x)
        ncc.all_reduce(srcs=[mine], dsts=[y], replica_group=group(), op=nl.add)
        return y

    rng = np.random.default_rng(3)
    x = rng.standard_normal((RANKS * ROWS, COLS))
    module = module_of(kernel, {"y": ((ROWS, COLS), "bfloat16")})
    got = nki_interp.run(module, {"x": x})["y"]
    parts = x.astype(np.float32).reshape(RANKS, ROWS, COLS)
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    assert np.array_equal(got, nki_interp.round_to("bfloat16", total)), "fp32 sum, then bf16"
    assert nki_interp.structure()["collectives"] == {"all_reduce": (1, ROWS * COLS * 2)}


def sharded_output():
    """SHARDED_OUTPUTS: each rank returns its part; the parts are concatenated in rank order."""
    def kernel(x):
        y = nl.ndarray((ROWS, COLS), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((ROWS, COLS), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=y, src=t)
        return y

    x = np.arange(RANKS * ROWS * COLS, dtype=np.float64).reshape(RANKS * ROWS, COLS)
    module = module_of(kernel, {"y": ((RANKS * ROWS, COLS), "float32")}, ("y",))
    assert np.array_equal(nki_interp.run(module, {"x": x})["y"], x)
    assert "collectives" not in nki_interp.structure()


def all_to_all():
    """all_to_all: block q of rank r's destination is block r of rank q's source; the ranks
    may run different kernels (RANK_KERNELS), STRUCTURE_RANK's counts are structure()'s."""
    block = ROWS // RANKS

    def exchange(x, extra_copies):
        y = nl.ndarray((ROWS, COLS), dtype=nl.float32, buffer=nl.shared_hbm)
        mine = to_private(x)
        for _ in range(extra_copies):  # work that differs by rank
            to_private(x)
        ncc.all_to_all(srcs=[mine], dsts=[y], replica_group=group(), collective_dim=0)
        return y

    kernels = [lambda x, r=r: exchange(x, r) for r in range(RANKS)]
    for k in kernels:
        k.nki_kernel = True
    module = module_of(kernels[0], {"y": ((RANKS * ROWS, COLS), "float32")}, ("y",))
    module.RANK_KERNELS, module.STRUCTURE_RANK = kernels, 2
    x = np.arange(RANKS * ROWS * COLS, dtype=np.float64).reshape(RANKS * ROWS, COLS)
    got = nki_interp.run(module, {"x": x})["y"]
    for r in range(RANKS):
        for q in range(RANKS):
            src = x[q * ROWS + r * block:q * ROWS + (r + 1) * block]
            assert np.array_equal(got[r * ROWS + q * block:r * ROWS + (q + 1) * block], src)
    counts = nki_interp.structure()
    assert counts["collectives"] == {"all_to_all": (1, ROWS * COLS * 4)}, counts
    assert counts["dma"]["hbm->sbuf"][0] == 1 + 2, "rank 2's counts: its own two extra copies"
    assert nki_interp.count(module)["collectives"] == {"all_to_all": (1, ROWS * COLS * 4)}

    def uneven(x):  # a block per rank must divide axis 0
        y = nl.ndarray((RANKS * ROWS, COLS), dtype=nl.float32, buffer=nl.shared_hbm)
        ncc.all_to_all(srcs=[to_private(x)[0:ROWS - 1, :]], dsts=[y[0:ROWS - 1, :]],
                       replica_group=group(), collective_dim=0)
        return y

    expect_error(uneven, "multiple of")


def expect_error(kernel, words):
    module = module_of(kernel, {"y": ((RANKS * ROWS, COLS), "float32")})
    x = np.zeros((RANKS * ROWS, COLS))
    try:
        nki_interp.run(module, {"x": x})
    except nki_interp.NkiError as e:
        assert words in str(e), f"{e!r} does not say {words!r}"
        return
    raise AssertionError(f"ran without an NkiError ({words})")


def ranks_that_do_not_meet():
    """Ranks calling different collectives, or one returning while others wait, are errors;
    so are a different replica group and a destination that cannot hold the gather."""
    started = []

    def differ(x):  # rank 0 gathers, the others reduce
        started.append(len(started))
        y = nl.ndarray((RANKS * ROWS, COLS), dtype=nl.float32, buffer=nl.shared_hbm)
        mine = to_private(x)
        if started[-1] == 0:
            ncc.all_gather(srcs=[mine], dsts=[y], replica_group=group(), collective_dim=0)
        else:
            ncc.all_reduce(srcs=[mine], dsts=[y[0:ROWS, :]], replica_group=group(), op=nl.add)
        return y

    expect_error(differ, "different collectives")
    started.clear()

    def returns_early(x):  # rank 0 skips the gather
        started.append(len(started))
        y = nl.ndarray((RANKS * ROWS, COLS), dtype=nl.float32, buffer=nl.shared_hbm)
        if started[-1] > 0:
            ncc.all_gather(srcs=[to_private(x)], dsts=[y], replica_group=group(),
                           collective_dim=0)
        return y

    expect_error(returns_early, "after rank 0 returned")

    def two_groups(x):
        y = nl.ndarray((RANKS * ROWS, COLS), dtype=nl.float32, buffer=nl.shared_hbm)
        ncc.all_gather(srcs=[to_private(x)], dsts=[y], replica_group=ncc.ReplicaGroup(
            [[0, 1], [2, 3]]), collective_dim=0)
        return y

    expect_error(two_groups, "replica group")

    def too_small(x):
        y = nl.ndarray((RANKS * ROWS, COLS), dtype=nl.float32, buffer=nl.shared_hbm)
        ncc.all_gather(srcs=[to_private(x)], dsts=[y[0:ROWS, :]], replica_group=group(),
                       collective_dim=0)
        return y

    expect_error(too_small, "does not hold")


def main():
    gather()
    print("ok   all_gather: the ranks' shards in rank order, whole or chunked, counted")
    reduce()
    print("ok   all_reduce: added in fp32 in rank order, rounded to the destination")
    sharded_output()
    print("ok   a sharded output is the ranks' parts concatenated")
    all_to_all()
    print("ok   all_to_all: blocks exchanged by rank, different kernels per rank, counted")
    ranks_that_do_not_meet()
    print("ok   ranks whose collectives differ, or that return while others wait, are errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
