# matmul.py: an NKI kernel emitted by tessel 0.1.0 (tessel emit).
# space     sim_matmul (examples/sim_matmul.tsl)
# config    {"a_bufs":2,"a_home":"sbuf","a_reuse":null,"b_bufs":2,"block_order":["m","n","k"],"coalesce":true,"evict":"vector","order":["m","n","k"],"psum_bufs":8,"tile_k":128,"tile_m":128,"tile_n":512}
# target    trn2
# computes  C = A^T B with A given as [K, M] (lhsT) and B as [K, N]
#
# The schedule is the simulator's plan of this config (docs/nki.md). It has been
# checked on tessel's NKI interpreter (tests/nki/), never compiled by neuronx-cc or
# run on a NeuronCore.
# Where this kernel differs from the simulated plan:
#   - psum_zero = matmul: the kernel zeroes each PSUM group with nisa.memset; the simulated plan lets the first matmul overwrite it
#   - psum_bufs = 8: the compiler allocates PSUM banks; this many accumulation tiles are live at once in the simulated schedule

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

# --- the plan ---------------------------------------------------------------
M = 256                     # rows of C
N = 1024                    # columns of C
K = 512                     # the contraction
P = 128                     # partitions (nl.tile_size.pmax)
TILE_M = 128                # block sizes: tile_m, tile_n, tile_k
TILE_N = 512
TILE_K = 128
MM_M = 128                  # one matmul: stationary free size (<= 128)
MM_N = 512                  # moving free size (<= 512, one PSUM bank of fp32)
MM_K = 128                  # contraction rows (partitions)
M_BLOCKS = 2
N_BLOCKS = 2
K_BLOCKS = 4
SLABS = 1                   # 128-row slabs of a k block
A_BUFS = 2                  # resident sets of A blocks in rotation (bufs)
B_BUFS = 2                  # B block slots (bufs)
A_RESIDENT = 4              # A blocks kept per set (a_home = sbuf)
B_RESIDENT = 1              # B blocks kept per set (b_home = sbuf)
GROUPS = 1                  # PSUM accumulation groups of one C block (one bank each)
PSUM_SETS = 8               # sets of GROUPS banks in rotation
STAGE_COLS = 512            # output staging: a block row (coalesce)
IN = nl.bfloat16            # input dtype
OUT = nl.bfloat16           # output dtype
ACC = nl.bfloat16           # partial sums in SBUF (acc_dtype)
EVICT = nisa.engine.vector  # drains PSUM (evict)

INPUTS = {"A": ((K, M), "bfloat16"), "B": ((K, N), "bfloat16")}
OUTPUTS = {"C": ((M, N), "bfloat16")}
TOLERANCE = 0.015625  # the gate's, in units of |reference| + rms(reference)

