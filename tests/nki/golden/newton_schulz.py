# newton_schulz.py: an NKI kernel emitted by tessel 0.1.0 (tessel emit).
# space     sim_newton_schulz (examples/sim_newton_schulz.tsl)
# config    {"evict":"vector","mm_n":512,"psum_bufs":2,"transpose":"tensor"}
# target    trn2
# computes  X = G / ||G||_F, then ITERATIONS steps of X <- a X + (b A + c A^2) X, A = X X^T
#
# The schedule is the simulator's plan of this config (docs/nki.md). It has been
# checked on tessel's NKI interpreter (tests/nki/), never compiled by neuronx-cc or
# run on a NeuronCore.

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

# --- the plan ---------------------------------------------------------------
ROWS = 192                    # rows of G and X
COLS = 640                    # columns of G and X
ITERATIONS = 5                # Newton-Schulz steps
P = 128                       # partitions (nl.tile_size.pmax)
MM_N = 512                    # mm_n: moving free size of a matmul
ROW_TILES = 2
COL_TILES = 5                 # 128-row slabs of X^T (the contraction of X X^T)
ROW_GROUPS = 1                # MM_N-wide column groups of A' and B
COL_GROUPS = 2                # MM_N-wide column groups of X
PER_BANK = 4                  # transposes drained together (one PSUM bank)
PSUM_BUFS = 2                 # psum_bufs: PSUM banks in rotation
COEF_A = 3.4445               # Muon's quintic: X <- a X + (b A + c A^2) X
COEF_B = -4.775
COEF_S = 0.08909843480167756  # c / b^2: B = S A'A' + A'
EPS = 1e-14                   # X0 = G / sqrt(||G||^2 + EPS)
EVICT = nisa.engine.vector    # drains A' and the transposes (evict)
DT = nl.bfloat16              # dtype of G, X, A' and B

INPUTS = {"G": ((ROWS, COLS), "bfloat16")}
OUTPUTS = {"X": ((ROWS, COLS), "bfloat16")}
TOLERANCE = 0.0625  # the gate's, in units of |reference| + rms(reference)

# What the simulator timed: its lowering of this plan, counted (docs/nki.md, "Structure").
# The NKI interpreter counts the kernel the same way; the tests require equal counts.
STRUCTURE = {
    # instructions by (contraction, stationary free, moving free)
    "matmul": {(64, 64, 128): 5, (64, 64, 192): 5, (64, 64, 512): 5, (64, 128, 1): 1, (64, 128, 128): 5, (64, 128, 192): 5, (64, 128, 512): 5, (128, 64, 128): 5, (128, 64, 192): 30, (128, 64, 512): 5, (128, 128, 1): 1, (128, 128, 128): 5, (128, 128, 192): 30, (128, 128, 512): 5},
    # TensorE transposes by the input's (partitions, free)
    "transpose": {(64, 128): 25, (128, 128): 25},
    # (transfers, bytes) per direction
    "dma": {"hbm->sbuf": (2, 245760), "sbuf->hbm": (2, 245760)},
    "psum_banks": 2,  # PSUM banks written
    "engines": {"tensor": 162, "vector": 68, "scalar": 3, "gpsimd": 0},  # instructions
}

