# matmul.py: an NKI kernel emitted by tessel 0.1.0 (tessel emit).
# space     sim_fp8_matmul (examples/sim_fp8_matmul.tsl)
# config    {"a_bufs":2,"a_home":"sbuf","a_reuse":null,"b_bufs":2,"block_order":["m","n","k"],"evict":"vector","mm_k":256,"order":["m","n","k"],"psum_bufs":8,"tile_k":256,"tile_m":128,"tile_n":512}
# target    trn2
# computes  C = A^T B with A given as [K, M] (lhsT) and B as [K, N], row m of C times scale[m]
#
# The schedule is the simulator's plan of this config (docs/nki.md). It has been
# checked on tessel's NKI interpreter (tests/nki/), never compiled by neuronx-cc or
# run on a NeuronCore.

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

# --- the plan ---------------------------------------------------------------
M = 256              # rows of C
N = 1024             # columns of C
K = 512              # the contraction
P = 128              # partitions (nl.tile_size.pmax)
TILE_M = 128         # block sizes: tile_m, tile_n, tile_k
TILE_N = 512
TILE_K = 256
MM_M = 128           # one matmul: stationary free size (<= 128)
MM_N = 512           # moving free size (<= 512, one PSUM bank of fp32)
MM_K = 256           # contraction rows (partitions)
M_BLOCKS = 2
N_BLOCKS = 2
K_BLOCKS = 2
TM = 1               # stationary tiles of a full block
SLABS = 2            # 128-row slabs of a k block
A_BUFS = 2           # resident sets of A blocks in rotation
A_RESIDENT = 2       # A blocks per set: every block of the loops inside n
A_REUSE = 2          # n blocks served by one load of A (a_reuse)
A_PANELS = 1         # loads of each A block per pass of the n loop
B_BUFS = 2           # B block slots
B_RESIDENT = 1       # B blocks per set: every block of the loops inside m
GROUPS = 1           # PSUM accumulation groups of one C block (one bank each)
PSUM_SETS = 8        # sets of GROUPS banks in rotation (psum_bufs)
STAGE_SLOTS = 2      # output staging slots (the C rows open at once, + 1)
STAGE_COLS = 512     # output staging: a block row (coalesce)
IN = nl.float8_e4m3  # input dtype
OUT = nl.bfloat16    # output dtype
ACC = nl.bfloat16    # partial sums in SBUF (acc_dtype)

INPUTS = {"A": ((K, M), "float8_e4m3"), "B": ((K, N), "float8_e4m3"), "scale": ((M, 1), "float32")}
OUTPUTS = {"C": ((M, N), "bfloat16")}
TOLERANCE = 0.015625  # the gate's, in units of |reference| + rms(reference)

# What the simulator timed: its lowering of this plan, counted (docs/nki.md, "Structure").
# The NKI interpreter counts the kernel the same way; the tests require equal counts.
STRUCTURE = {
    # instructions by (contraction, stationary free, moving free)
    "matmul": {(256, 128, 512): 8},
    # TensorE transposes by the input's (partitions, free)
    "transpose": {},
    # (transfers, bytes) per direction
    "dma": {"hbm->sbuf": (26, 1180672), "sbuf->hbm": (4, 524288)},
    "psum_banks": 4,  # PSUM banks written
    "engines": {"tensor": 8, "vector": 4, "scalar": 0, "gpsimd": 0},  # instructions
}

