# swiglu.py: an NKI kernel emitted by tessel 0.1.0 (tessel emit).
# space     swiglu (examples/swiglu.tsl)
# config    {"bufs":2,"d_tile":512,"evict":"vector","ff_tile":128,"fuse_down":false,"fuse_gate_up":true,"mul_engine":"vector","psum_sets":2,"token_tile":128,"x_bufs":1}
# target    trn2
# computes  y = (silu(x W_gate) * (x W_up)) W_down with x given as [d_model, tokens] and W_gate, W_up stacked as W_gate_up [d_model, 2, d_ff]
#
# The schedule is the simulator's plan of this config (docs/nki.md). It has been
# checked on tessel's NKI interpreter (tests/nki/), never compiled by neuronx-cc or
# run on a NeuronCore.

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

# --- the plan ---------------------------------------------------------------
TOKENS = 256
D_MODEL = 512
D_FF = 640
P = 128                          # partitions (nl.tile_size.pmax)
BANK = 512                       # fp32 columns of a PSUM bank
TOKEN_TILE = 128                 # token_tile: x^T and h^T stay in SBUF per token tile
FF_TILE = 128                    # ff_tile: d_ff columns per W_gate/W_up block
D_TILE = 512                     # d_tile: output columns per down-projection pass
MM_N = 512                       # moving free size of a matmul (divides a bank)
MM_K = 128                       # contraction of a gate/up matmul: rows of a d_model slab (mm_k)
K_SLABS = 4                      # MM_K-row slabs of d_model (the gate/up contraction)
T_SUBS = 1                       # 128-token row tiles of a token tile
SUBS_PER_BLOCK = 1               # 128-row sub-tiles of h^T per ff block
TOKEN_TILES = 2
F_BLOCKS = 5
D_BLOCKS = 1
BUFS = 2                         # weight block slots (bufs)
X_BUFS = 1                       # x tile slots (x_bufs)
PSUM_SETS = 2                    # (g, u) PSUM bank pairs in rotation (psum_sets)
DOWN_BANKS = 1                   # PSUM banks of one row tile's y block
DOWN_SETS = 1                    # y block bank sets in rotation
MUL_ENGINE = nisa.engine.vector  # h = silu(g) * u (mul_engine)
EVICT = nisa.engine.vector       # drains PSUM (evict)
EVICT_ADD = nisa.engine.vector   # adds PSUM partials (ScalarE has no two-tensor add)
DT = nl.bfloat16                 # dtype of x, the weights, h and y

INPUTS = {"x": ((D_MODEL, TOKENS), "bfloat16"), "W_gate_up": ((D_MODEL, 2, D_FF), "bfloat16"),
          "W_down": ((D_FF, D_MODEL), "bfloat16")}
OUTPUTS = {"y": ((TOKENS, D_MODEL), "bfloat16")}
TOLERANCE = 0.015625  # the gate's, in units of |reference| + rms(reference)

# What the simulator timed: its lowering of this plan, counted (docs/nki.md, "Structure").
# The NKI interpreter counts the kernel the same way; the tests require equal counts.
STRUCTURE = {
    # instructions by (contraction, stationary free, moving free)
    "matmul": {(128, 128, 128): 80, (128, 128, 512): 10},
    # TensorE transposes by the input's (partitions, free)
    "transpose": {},
    # (transfers, bytes) per direction
    "dma": {"hbm->sbuf": (58, 4194304), "sbuf->hbm": (2, 262144)},
    "psum_banks": 5,  # PSUM banks written
    "engines": {"tensor": 90, "vector": 12, "scalar": 10, "gpsimd": 0},  # instructions
}

