"""The NKI interpreter's limits: what NKI rejects, it rejects, loudly.

    python3 interp_test.py        (ctest nki.interpreter_limits)

Each case runs a small kernel that breaks one rule of the public NKI
documentation (docs/nki.md) and expects NkiError naming it; one kernel that
keeps the rules must run and match numpy. Exit 0 when all hold; 77 without numpy.
"""

import os
import sys

try:
    import numpy as np
except ImportError:
    print("interp_test: numpy is missing (Debian: python3-numpy); skipped")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nki_interp  # noqa: E402

nki_interp.install()
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402


def hbm(a, dtype="float32"):
    return nki_interp.Tensor(np.array(a, dtype=np.float32), dtype, nki_interp.HBM, "in")


def over_partitions():
    nl.ndarray((129, 4), dtype=nl.float32, buffer=nl.sbuf)


def stationary_too_wide():
    a = nl.ndarray((128, 129), dtype=nl.bfloat16, buffer=nl.sbuf)
    b = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    c = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=c, stationary=a, moving=b, accumulate=False)


def moving_too_wide():
    a = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    b = nl.ndarray((128, 513), dtype=nl.bfloat16, buffer=nl.sbuf)
    c = nl.ndarray((128, 513), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=c, stationary=a, moving=b, accumulate=False)


def psum_overflow():
    nl.ndarray((128, 4097), dtype=nl.float32, buffer=nl.psum)


def gpsimd_reads_psum():
    p = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum)
    s = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=p, engine=nisa.engine.gpsimd)


def matmul_from_hbm():
    a = hbm(np.zeros((128, 128)), "bfloat16")
    b = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    c = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=c, stationary=a, moving=b, accumulate=False)


def python_arithmetic():
    s = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    return s + s


def unknown_op():
    s = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=s, data1=s, data2=s, op="divide", engine=nisa.engine.vector)


def shape_mismatch():
    s = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    t = nl.ndarray((128, 9), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=t, engine=nisa.engine.vector)


def out_of_bounds():
    s = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    return s[0:128, 4:12]


def reduce_partition_axis():
    s = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    d = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=d, op=nl.add, data=s, axis=0)


def dma_into_psum():
    p = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum)
    nisa.dma_copy(dst=p, src=hbm(np.zeros((128, 8))))


def engine_unstated():
    s = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=s)


def tensor_tensor_on_scalar():
    s = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=s, data1=s, data2=s, op=nl.add, engine=nisa.engine.scalar)


def matmul_across_banks():
    a = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    b = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    c = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=c[:, 256:768], stationary=a, moving=b, accumulate=False)


BROKEN = [engine_unstated, tensor_tensor_on_scalar, matmul_across_banks, over_partitions, stationary_too_wide, moving_too_wide, psum_overflow,
          gpsimd_reads_psum, matmul_from_hbm, python_arithmetic, unknown_op, shape_mismatch,
          out_of_bounds, reduce_partition_axis, dma_into_psum]


def good():
    """A 256-deep contraction accumulated in PSUM, cast to bf16 on eviction."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((256, 128)), rng.standard_normal((256, 512))
    A, B = hbm(a, "bfloat16"), hbm(b, "bfloat16")
    a_sb = nl.ndarray((128, 2, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    b_sb = nl.ndarray((128, 2, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    c_ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    c_sb = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=c_ps, value=0.0, engine=nisa.engine.vector)
    for k in nl.affine_range(2):
        nisa.dma_copy(dst=a_sb[:, k, :], src=A[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=b_sb[:, k, :], src=B[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(dst=c_ps, stationary=a_sb[:, k, :], moving=b_sb[:, k, :], accumulate=True)
    nisa.tensor_copy(dst=c_sb, src=c_ps, engine=nisa.engine.vector)
    want = nki_interp.round_to("bfloat16", a).T @ nki_interp.round_to("bfloat16", b)
    err = np.max(np.abs(c_sb.data - want) / (np.abs(want) + 1))
    assert err < 2.0**-7, f"good kernel off by {err}"


GOOD_COUNTS = {"matmul": {(128, 128, 512): 2}, "transpose": {},
               "dma": {"hbm->sbuf": (4, 2 * (128 * 128 + 128 * 512) * 2)}, "psum_banks": 1,
               "engines": {"tensor": 2, "vector": 2, "scalar": 0, "gpsimd": 0}}


def counts():
    """The good kernel's counts, computed and shape-only, are what it did."""
    nki_interp.STATE.reset()
    good()
    assert nki_interp.STATE.counts.as_dict() == GOOD_COUNTS, nki_interp.STATE.counts.as_dict()
    nki_interp.STATE.reset(compute=False)
    a = nl.ndarray((128, 2, 512), dtype=nl.float32, buffer=nl.psum)  # banks 0 and 1 ...
    nisa.memset(dst=a[:, 1, 0:8], value=0.0, engine=nisa.engine.vector)  # ... only 1 written
    b = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.psum)  # starts on bank 2
    nisa.memset(dst=b, value=0.0, engine=nisa.engine.vector)
    assert nki_interp.STATE.counts.psum_banks == {1, 2}, nki_interp.STATE.counts.psum_banks


