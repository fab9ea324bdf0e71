# swiglu.py: an NKI kernel emitted by tessel 0.1.0 (tessel emit).
# space     swiglu (examples/swiglu.tsl)
# config    {"bufs":2,"d_tile":512,"dma_queues":2,"evict":"vector","ff_tile":128,"fuse_down":false,"fuse_gate_up":true,"mul_engine":"vector","psum_sets":2,"silu_engine":"scalar","token_tile":128,"x_bufs":1}
# target    trn2
# computes  y = (silu(x W_gate) * (x W_up)) W_down with x given as [d_model, tokens]
#
# The schedule is the simulator's plan of this config (docs/nki.md). It has been
# checked on tessel's NKI interpreter (tests/nki/), never compiled by neuronx-cc or
# run on a NeuronCore.
# Where this kernel differs from the simulated plan:
#   - fuse_gate_up: W_gate and W_up are separate HBM tensors, loaded back to back
#   - dma_queues = 2: NKI assigns DMA queues itself

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

# --- the plan ---------------------------------------------------------------
TOKENS = 256
D_MODEL = 512
D_FF = 640
P = 128                          # partitions (nl.tile_size.pmax)
TOKEN_TILE = 128                 # token_tile: x^T and h^T stay in SBUF per token tile
FF_TILE = 128                    # ff_tile: d_ff columns per W_gate/W_up block
D_TILE = 512                     # d_tile: output columns per down-projection pass
MM_N = 512                       # moving free size of a matmul (one PSUM bank of fp32)
K_SLABS = 4                      # 128-row slabs of d_model (the gate/up contraction)
T_SUBS = 1                       # 128-token row tiles of a token tile
SUBS_PER_BLOCK = 1               # 128-row sub-tiles of h^T per ff block
TOKEN_TILES = 2
F_BLOCKS = 5
D_BLOCKS = 1
BUFS = 2                         # weight block slots (bufs)
X_BUFS = 1                       # x tile slots (x_bufs)
PSUM_SETS = 2                    # (g, u) PSUM bank pairs in rotation (psum_sets)
FUSE_DOWN = False                # down projection per ff block into an fp32 accumulator
MUL_ENGINE = nisa.engine.vector  # h = silu(g) * u (mul_engine)
EVICT = nisa.engine.vector       # drains PSUM (evict)
EVICT_ADD = nisa.engine.vector   # adds PSUM partials (ScalarE has no two-tensor add)
DT = nl.bfloat16                 # dtype of x, the weights, h and y

INPUTS = {"x": ((D_MODEL, TOKENS), "bfloat16"), "W_gate": ((D_MODEL, D_FF), "bfloat16"),
          "W_up": ((D_MODEL, D_FF), "bfloat16"), "W_down": ((D_FF, D_MODEL), "bfloat16")}
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
    "psum_banks": 8,  # PSUM banks written
    "engines": {"tensor": 90, "vector": 12, "scalar": 10, "gpsimd": 0},  # instructions
}