@nki.jit
def swiglu_kernel(x, W_gate_up, W_down):
    y = nl.ndarray((TOKENS, D_MODEL), dtype=DT, buffer=nl.shared_hbm)
    x_sb = nl.ndarray((P, X_BUFS, K_SLABS, TOKEN_TILE), dtype=DT, buffer=nl.sbuf)  # x^T
    gu_sb = nl.ndarray((P, BUFS, K_SLABS, 2, FF_TILE), dtype=DT, buffer=nl.sbuf)
    wd_sb = nl.ndarray((P, BUFS, SUBS_PER_BLOCK, D_TILE), dtype=DT, buffer=nl.sbuf)
    h_sb = nl.ndarray((P, F_BLOCKS * SUBS_PER_BLOCK, TOKEN_TILE), dtype=DT, buffer=nl.sbuf)  # all of h^T
    silu_sb = nl.ndarray((P, 2, MM_N), dtype=nl.float32, buffer=nl.sbuf)
    y_stage = nl.ndarray((P, 2, D_TILE), dtype=DT, buffer=nl.sbuf)
    # PSUM: (g, u) bank pairs, then the y blocks' banks
    gu_psum = nl.ndarray((P, 2 * PSUM_SETS, BANK), dtype=nl.float32, buffer=nl.psum)
    y_psum = nl.ndarray((P, DOWN_SETS * T_SUBS * DOWN_BANKS, BANK), dtype=nl.float32, buffer=nl.psum)

    def y_bank(ys, ts, n):
        """The bank and first column of y's moving tile n of row tile ts in set ys."""
        bank, col = divmod(n * MM_N, BANK)
        return (ys * T_SUBS + ts) * DOWN_BANKS + bank, col

    # trace-time state: slot rotations and the PSUM bank sets
    x_loads = gu_loads = wd_loads = gu_sets = silus = stages = passes = 0
    for tt in nl.affine_range(TOKEN_TILES):  # token tiles
        t0 = tt * TOKEN_TILE
        tn = min(TOKEN_TILE, TOKENS - t0)
        xs = x_loads % X_BUFS
        x_loads += 1
        for s in nl.affine_range(K_SLABS):
            r = min(MM_K, D_MODEL - s * MM_K)
            nisa.dma_copy(dst=x_sb[0:r, xs, s, 0:tn], src=x[s * MM_K:s * MM_K + r, t0:t0 + tn])
        for fb in nl.sequential_range(F_BLOCKS):  # ff blocks
            f0 = fb * FF_TILE
            fw = min(FF_TILE, D_FF - f0)
            ws = gu_loads % BUFS
            gu_loads += 1
            for s in nl.affine_range(K_SLABS):
                r = min(MM_K, D_MODEL - s * MM_K)
                # fuse_gate_up: one transfer moves both rows
                nisa.dma_copy(dst=gu_sb[0:r, ws, s, :, 0:fw], src=W_gate_up[s * MM_K:s * MM_K + r, :, f0:f0 + fw])
            hsub0 = fb * SUBS_PER_BLOCK
            for fs in nl.affine_range((fw + P - 1) // P):  # 128 rows of h^T (ff on partitions)
                fr = min(P, fw - fs * P)
                for tc in nl.affine_range((tn + MM_N - 1) // MM_N):
                    cw = min(MM_N, tn - tc * MM_N)
                    g = gu_sets % PSUM_SETS
                    gu_sets += 1
                    for j in nl.affine_range(2):  # g^T, then u^T, each accumulating over d_model
                        for s in nl.affine_range(K_SLABS):
                            r = min(MM_K, D_MODEL - s * MM_K)
                            nisa.nc_matmul(dst=gu_psum[0:fr, 2 * g + j, 0:cw],
                                           stationary=gu_sb[0:r, ws, s, j, fs * P:fs * P + fr],
                                           moving=x_sb[0:r, xs, s, tc * MM_N:tc * MM_N + cw], accumulate=s > 0)
                    sl = silus % 2
                    silus += 1
                    nisa.activation(dst=silu_sb[0:fr, sl, 0:cw], op=nl.silu, data=gu_psum[0:fr, 2 * g, 0:cw])
                    h = h_sb[0:fr, hsub0 + fs, tc * MM_N:tc * MM_N + cw]
                    nisa.tensor_tensor(dst=h, data1=silu_sb[0:fr, sl, 0:cw], data2=gu_psum[0:fr, 2 * g + 1, 0:cw],
                   op=nl.multiply, engine=MUL_ENGINE)
        # the down projection: all of d_ff accumulates in PSUM per d block
        fb_first, fb_end = 0, F_BLOCKS
        for db in nl.affine_range(D_BLOCKS):
            d0 = db * D_TILE
            dw = min(D_TILE, D_MODEL - d0)
            ys = passes % DOWN_SETS
            passes += 1
            for fd in nl.sequential_range(fb_first, fb_end):
                fd0 = fd * FF_TILE
                fdw = min(FF_TILE, D_FF - fd0)
                ds = wd_loads % BUFS
                wd_loads += 1
                for fs in nl.affine_range((fdw + P - 1) // P):
                    fr = min(P, fdw - fs * P)
                    nisa.dma_copy(dst=wd_sb[0:fr, ds, fs, 0:dw], src=W_down[fd0 + fs * P:fd0 + fs * P + fr, d0:d0 + dw])
                steps = (fdw + P - 1) // P
                for fs in nl.affine_range(steps):  # accumulates in PSUM over the ff rows
                    fr = min(P, fdw - fs * P)
                    hsub = fd * SUBS_PER_BLOCK + fs
                    for ts in nl.affine_range((tn + P - 1) // P):
                        tr = min(P, tn - ts * P)
                        for n in nl.affine_range((dw + MM_N - 1) // MM_N):
                            nw = min(MM_N, dw - n * MM_N)
                            bank, col = y_bank(ys, ts, n)
                            nisa.nc_matmul(dst=y_psum[0:tr, bank, col:col + nw],
                                           stationary=h_sb[0:fr, hsub, ts * P:ts * P + tr],
                                           moving=wd_sb[0:fr, ds, fs, n * MM_N:n * MM_N + nw],
                                           accumulate=fd > fb_first or fs > 0)  # the first matmul overwrites
            for ts in nl.affine_range((tn + P - 1) // P):
                tr = min(P, tn - ts * P)
                slot = stages % 2
                stages += 1
                for n in nl.affine_range((dw + MM_N - 1) // MM_N):
                    nw = min(MM_N, dw - n * MM_N)
                    bank, col = y_bank(ys, ts, n)
                    nisa.tensor_copy(dst=y_stage[0:tr, slot, n * MM_N:n * MM_N + nw], src=y_psum[0:tr, bank, col:col + nw], engine=EVICT)
                nisa.dma_copy(dst=y[t0 + ts * P:t0 + ts * P + tr, d0:d0 + dw], src=y_stage[0:tr, slot, 0:dw])
    return y


def reference(x, W_gate_up, W_down):
    """y in float64, from the same inputs."""
    xt, w = x.astype(np.float64).T, W_gate_up.astype(np.float64)
    g, u = xt @ w[:, 0, :], xt @ w[:, 1, :]
    return {"y": (g / (1.0 + np.exp(-g)) * u) @ W_down.astype(np.float64)}
