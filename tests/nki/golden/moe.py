# moe.py: an NKI kernel emitted by tessel 0.1.0 (tessel emit).
# space     moe (examples/moe.tsl)
# config    {"bufs":2,"combine_engine":"vector","core_split":null,"evict":"vector","grouping":"sorted","out_tile":768,"partials":"hbm","token_tile":128,"x_bufs":2,"x_layout":"rows"}
# target    trn2
# computes  y[t] = sum over t's top_k experts e of router_weights[t, slot] * (x[t] @ W[e]), the routing fixed when the kernel is traced
#
# The schedule is the simulator's plan of this config (docs/nki.md). It has been
# checked on tessel's NKI interpreter (tests/nki/), never compiled by neuronx-cc or
# run on a NeuronCore.

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

# --- the plan ---------------------------------------------------------------
TOKENS = 48
D_IN = 256
D_OUT = 768
EXPERTS = 8
TOP_K = 2                     # experts per token
P = 128                       # partitions (nl.tile_size.pmax)
BANK = 512                    # fp32 columns of a PSUM bank
TOKEN_TILE = 128              # token_tile: rows per group tile
T_SUBS = 1                    # 128-row sub-tiles of a group tile
OUT_TILE = 768                # out_tile: d_out columns per weight block and combine step
MM_N = 512                    # moving free size of a matmul (one PSUM bank of fp32)
OUT_BANKS = 2                 # PSUM banks of a sub-tile's out block (one per MM_N columns)
PSUM_SETS = 3                 # out-block bank sets in rotation
K_SLABS = 2                   # 128-row slabs of d_in (the contraction)
OUT_BLOCKS = 1
TOKEN_TILES = 1               # 128-token tiles of the combine
ROUTED = 96                   # routed (token, slot) rows
PARTIALS = "hbm"              # where the partials wait (partials)
BUFS = 2                      # expert weight block slots (bufs)
X_BUFS = 2                    # x^T tile slots (x_bufs)
EVICT = nisa.engine.vector    # drains PSUM times the router weights (evict)
COMBINE = nisa.engine.vector  # sums the top_k partials (combine_engine)
DT = nl.bfloat16              # dtype of x, the weights and y

INPUTS = {"x": ((TOKENS, D_IN), "bfloat16"), "W": ((EXPERTS, D_IN, D_OUT), "bfloat16"),
          "router_weights": ((TOKENS, TOP_K), "float32"),
          "routing": ((ROUTED, 2), "int32", "ROUTING")}  # the router's output: ROUTING
OUTPUTS = {"y": ((TOKENS, D_OUT), "bfloat16")}
TOLERANCE = 0.015625  # the gate's, in units of |reference| + rms(reference)

# What the simulator timed: its lowering of this plan, counted (docs/nki.md, "Structure").
# The NKI interpreter counts the kernel the same way; the tests require equal counts.
STRUCTURE = {
    # instructions by (contraction, stationary free, moving free)
    "matmul": {(128, 7, 256): 2, (128, 7, 512): 2, (128, 10, 256): 4, (128, 10, 512): 4, (128, 11, 256): 4, (128, 11, 512): 4, (128, 14, 256): 2, (128, 14, 512): 2, (128, 16, 256): 2, (128, 16, 512): 2, (128, 17, 256): 2, (128, 17, 512): 2},
    # TensorE transposes by the input's (partitions, free)
    "transpose": {(7, 128): 2, (10, 128): 4, (11, 128): 4, (14, 128): 2, (16, 128): 2, (17, 128): 2},
    # (transfers, bytes) per direction
    "dma": {"hbm->sbuf": (41, 3490944), "sbuf->hbm": (9, 368640)},
    "psum_banks": 8,  # PSUM banks written
    "engines": {"tensor": 48, "vector": 33, "scalar": 0, "gpsimd": 0},  # instructions
}