@nki.jit
def swiglu_kernel(x, W_gate, W_up, W_down):
    y = nl.ndarray((TOKENS, D_MODEL), dtype=DT, buffer=nl.shared_hbm)
    x_sb = nl.ndarray((P, X_BUFS, K_SLABS, TOKEN_TILE), dtype=DT, buffer=nl.sbuf)  # x^T
    wg_sb = nl.ndarray((P, BUFS, K_SLABS, FF_TILE), dtype=DT, buffer=nl.sbuf)
    wu_sb = nl.ndarray((P, BUFS, K_SLABS, FF_TILE), dtype=DT, buffer=nl.sbuf)
    wd_sb = nl.ndarray((P, BUFS, SUBS_PER_BLOCK, D_TILE), dtype=DT, buffer=nl.sbuf)
    h_sb = nl.ndarray((P, F_BLOCKS * SUBS_PER_BLOCK, TOKEN_TILE), dtype=DT, buffer=nl.sbuf)  # all of h^T
    silu_sb = nl.ndarray((P, MM_N), dtype=nl.float32, buffer=nl.sbuf)
    y_stage = nl.ndarray((P, 2, D_TILE), dtype=DT, buffer=nl.sbuf)
    g_psum = nl.ndarray((P, PSUM_SETS, MM_N), dtype=nl.float32, buffer=nl.psum)
    u_psum = nl.ndarray((P, PSUM_SETS, MM_N), dtype=nl.float32, buffer=nl.psum)
    y_psum = nl.ndarray((P, T_SUBS, D_TILE), dtype=nl.float32, buffer=nl.psum)

    def load_slabs(dst, src, col0, cols):
        """Rows of d_model, one DMA per 128-row slab: dst[0:r, s, 0:cols] = src[slab s, cols]."""
        for s in nl.affine_range(K_SLABS):
            r = min(P, D_MODEL - s * P)
            nisa.dma_copy(dst=dst[0:r, s, 0:cols], src=src[s * P:s * P + r, col0:col0 + cols])

    def down_pass(t0, tn, f0, fw, d0, dw, slot, hsub0, last_block):
        """y_psum[tokens, d block] += h^T[ff rows f0:f0+fw]^T W_down[f0:f0+fw, d block]."""
        for fs in nl.affine_range((fw + P - 1) // P):
            fr = min(P, fw - fs * P)
            nisa.dma_copy(dst=wd_sb[0:fr, slot, fs, 0:dw], src=W_down[f0 + fs * P:f0 + fs * P + fr, d0:d0 + dw])
        for ts in nl.affine_range((tn + P - 1) // P):
            tr = min(P, tn - ts * P)
            steps = (fw + P - 1) // P
            for fs in nl.affine_range(steps):  # accumulates in PSUM over the ff rows
                fr = min(P, fw - fs * P)
                for dc in nl.affine_range((dw + MM_N - 1) // MM_N):
                    cw = min(MM_N, dw - dc * MM_N)
                    nisa.nc_matmul(dst=y_psum[0:tr, ts, dc * MM_N:dc * MM_N + cw],
                                   stationary=h_sb[0:fr, hsub0 + fs, ts * P:ts * P + tr],
                                   moving=wd_sb[0:fr, slot, fs, dc * MM_N:dc * MM_N + cw], accumulate=True)

    x_loads = w_loads = gu_sets = stages = 0
    for tt in nl.affine_range(TOKEN_TILES):  # token tiles
        t0 = tt * TOKEN_TILE
        tn = min(TOKEN_TILE, TOKENS - t0)
        xs = x_loads % X_BUFS
        x_loads += 1
        load_slabs(x_sb[:, xs], x, t0, tn)
        for fb in nl.affine_range(F_BLOCKS):  # ff blocks
            f0 = fb * FF_TILE
            fw = min(FF_TILE, D_FF - f0)
            ws = w_loads % BUFS
            w_loads += 1
            load_slabs(wg_sb[:, ws], W_gate, f0, fw)
            load_slabs(wu_sb[:, ws], W_up, f0, fw)
            hsub0 = fb * SUBS_PER_BLOCK
            for fs in nl.affine_range((fw + P - 1) // P):  # 128 rows of h^T (ff on partitions)
                fr = min(P, fw - fs * P)
                for tc in nl.affine_range((tn + MM_N - 1) // MM_N):
                    cw = min(MM_N, tn - tc * MM_N)
                    g = gu_sets % PSUM_SETS
                    gu_sets += 1
                    for s in nl.affine_range(K_SLABS):  # g^T and u^T accumulate over d_model in PSUM
                        r = min(P, D_MODEL - s * P)
                        moving = x_sb[0:r, xs, s, tc * MM_N:tc * MM_N + cw]
                        nisa.nc_matmul(dst=g_psum[0:fr, g, 0:cw], stationary=wg_sb[0:r, ws, s, fs * P:fs * P + fr],
                                       moving=moving, accumulate=s > 0)
                        nisa.nc_matmul(dst=u_psum[0:fr, g, 0:cw], stationary=wu_sb[0:r, ws, s, fs * P:fs * P + fr],
                                       moving=moving, accumulate=s > 0)
                    nisa.activation(dst=silu_sb[0:fr, 0:cw], op=nl.silu, data=g_psum[0:fr, g, 0:cw])
                    h = h_sb[0:fr, hsub0 + fs, tc * MM_N:tc * MM_N + cw]
                    nisa.tensor_tensor(dst=h, data1=silu_sb[0:fr, 0:cw], data2=u_psum[0:fr, g, 0:cw], op=nl.multiply, engine=MUL_ENGINE)
        # the down projection: all of d_ff accumulates in PSUM per d block
        for db in nl.affine_range(D_BLOCKS):
            d0 = db * D_TILE
            dw = min(D_TILE, D_MODEL - d0)
            nisa.memset(dst=y_psum[:, :, 0:dw], value=0.0)
            for fb in nl.affine_range(F_BLOCKS):
                f0 = fb * FF_TILE
                fw = min(FF_TILE, D_FF - f0)
                ds = w_loads % BUFS
                w_loads += 1
                down_pass(t0, tn, f0, fw, d0, dw, ds, fb * SUBS_PER_BLOCK, fb == F_BLOCKS - 1)
            for ts in nl.affine_range((tn + P - 1) // P):
                tr = min(P, tn - ts * P)
                out = y_stage[0:tr, stages % 2, 0:dw]
                stages += 1
                nisa.tensor_copy(dst=out, src=y_psum[0:tr, ts, 0:dw], engine=EVICT)
                nisa.dma_copy(dst=y[t0 + ts * P:t0 + ts * P + tr, d0:d0 + dw], src=out)
    return y


def reference(x, W_gate, W_up, W_down):
    """y in float64, from the same inputs."""
    xt = x.astype(np.float64).T
    g, u = xt @ W_gate.astype(np.float64), xt @ W_up.astype(np.float64)
    return {"y": (g / (1.0 + np.exp(-g)) * u) @ W_down.astype(np.float64)}