@nki.jit
def matmul_kernel(A, B, scale):
    C = nl.ndarray((M, N), dtype=OUT, buffer=nl.shared_hbm)
    # SBUF: A and B blocks, [partition = k row, slot, slab, free]
    a_sb = nl.ndarray((P, A_BUFS * A_RESIDENT, SLABS, TILE_M), dtype=IN, buffer=nl.sbuf)
    b_sb = nl.ndarray((P, B_BUFS * B_RESIDENT, SLABS, TILE_N), dtype=IN, buffer=nl.sbuf)
    c_stage = nl.ndarray((MM_M, STAGE_SLOTS, STAGE_COLS), dtype=OUT, buffer=nl.sbuf)
    # PSUM: one bank ([MM_M, MM_N] fp32) per accumulation group
    c_psum = nl.ndarray((MM_M, PSUM_SETS * GROUPS, MM_N), dtype=nl.float32, buffer=nl.psum)

    # scale = row: the rows' scales of stationary tile mi of block m in column m * TM + mi
    s_sb = nl.ndarray((MM_M, M_BLOCKS * TM), dtype=nl.float32, buffer=nl.sbuf)
    for m in nl.affine_range(M_BLOCKS):
        m_cols = min(TILE_M, M - m * TILE_M)
        for mi in nl.affine_range(-(-m_cols // MM_M)):
            r0, rows = m * TILE_M + mi * MM_M, min(MM_M, m_cols - mi * MM_M)
            nisa.dma_copy(dst=s_sb[0:rows, m * TM + mi:m * TM + mi + 1], src=scale[r0:r0 + rows, 0:1])

    def load_a(m, k, slot):
        """A block (m, k) into slot `slot`: one DMA per 128-row slab (coalesce)."""
        k0, m0 = k * TILE_K, m * TILE_M
        rows, cols = min(TILE_K, K - k0), min(TILE_M, M - m0)
        c0, c1 = 0, cols
        for s in nl.affine_range((rows + P - 1) // P):
            r = min(P, rows - s * P)
            nisa.dma_copy(dst=a_sb[0:r, slot, s, c0:c1], src=A[k0 + s * P:k0 + s * P + r, m0 + c0:m0 + c1])

    def load_b(k, n, slot):
        """B block (k, n) into slot `slot`: one DMA per 128-row slab (coalesce)."""
        k0, n0 = k * TILE_K, n * TILE_N
        rows, cols = min(TILE_K, K - k0), min(TILE_N, N - n0)
        c0, c1 = 0, cols
        for s in nl.affine_range((rows + P - 1) // P):
            r = min(P, rows - s * P)
            nisa.dma_copy(dst=b_sb[0:r, slot, s, c0:c1], src=B[k0 + s * P:k0 + s * P + r, n0 + c0:n0 + c1])

    def store(rows, row0, cols, col0, slot):
        nisa.dma_copy(dst=C[row0:row0 + rows, col0:col0 + cols], src=c_stage[0:rows, slot, 0:cols])

    # trace-time state: block slots, bank rotation, staging slots
    a_loads = b_loads = banks = stages = c_blocks = 0
    a_last = b_last = None
    stage_of = [0] * TM  # the staging slot of each stationary tile's C row
    for m in nl.affine_range(M_BLOCKS):  # m blocks (outermost)
        for n in nl.affine_range(N_BLOCKS):  # n blocks
            for k in nl.affine_range(K_BLOCKS):  # k blocks (innermost)
                # a_reuse: A_REUSE n blocks share one load of the A blocks inside n
                a_slot = ((m) * A_PANELS + n // A_REUSE) % A_BUFS * A_RESIDENT + k
                if n % A_REUSE == 0:
                    load_a(m, k, a_slot)
                if (k, n) != b_last:  # a new B block: the next slot
                    b_last = (k, n)
                    b_slot = b_loads % B_BUFS
                    b_loads += 1
                    load_b(k, n, b_slot)
                m0, n0 = m * TILE_M, n * TILE_N
                m_cols, n_cols, k_rows = min(TILE_M, M - m0), min(TILE_N, N - n0), min(TILE_K, K - k * TILE_K)
                tm, tn, tk = -(-m_cols // MM_M), -(-n_cols // MM_N), -(-k_rows // MM_K)
                # k innermost: the C block's groups stay open in PSUM across the k blocks
                opens, closes = k == 0, k == K_BLOCKS - 1
                if opens:
                    c_blocks += 1
                bank = [0] * (tm * tn)
                # the instruction loops in block_order (m, n, k)
                for mi in nl.affine_range(tm):
                    for ni in nl.affine_range(tn):
                        for t in nl.affine_range(tk):
                            rows, cols = min(MM_M, m_cols - mi * MM_M), min(MM_N, n_cols - ni * MM_N)
                            group = mi * tn + ni
                            if t == 0:  # the group opens: its PSUM bank
                                bank[group] = (c_blocks - 1) % PSUM_SETS * GROUPS + group
                            slab, row = divmod(t * MM_K, P)
                            kw = min(MM_K, k_rows - t * MM_K)
                            if kw > P:  # fp8 double_row: two full slabs pair up, contraction 2 x P
                                nisa.nc_matmul(dst=c_psum[0:rows, bank[group], 0:cols],
                                               stationary=a_sb[0:P, a_slot, slab:slab + 2, mi * MM_M:mi * MM_M + rows],
                                               moving=b_sb[0:P, b_slot, slab:slab + 2, ni * MM_N:ni * MM_N + cols],
                                               accumulate=t > 0 or not opens,  # psum_zero = matmul: the first overwrites
                                               perf_mode=nisa.matmul_perf_mode.double_row)
                            else:  # the last contraction tile fits one slab: an ordinary matmul
                                nisa.nc_matmul(dst=c_psum[0:rows, bank[group], 0:cols],
                                               stationary=a_sb[row:row + kw, a_slot, slab, mi * MM_M:mi * MM_M + rows],
                                               moving=b_sb[row:row + kw, b_slot, slab, ni * MM_N:ni * MM_N + cols],
                                               accumulate=t > 0 or not opens)  # psum_zero = matmul: the first overwrites
                            if t == tk - 1 and closes:  # the group is complete: drain it
                                if ni == 0:  # a new C row: the next staging slot
                                    stage_of[mi] = stages % STAGE_SLOTS
                                    stages += 1
                                nisa.tensor_scalar(dst=c_stage[0:rows, stage_of[mi], ni * MM_N:ni * MM_N + cols], data=c_psum[0:rows, bank[group], 0:cols], op0=nl.multiply, operand0=s_sb[0:rows, m * TM + mi:m * TM + mi + 1], engine=nisa.engine.vector)
                                if ni == tn - 1:  # the row is complete: one DMA (coalesce)
                                    store(rows, m0 + mi * MM_M, n_cols, n0, stage_of[mi])
    return C


def reference(A, B, scale):
    """C in float64, from the same inputs: row m of the product times scale[m]."""
    return {"C": scale.astype(np.float64) * (A.astype(np.float64).T @ B.astype(np.float64))}