@nki.jit
def matmul_kernel(A, B):
    C = nl.ndarray((M, N), dtype=OUT, buffer=nl.shared_hbm)
    # SBUF: A and B blocks, [partition = k row, slot, slab, free]
    a_sb = nl.ndarray((P, A_BUFS * A_RESIDENT, SLABS, TILE_M), dtype=IN, buffer=nl.sbuf)
    b_sb = nl.ndarray((P, B_BUFS * B_RESIDENT, SLABS, TILE_N), dtype=IN, buffer=nl.sbuf)
    c_stage = nl.ndarray((MM_M, 2, STAGE_COLS), dtype=OUT, buffer=nl.sbuf)
    c_psum = nl.ndarray((MM_M, PSUM_SETS * GROUPS, MM_N), dtype=nl.float32, buffer=nl.psum)

    def load_a(m, k, slot):
        """A block (m, k) into slot `slot`, one DMA per 128-row slab (coalesce)."""
        k0, m0 = k * TILE_K, m * TILE_M
        rows, cols = min(TILE_K, K - k0), min(TILE_M, M - m0)
        for s in nl.affine_range((rows + P - 1) // P):
            r = min(P, rows - s * P)
            nisa.dma_copy(dst=a_sb[0:r, slot, s, 0:cols], src=A[k0 + s * P:k0 + s * P + r, m0:m0 + cols])

    def load_b(k, n, slot):
        """B block (k, n) into slot `slot`, one DMA per 128-row slab (coalesce)."""
        k0, n0 = k * TILE_K, n * TILE_N
        rows, cols = min(TILE_K, K - k0), min(TILE_N, N - n0)
        for s in nl.affine_range((rows + P - 1) // P):
            r = min(P, rows - s * P)
            nisa.dma_copy(dst=b_sb[0:r, slot, s, 0:cols], src=B[k0 + s * P:k0 + s * P + r, n0:n0 + cols])

    def store(rows, row0, cols, col0, slot):
        nisa.dma_copy(dst=C[row0:row0 + rows, col0:col0 + cols], src=c_stage[0:rows, slot, 0:cols])

    a_loads = b_loads = a_sets = b_sets = stages = psum_sets = banks = 0
    for m in nl.affine_range(M_BLOCKS):  # m blocks (outermost)
        # A stays in SBUF across the n loop (a_home = sbuf): its blocks inside that loop load once
        a_set = a_sets % A_BUFS
        a_sets += 1
        for k in nl.affine_range(K_BLOCKS):
            load_a(m, k, a_set * A_RESIDENT + k)
        for n in nl.affine_range(N_BLOCKS):  # n blocks
            # k is innermost: the C block's 1 PSUM groups stay open across the k blocks
            g0 = (psum_sets % PSUM_SETS) * GROUPS
            psum_sets += 1
            nisa.memset(dst=c_psum[:, g0:g0 + GROUPS, :], value=0.0)
            for k in nl.affine_range(K_BLOCKS):  # k blocks (innermost)
                b_slot = b_loads % B_BUFS  # B block (k, n)
                b_loads += 1
                load_b(k, n, b_slot)
                m0, n0 = m * TILE_M, n * TILE_N
                m_cols, n_cols, k_rows = min(TILE_M, M - m0), min(TILE_N, N - n0), min(TILE_K, K - k * TILE_K)
                k_steps = (k_rows + MM_K - 1) // MM_K
                for mi in nl.affine_range((m_cols + MM_M - 1) // MM_M):
                    mw = min(MM_M, m_cols - mi * MM_M)
                    for ni in nl.affine_range((n_cols + MM_N - 1) // MM_N):
                        nw = min(MM_N, n_cols - ni * MM_N)
                        g = g0 + mi * 1 + ni
                        for t in nl.affine_range(k_steps):  # accumulates in the PSUM bank (fp32)
                            slab, row = divmod(t * MM_K, P)
                            kw = min(MM_K, k_rows - t * MM_K)
                            nisa.nc_matmul(dst=c_psum[0:mw, g, 0:nw],
                                           stationary=a_sb[row:row + kw, a_set * A_RESIDENT + k, slab, mi * MM_M:mi * MM_M + mw],
                                           moving=b_sb[row:row + kw, b_slot, slab, ni * MM_N:ni * MM_N + nw],
                                           accumulate=True)
            # after the last k block: drain the C block's groups
            for mi in nl.affine_range((m_cols + MM_M - 1) // MM_M):
                mw = min(MM_M, m_cols - mi * MM_M)
                slot = stages % 2  # output staging, double-buffered
                stages += 1
                for ni in nl.affine_range((n_cols + MM_N - 1) // MM_N):
                    nw = min(MM_N, n_cols - ni * MM_N)
                    g = g0 + mi * 1 + ni
                    nisa.tensor_copy(dst=c_stage[0:mw, slot, ni * MM_N:ni * MM_N + nw], src=c_psum[0:mw, g, 0:nw], engine=EVICT)
                store(mw, m0 + mi * MM_M, n_cols, n0, slot)
    return C


def reference(A, B):
    """C in float64, from the same inputs."""
    return {"C": A.astype(np.float64).T @ B.astype(np.float64)}