GROUP_TILES = [  # (expert, ((token, slot), ...)) per group tile
    (0, ((4, 1), (6, 1), (9, 1), (10, 1), (11, 0), (12, 0), (14, 0), (15, 1), (17, 0), (18, 1), (20, 1), (22, 1), (23, 0), (34, 0), (39, 0), (46, 1), )),
    (1, ((0, 0), (7, 0), (9, 0), (12, 1), (13, 0), (16, 1), (19, 0), (25, 1), (27, 1), (30, 1), (32, 1), (33, 0), (36, 0), (37, 1), (39, 1), (41, 1), (44, 1), )),
    (2, ((3, 1), (4, 0), (5, 0), (10, 0), (23, 1), (26, 0), (28, 1), (29, 1), (35, 1), (38, 0), (41, 0), (43, 0), (45, 1), (47, 1), )),
    (3, ((5, 1), (6, 0), (7, 1), (13, 1), (15, 0), (24, 1), (26, 1), (30, 0), (38, 1), (42, 1), (44, 0), )),
    (4, ((2, 1), (3, 0), (8, 1), (19, 1), (20, 0), (21, 1), (24, 0), (28, 0), (31, 1), (45, 0), )),
    (5, ((1, 1), (8, 0), (11, 1), (17, 1), (29, 0), (33, 1), (36, 1), (37, 0), (42, 0), (46, 0), (47, 0), )),
    (6, ((0, 1), (2, 0), (14, 1), (18, 0), (21, 0), (25, 0), (34, 1), (35, 0), (40, 0), (43, 1), )),
    (7, ((1, 0), (16, 0), (22, 0), (27, 0), (31, 0), (32, 0), (40, 1), )),
]
ROUTING = [  # (token, token * TOP_K + slot) of each row, in tile order
    (4, 9), (6, 13), (9, 19), (10, 21), (11, 22), (12, 24), (14, 28), (15, 31), (17, 34), (18, 37), (20, 41), (22, 45), (23, 46), (34, 68), (39, 78), (46, 93), 
    (0, 0), (7, 14), (9, 18), (12, 25), (13, 26), (16, 33), (19, 38), (25, 51), (27, 55), (30, 61), (32, 65), (33, 66), (36, 72), (37, 75), (39, 79), (41, 83), (44, 89), 
    (3, 7), (4, 8), (5, 10), (10, 20), (23, 47), (26, 52), (28, 57), (29, 59), (35, 71), (38, 76), (41, 82), (43, 86), (45, 91), (47, 95), 
    (5, 11), (6, 12), (7, 15), (13, 27), (15, 30), (24, 49), (26, 53), (30, 60), (38, 77), (42, 85), (44, 88), 
    (2, 5), (3, 6), (8, 17), (19, 39), (20, 40), (21, 43), (24, 48), (28, 56), (31, 63), (45, 90), 
    (1, 3), (8, 16), (11, 23), (17, 35), (29, 58), (33, 67), (36, 73), (37, 74), (42, 84), (46, 92), (47, 94), 
    (0, 1), (2, 4), (14, 29), (18, 36), (21, 42), (25, 50), (34, 69), (35, 70), (40, 80), (43, 87), 
    (1, 2), (16, 32), (22, 44), (27, 54), (31, 62), (32, 64), (40, 81), 
]