# (value, e4m3, e5m2): ties to even, subnormals, saturation (as tests/gate/element_type_test.cpp)
FP8_CASES = [(1.0625, 1.0, 1.0), (1.1875, 1.25, 1.25), (1.125, 1.125, 1.0), (1.375, 1.375, 1.5),
             (0.3, 0.3125, 0.3125), (250.0, 256.0, 256.0), (464.0, 448.0, 448.0),
             (480.0, 448.0, 512.0), (1e6, 448.0, 57344.0), (-1000.0, -448.0, -1024.0),
             (2.0**-9, 2.0**-9, 2.0**-9), (2.0**-10, 0.0, 2.0**-10), (3 * 2.0**-10, 2.0**-8,
                                                                        3 * 2.0**-10),
             (2.0**-17, 0.0, 0.0), (3 * 2.0**-17, 0.0, 2.0**-15), (0.0, 0.0, 0.0)]


def fp8_rounding():
    """nl.float8_e4m3 and nl.float8_e5m2 round to nearest even and saturate, exactly."""
    values = np.array([c[0] for c in FP8_CASES])
    for column, dtype in ((1, "float8_e4m3"), (2, "float8_e5m2")):
        got = nki_interp.round_to(dtype, values)
        want = np.array([c[column] for c in FP8_CASES], dtype=np.float32)
        assert np.array_equal(got, want), f"{dtype}: {got} != {want}"
    inf = nki_interp.round_to("float8_e4m3", np.array([np.inf, -np.inf, np.nan]))
    assert inf[0] == np.inf and inf[1] == -np.inf and np.isnan(inf[2])
    # an fp8 tile is one byte per element: in SBUF and in the DMA counts
    # double_row: [rows, 2, free] fp8 tiles, contraction 2 x rows, counted as one matmul
    nki_interp.STATE.reset()
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((256, 128)), rng.standard_normal((256, 512))
    a_sb = nl.ndarray((128, 2, 128), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    b_sb = nl.ndarray((128, 2, 512), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    for j in range(2):
        nisa.dma_copy(dst=a_sb[:, j, :], src=hbm(a[j * 128:(j + 1) * 128], "float8_e4m3"))
        nisa.dma_copy(dst=b_sb[:, j, :], src=hbm(b[j * 128:(j + 1) * 128], "float8_e4m3"))
    c_ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=c_ps, stationary=a_sb, moving=b_sb, accumulate=False,
                   perf_mode=nisa.matmul_perf_mode.double_row)
    want = nki_interp.round_to("float8_e4m3", a).T @ nki_interp.round_to("float8_e4m3", b)
    assert np.allclose(c_ps.data, want, rtol=1e-5, atol=1e-4), "double_row product"
    assert nki_interp.STATE.counts.matmul == {(256, 128, 512): 1}, nki_interp.STATE.counts.matmul
    bf = nl.ndarray((128, 2, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    try:
        nisa.nc_matmul(dst=c_ps[:, 0:128], stationary=bf, moving=bf, accumulate=False,
                       perf_mode=nisa.matmul_perf_mode.double_row)
        raise AssertionError("double_row on bf16 ran")
    except nki_interp.NkiError:
        pass
    nki_interp.STATE.reset()
    a = hbm(np.ones((128, 64)), "float8_e5m2")
    a_sb = nl.ndarray((128, 64), dtype=nl.float8_e5m2, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=a)
    assert nki_interp.STATE.sbuf_used == 64 and \
        nki_interp.STATE.counts.dma == {"hbm->sbuf": [1, 128 * 64]}, nki_interp.STATE.counts.dma


# (value, as nl.float16 stores it): ties to even, subnormals, saturation at 65504
FP16_CASES = [(1.0 + 2.0**-11, 1.0), (1.0 + 3 * 2.0**-11, 1.0 + 2.0**-9), (0.1, 0.0999755859375),
              (65519.0, 65504.0), (65520.0, 65504.0), (1e6, 65504.0), (-1e6, -65504.0),
              (2.0**-24, 2.0**-24), (2.0**-25, 0.0), (3 * 2.0**-25, 2.0**-23), (0.0, 0.0)]


def fp16_rounding():
    """nl.float16 rounds to nearest even and saturates, exactly; two bytes an element, and
    nc_matmul takes it (the product of the rounded inputs, in fp32)."""
    values = np.array([c[0] for c in FP16_CASES])
    got = nki_interp.round_to("float16", values)
    want = np.array([c[1] for c in FP16_CASES], dtype=np.float32)
    assert np.array_equal(got, want), f"float16: {got} != {want}"
    nki_interp.STATE.reset()
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((128, 64)), rng.standard_normal((128, 256))
    a_sb = nl.ndarray((128, 64), dtype=nl.float16, buffer=nl.sbuf)
    b_sb = nl.ndarray((128, 256), dtype=nl.float16, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_sb, src=hbm(a, "float16"))
    nisa.dma_copy(dst=b_sb, src=hbm(b, "float16"))
    c_ps = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=c_ps, stationary=a_sb, moving=b_sb, accumulate=False)
    want = nki_interp.round_to("float16", a).T @ nki_interp.round_to("float16", b)
    assert np.allclose(c_ps.data, want, rtol=1e-5, atol=1e-4), "float16 product"
    assert nki_interp.STATE.counts.dma == {"hbm->sbuf": [2, 2 * 128 * (64 + 256)]}, \
        nki_interp.STATE.counts.dma

def spmd_module(rows_of_program):
    """A kernel file launched over LNC = 2 programs: program p copies rows
    rows_of_program[p] of x to y through SBUF (shared HBM, one SBUF each)."""
    import types
    module = types.ModuleType("spmd_kernel")
    module.LNC = 2
    module.INPUTS = {"x": ((256, 64), "float32")}
    module.OUTPUTS = {"y": ((256, 64), "float32")}
    seen = []

    def copy_kernel(x):
        y = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        p = nl.program_id(0)
        seen.append((p, nl.num_programs()))
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)  # each core's own SBUF
        for lo in rows_of_program[p]:
            nisa.dma_copy(dst=t, src=x[lo:lo + 128, :])
            nisa.dma_copy(dst=y[lo:lo + 128, :], src=t)
        return y

    copy_kernel.nki_kernel = True
    module.copy_kernel = copy_kernel
    return module, seen


def spmd():
    """kernel[2]: both program ids run over the same HBM tensors, counted apart."""
    x = np.arange(256 * 64, dtype=np.float64).reshape(256, 64)
    module, seen = spmd_module(([0], [128]))
    got = nki_interp.run(module, {"x": x})["y"]
    assert np.array_equal(got, x), "the programs' writes combined are the output"
    assert seen == [(0, 2), (1, 2)], seen
    one = {"matmul": {}, "transpose": {}, "dma": {"hbm->sbuf": (1, 128 * 64 * 4),
                                                  "sbuf->hbm": (1, 128 * 64 * 4)},
           "psum_banks": 0, "engines": {"tensor": 0, "vector": 0, "scalar": 0, "gpsimd": 0}}
    assert nki_interp.structure() == [one, one], nki_interp.structure()
    assert nki_interp.count(module) == [one, one]
    module, _ = spmd_module(([0, 128], []))  # program 0 does it all: counted so
    assert np.array_equal(nki_interp.run(module, {"x": x})["y"], x)
    assert nki_interp.structure()[1]["dma"] == {}, nki_interp.structure()
    try:  # a column cut of a tensor is not one run of it: no reshape
        hbm(x)[:, 0:32].reshape((128, 2, 32))
        raise AssertionError("a reshape of a non-contiguous view ran")
    except nki_interp.NkiError:
        pass
    hbm(x)[128:256, :].reshape((64, 2, 64))  # a row cut is
    module, _ = spmd_module(([0], []))  # nobody writes rows 128:256: they stay NaN
    assert np.isnan(nki_interp.run(module, {"x": x})["y"][128:]).all()


def swap_module(barrier_of_program):
    """LNC = 2: program p writes rows p*128:(p+1)*128 of x into a shared HBM scratch z,
    reaches nisa.core_barrier when barrier_of_program[p], then copies the other
    program's rows of z to y (so y is x with its halves swapped)."""
    import types
    module = types.ModuleType("swap_kernel")
    module.LNC = 2
    module.INPUTS = {"x": ((256, 64), "float32")}
    module.OUTPUTS = {"y": ((256, 64), "float32")}

    def swap_kernel(x):
        y = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        z = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        p = nl.program_id(0)
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[p * 128:p * 128 + 128, :])
        nisa.dma_copy(dst=z[p * 128:p * 128 + 128, :], src=t)
        if barrier_of_program[p]:
            nisa.core_barrier(data=z, cores=(0, 1), engine=nisa.engine.gpsimd)
        o = 128 - p * 128
        nisa.dma_copy(dst=t, src=z[o:o + 128, :])
        nisa.dma_copy(dst=y[o:o + 128, :], src=t)
        return y

    swap_kernel.nki_kernel = True
    module.swap_kernel = swap_kernel
    return module