@nki.jit
def newton_schulz_kernel(G):
    X = nl.ndarray((ROWS, COLS), dtype=DT, buffer=nl.shared_hbm)
    x_sb = nl.ndarray((P, 2, ROW_TILES, COLS), dtype=DT, buffer=nl.sbuf)  # two slots
    xt_sb = nl.ndarray((P, COL_TILES, ROWS), dtype=DT, buffer=nl.sbuf)
    a_sb = nl.ndarray((P, ROW_TILES, ROWS), dtype=DT, buffer=nl.sbuf)  # A' = b X X^T
    b_sb = nl.ndarray((P, ROW_TILES, ROWS), dtype=DT, buffer=nl.sbuf)  # B = S A'A' + A'
    ones = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)
    sums = nl.ndarray((P, ROW_TILES), dtype=nl.float32, buffer=nl.sbuf)
    sq = nl.ndarray((P, COLS), dtype=nl.float32, buffer=nl.sbuf)
    inv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    ps = nl.ndarray((P, PSUM_BUFS, nl.tile_size.psum_fmax), dtype=nl.float32, buffer=nl.psum)
    banks = [0]

    def next_bank():
        banks[0] += 1
        return (banks[0] - 1) % PSUM_BUFS

    def transpose(s):
        """X^T from X's slot s: 128 x 128 TensorE transposes, PER_BANK to a bank."""
        for j in nl.sequential_range(COL_TILES):
            c0 = j * P
            cw = min(P, COLS - c0)
            for i0 in nl.sequential_range(0, ROW_TILES, PER_BANK):
                bank = next_bank()
                for i in nl.sequential_range(i0, min(ROW_TILES, i0 + PER_BANK)):
                    n = min(P, ROWS - i * P)
                    o = (i - i0) * P
                    nisa.nc_transpose(dst=ps[0:cw, bank, o:o + n], data=x_sb[0:n, s, i, c0:c0 + cw])
                width = min(PER_BANK * P, ROWS - i0 * P)
                nisa.tensor_copy(dst=xt_sb[0:cw, j, i0 * P:i0 * P + width], src=ps[0:cw, bank, 0:width],
                                 engine=EVICT)

    def step(cur, nxt):
        """A' = b X X^T; B = S A'A' + A'; X+ = a X + B X into slot nxt."""
        for i in nl.sequential_range(ROW_TILES):
            n = min(P, ROWS - i * P)
            for g in nl.sequential_range(ROW_GROUPS):
                g0 = g * MM_N
                gw = min(MM_N, ROWS - g0)
                bank = next_bank()
                for k in nl.sequential_range(COL_TILES):
                    kw = min(P, COLS - k * P)
                    nisa.nc_matmul(dst=ps[0:n, bank, 0:gw], stationary=xt_sb[0:kw, k, i * P:i * P + n],
                                   moving=xt_sb[0:kw, k, g0:g0 + gw], accumulate=k > 0)
                nisa.tensor_scalar(dst=a_sb[0:n, i, g0:g0 + gw], data=ps[0:n, bank, 0:gw], op0=nl.multiply, operand0=COEF_B, engine=EVICT)
        for i in nl.sequential_range(ROW_TILES):
            n = min(P, ROWS - i * P)
            for g in nl.sequential_range(ROW_GROUPS):
                g0 = g * MM_N
                gw = min(MM_N, ROWS - g0)
                bank = next_bank()
                for k in nl.sequential_range(ROW_TILES):  # A' is symmetric: its rows are A'^T's
                    kn = min(P, ROWS - k * P)
                    nisa.nc_matmul(dst=ps[0:n, bank, 0:gw], stationary=a_sb[0:kn, k, i * P:i * P + n],
                                   moving=a_sb[0:kn, k, g0:g0 + gw], accumulate=k > 0)
                nisa.scalar_tensor_tensor(dst=b_sb[0:n, i, g0:g0 + gw], data=ps[0:n, bank, 0:gw],
                                          op0=nl.multiply, operand0=COEF_S, op1=nl.add,
                                          operand1=a_sb[0:n, i, g0:g0 + gw])
        for i in nl.sequential_range(ROW_TILES):
            n = min(P, ROWS - i * P)
            for g in nl.sequential_range(COL_GROUPS):
                c0 = g * MM_N
                cw = min(MM_N, COLS - c0)
                bank = next_bank()
                for k in nl.sequential_range(ROW_TILES):  # B is symmetric
                    kn = min(P, ROWS - k * P)
                    nisa.nc_matmul(dst=ps[0:n, bank, 0:cw], stationary=b_sb[0:kn, k, i * P:i * P + n],
                                   moving=x_sb[0:kn, cur, k, c0:c0 + cw], accumulate=k > 0)
                nisa.scalar_tensor_tensor(dst=x_sb[0:n, nxt, i, c0:c0 + cw],
                                          data=x_sb[0:n, cur, i, c0:c0 + cw], op0=nl.multiply,
                                          operand0=COEF_A, op1=nl.add, operand1=ps[0:n, bank, 0:cw])

    # X0 = G * rsqrt(sum of squares + EPS): ScalarE row sums, a ones matmul over the
    # partitions, rsqrt, then the evict engine scales into X's slot 0
    nisa.memset(dst=ones[0:P, 0:P], value=1.0, engine=nisa.engine.vector)
    for i in nl.affine_range(ROW_TILES):
        n = min(P, ROWS - i * P)
        nisa.dma_copy(dst=x_sb[0:n, 0, i, 0:COLS], src=G[i * P:i * P + n, 0:COLS])
        nisa.activation(dst=sq[0:n, 0:COLS], op=nl.square, data=x_sb[0:n, 0, i, 0:COLS],
                        reduce_op=nl.add, reduce_res=sums[0:n, i:i + 1],
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
    bank = next_bank()
    for i in nl.sequential_range(ROW_TILES):
        n = min(P, ROWS - i * P)
        nisa.nc_matmul(dst=ps[0:P, bank, 0:1], stationary=ones[0:n, 0:P],
                       moving=sums[0:n, i:i + 1], accumulate=i > 0)
    nisa.activation(dst=inv[0:P, 0:1], op=nl.rsqrt, data=ps[0:P, bank, 0:1], bias=EPS)
    for i in nl.affine_range(ROW_TILES):
        n = min(P, ROWS - i * P)
        nisa.tensor_scalar(dst=x_sb[0:n, 0, i, 0:COLS], data=x_sb[0:n, 0, i, 0:COLS], op0=nl.multiply, operand0=inv[0:n, 0:1], engine=EVICT)
    transpose(0)
    for t in nl.sequential_range(ITERATIONS):
        step(t % 2, 1 - t % 2)
        if t + 1 < ITERATIONS:
            transpose(1 - t % 2)
    last = ITERATIONS % 2
    for i in nl.affine_range(ROW_TILES):
        n = min(P, ROWS - i * P)
        nisa.dma_copy(dst=X[i * P:i * P + n, 0:COLS], src=x_sb[0:n, last, i, 0:COLS])
    return X


def store(v):
    """v rounded to DT (nearest even) as the kernel stores it, held in float32."""
    v = np.asarray(v, dtype=np.float32)
    u = v.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return np.where(np.isfinite(v), u.astype(np.uint32).view(np.float32), v)


def mm(stationary, moving):
    """stationary^T @ moving as TensorE computes it: fp32, accumulated in PSUM
    over P-row slabs of the contraction."""
    out = np.zeros((stationary.shape[1], moving.shape[1]), dtype=np.float32)
    for k in range(0, stationary.shape[0], P):
        out += stationary[k:k + P].T @ moving[k:k + P]
    return out


def reference(G):
    """X as the schedule rounds it: fp32 arithmetic, each matmul accumulated in fp32,
    rounded to DT where the kernel stores (X0, A', B, X+, X^T)."""
    x = np.asarray(G, dtype=np.float32)
    sums = np.sum(x * x, axis=1, keepdims=True, dtype=np.float32)
    total = mm(sums, np.ones((x.shape[0], 1), dtype=np.float32))[0, 0]
    x = store(x * (np.float32(1) / np.sqrt(total + np.float32(EPS))))
    xt = x.T.copy()
    for t in range(ITERATIONS):
        a1 = store(mm(xt, xt) * np.float32(COEF_B))
        b = store(mm(a1, a1) * np.float32(COEF_S) + a1)
        x_next = store(x * np.float32(COEF_A) + mm(b, x))
        if t + 1 < ITERATIONS:
            xt = x_next.T.copy()  # transposed
        x = x_next
    return {"X": x.astype(np.float64)}