@nki.jit
def moe_kernel(x, W, router_weights, routing):
    y = nl.ndarray((TOKENS, D_OUT), dtype=DT, buffer=nl.shared_hbm)
    part = nl.ndarray((ROUTED, D_OUT), dtype=nl.float32, buffer=nl.shared_hbm)  # row token * TOP_K + slot
    rw_rows = router_weights.reshape((ROUTED, 1))
    xT = nl.ndarray((P, X_BUFS, K_SLABS, TOKEN_TILE), dtype=DT, buffer=nl.sbuf)
    xg = nl.ndarray((P, 2, D_IN), dtype=DT, buffer=nl.sbuf)  # gathered rows, 2 slots
    w_sb = nl.ndarray((P, BUFS, K_SLABS, OUT_TILE), dtype=DT, buffer=nl.sbuf)
    idx_sb = nl.ndarray((P, X_BUFS, T_SUBS, 2), dtype=nl.int32, buffer=nl.sbuf)  # routing
    p_sb = nl.ndarray((P, X_BUFS, T_SUBS, 1), dtype=nl.float32, buffer=nl.sbuf)  # weights
    o_sb = nl.ndarray((P, 2, OUT_TILE), dtype=nl.float32, buffer=nl.sbuf)
    cb = nl.ndarray((P, TOP_K, OUT_TILE), dtype=nl.float32, buffer=nl.sbuf)
    y_sb = nl.ndarray((P, OUT_TILE), dtype=DT, buffer=nl.sbuf)
    t_psum = nl.ndarray((P, 2, BANK), dtype=nl.float32, buffer=nl.psum)
    ps_psum = nl.ndarray((P, PSUM_SETS * T_SUBS * OUT_BANKS, BANK), dtype=nl.float32, buffer=nl.psum)
    # trace-time state: slot and bank rotations, the rows routed so far
    x_loads = w_loads = stages = raws = transposes = out_sets = routed = 0
    for e, rows in GROUP_TILES:  # group tiles
        xs = x_loads % X_BUFS
        x_loads += 1
        for ts in nl.sequential_range((len(rows) + P - 1) // P):  # 128-row sub-tiles
            r0 = ts * P
            n = min(P, len(rows) - r0)
            # the sub-tile's (token, row) indices, then its router weights through them
            nisa.dma_copy(dst=idx_sb[0:n, xs, ts, :], src=routing[routed + r0:routed + r0 + n, :])
            nisa.dma_copy(dst=p_sb[0:n, xs, ts, :], src=rw_rows.ap(pattern=[[1, n], [1, 1]], offset=0,
                          vector_offset=idx_sb[0:n, xs, ts, 1:2], indirect_dim=0))
            # gather the rows of x through the token indices, transpose each piece on TensorE
            raw = raws % 2
            raws += 1
            nisa.dma_copy(dst=xg[0:n, raw, :], src=x.ap(pattern=[[D_IN, n], [1, D_IN]], offset=0,
                          vector_offset=idx_sb[0:n, xs, ts, 0:1], indirect_dim=0))
            for s in nl.affine_range(K_SLABS):
                r = min(P, D_IN - s * P)
                tb = transposes % 2
                transposes += 1
                nisa.nc_transpose(dst=t_psum[0:r, tb, 0:n], data=xg[0:n, raw, s * P:s * P + r])
                nisa.tensor_copy(dst=xT[0:r, xs, s, r0:r0 + n], src=t_psum[0:r, tb, 0:n], engine=EVICT)
        for ob in nl.sequential_range(OUT_BLOCKS):
            o0 = ob * OUT_TILE
            ow = min(OUT_TILE, D_OUT - o0)
            ws = w_loads % BUFS
            w_loads += 1
            for s in nl.affine_range(K_SLABS):
                r = min(P, D_IN - s * P)
                nisa.dma_copy(dst=w_sb[0:r, ws, s, 0:ow], src=W[e, s * P:s * P + r, o0:o0 + ow])
            oset = out_sets % PSUM_SETS
            out_sets += 1
            for ts in nl.sequential_range((len(rows) + P - 1) // P):
                r0 = ts * P
                n = min(P, len(rows) - r0)
                out = o_sb[0:n, stages % 2, 0:ow]
                stages += 1
                for ci in nl.sequential_range((ow + MM_N - 1) // MM_N):
                    c0 = ci * MM_N
                    cw = min(MM_N, ow - c0)
                    ps = ps_psum[0:n, (oset * T_SUBS + ts) * OUT_BANKS + ci, 0:cw]
                    for s in nl.affine_range(K_SLABS):  # accumulates over d_in in PSUM
                        r = min(P, D_IN - s * P)
                        nisa.nc_matmul(dst=ps, stationary=xT[0:r, xs, s, r0:r0 + n],
                                       moving=w_sb[0:r, ws, s, c0:c0 + cw], accumulate=s > 0)
                    nisa.tensor_scalar(dst=out[:, c0:c0 + cw], data=ps, op0=nl.multiply,
                                       operand0=p_sb[0:n, xs, ts, :], engine=EVICT)
                # the rows to their (token, slot) partials: one indirect scatter
                nisa.dma_copy(dst=part.ap(pattern=[[D_OUT, n], [1, ow]], offset=o0,
                              vector_offset=idx_sb[0:n, xs, ts, 1:2], indirect_dim=0), src=out)
        routed += len(rows)
    # the combine: y = the sum of each token's top_k partials (fp32, the last add in DT)
    part_rows = part.reshape((TOKENS, TOP_K, D_OUT))
    for t0 in nl.sequential_range(0, TOKENS, P):
        tr = min(P, TOKENS - t0)
        for ob in nl.sequential_range(OUT_BLOCKS):
            o0 = ob * OUT_TILE
            ow = min(OUT_TILE, D_OUT - o0)
            nisa.dma_copy(dst=cb[0:tr, 0:TOP_K, 0:ow], src=part_rows[t0:t0 + tr, 0:TOP_K, o0:o0 + ow])
            acc = y_sb[0:tr, 0:ow] if TOP_K == 2 else acc_sb[0:tr, 0:ow]
            nisa.tensor_tensor(dst=acc, data1=cb[0:tr, 0, 0:ow], data2=cb[0:tr, 1, 0:ow], op=nl.add, engine=COMBINE)
            for j in nl.sequential_range(2, TOP_K):
                dst = y_sb[0:tr, 0:ow] if j == TOP_K - 1 else acc
                nisa.tensor_tensor(dst=dst, data1=acc, data2=cb[0:tr, j, 0:ow], op=nl.add, engine=COMBINE)
            nisa.dma_copy(dst=y[t0:t0 + tr, o0:o0 + ow], src=y_sb[0:tr, 0:ow])
    return y


EXPERT_OF = [[1, 6], [7, 5], [6, 4], [4, 2], [2, 0], [2, 3], [3, 0], [1, 3], [5, 4], [1, 0], [2, 0], [0, 5], [0, 1], [1, 3], [0, 6], [3, 0], [7, 1], [0, 5], [6, 0], [1, 4], [4, 0], [6, 4], [7, 0], [0, 2], [4, 3], [6, 1], [2, 3], [7, 1], [4, 2], [5, 2], [3, 1], [7, 4], [7, 1], [1, 5], [0, 6], [6, 2], [1, 5], [5, 1], [2, 3], [0, 1], [6, 7], [2, 1], [5, 3], [2, 6], [3, 1], [4, 2], [5, 0], [5, 2]]  # [token][slot]

def reference(x, W, router_weights, routing):
    """y in float64, from the same inputs (the routing is EXPERT_OF's)."""
    x = x.astype(np.float64)
    y = np.zeros((TOKENS, D_OUT))
    for t in range(TOKENS):
        for j in range(TOP_K):
            y[t] += router_weights[t, j] * (x[t] @ W[EXPERT_OF[t][j]].astype(np.float64))
    return {"y": y}