def core_barrier():
    """nisa.core_barrier: a program's reads after it see both programs' writes before it;
    without it program 0 reads program 1's rows unwritten; a barrier one program never
    reaches, or in a kernel of one program, is an NkiError."""
    x = np.arange(256 * 64, dtype=np.float64).reshape(256, 64)
    got = nki_interp.run(swap_module((True, True)), {"x": x})["y"]
    assert np.array_equal(got, x), "each half of z copied back where it came from"
    assert [c["engines"]["gpsimd"] for c in nki_interp.structure()] == [1, 1]
    assert [c["engines"]["gpsimd"] for c in nki_interp.count(swap_module((True, True)))] == [1, 1]
    got = nki_interp.run(swap_module((False, False)), {"x": x})["y"]
    assert np.isnan(got[128:]).all() and np.array_equal(got[:128], x[:128]), \
        "program 0 reads program 1's rows of z before they are written"
    for broken in ((True, False), (False, True)):
        try:
            nki_interp.run(swap_module(broken), {"x": x})
            raise AssertionError(f"a barrier only {broken} reaches ran")
        except nki_interp.NkiError as e:
            assert "core_barrier" in str(e), e
    nki_interp.STATE.reset()
    try:
        nisa.core_barrier(data=hbm(x), cores=(0, 1), engine=nisa.engine.gpsimd)
        raise AssertionError("a core barrier outside an SPMD launch ran")
    except nki_interp.NkiError:
        pass


def main():
    failures = []
    for case in BROKEN:
        nki_interp.STATE.reset()
        try:
            case()
        except nki_interp.NkiError as e:
            print(f"ok   {case.__name__}: {e}")
            continue
        failures.append(case.__name__)
        print(f"FAIL {case.__name__}: ran without an NkiError")
    nki_interp.STATE.reset()
    good()
    print("ok   a kernel within the rules runs and matches numpy")
    counts()
    print("ok   it is counted as it ran: matmul shapes, DMA bytes, PSUM banks, engines")
    fp8_rounding()
    print("ok   fp8 (e4m3, e5m2) rounds to nearest even and saturates, one byte an element")
    fp16_rounding()
    print("ok   fp16 rounds to nearest even and saturates, two bytes an element")

    spmd()
    print("ok   an SPMD kernel (LNC = 2) runs each program id on shared HBM, counted apart")
    core_barrier()
    print("ok   nisa.core_barrier orders both programs' writes before either's reads")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
