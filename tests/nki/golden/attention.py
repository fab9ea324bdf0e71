# attention.py: an NKI kernel emitted by tessel 0.1.0 (tessel emit).
# space     sim_attention (examples/sim_attention.tsl)
# config    {"dma_order":["q","k","v"],"kv_bufs":2,"kv_tile":128,"q_tile":128,"rescale":"eager","rescale_every":null,"skip_masked":true}
# target    trn2
# computes  O = softmax(Q^T K / sqrt(d), causal) V with Q, K given as [d, seq], one head
#
# The schedule is the simulator's plan of this config (docs/nki.md). It has been
# checked on tessel's NKI interpreter (tests/nki/), never compiled by neuronx-cc or
# run on a NeuronCore.

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

# --- the plan ---------------------------------------------------------------
SEQ = 512                    # sequence length
D = 128                      # head_dim (the contraction of Q^T K, on the partitions)
P = 128                      # partitions (nl.tile_size.pmax)
Q_TILE = 128                 # q_tile: rows of O per q tile
KV_TILE = 128                # kv_tile: keys per kv tile
SUBS = 1                     # 128-row sub-tiles of a q tile
KV_BLOCKS = 1                # 128-key blocks of a kv tile (P V contraction)
Q_TILES = 4
KV_TILES = 4
KV_BUFS = 2                  # K and V tile slots (kv_bufs)
S_CHUNK = 512                # score columns per matmul (one PSUM bank)
BANK = 512                   # fp32 columns of a PSUM bank
S_COLS = 512                 # PSUM columns of a score tile (whole banks)
S_SETS = 5                   # score tiles in rotation
CAUSAL = True
SKIP_MASKED = True           # skip kv tiles wholly above the diagonal
RESCALE_EVERY = 1            # eager: correct every kv tile
LAZY_GUARD = 8.0             # lazy: correct early when the max grew by more than this (exponent)
SCALE = 0.08838834764831843  # 1 / sqrt(D)
MASK = -3.0e38               # added to masked scores: exp() of them is 0
DT = nl.bfloat16             # dtype of Q, K, V, P and O

INPUTS = {"Q": ((D, SEQ), "bfloat16"), "K": ((D, SEQ), "bfloat16"), "V": ((SEQ, D), "bfloat16")}
OUTPUTS = {"O": ((SEQ, D), "bfloat16")}
TOLERANCE = 0.015625  # the gate's, in units of |reference| + rms(reference)

# What the simulator timed: its lowering of this plan, counted (docs/nki.md, "Structure").
# The NKI interpreter counts the kernel the same way; the tests require equal counts.
STRUCTURE = {
    # instructions by (contraction, stationary free, moving free)
    "matmul": {(128, 128, 128): 20},
    # TensorE transposes by the input's (partitions, free)
    "transpose": {(128, 128): 10},
    # (transfers, bytes) per direction
    "dma": {"hbm->sbuf": (22, 720896), "sbuf->hbm": (4, 131072)},
    "psum_banks": 8,  # PSUM banks written
    "engines": {"tensor": 30, "vector": 70, "scalar": 16, "gpsimd": 5},  # instructions
}

@nki.jit
def attention_kernel(Q, K, V):
    O = nl.ndarray((SEQ, D), dtype=DT, buffer=nl.shared_hbm)
    q_sb = nl.ndarray((D, Q_TILE), dtype=DT, buffer=nl.sbuf)  # Q^T tile: [d, q]
    k_sb = nl.ndarray((D, KV_BUFS, KV_TILE), dtype=DT, buffer=nl.sbuf)  # K^T tiles: [d, key]
    v_sb = nl.ndarray((P, KV_BUFS, KV_BLOCKS, D), dtype=DT, buffer=nl.sbuf)  # V: [key, ..., d]
    # PSUM: two banks for the transposes of P, one for P V, then the score sets
    pt_psum = nl.ndarray((P, 2, BANK), dtype=nl.float32, buffer=nl.psum)
    o_psum = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.psum)  # P V of a kv tile
    s_psum = nl.ndarray((P, S_SETS, S_COLS), dtype=nl.float32, buffer=nl.psum)  # S
    s_sb = nl.ndarray((P, KV_TILE), dtype=nl.float32, buffer=nl.sbuf)  # masked scores
    p_sb = nl.ndarray((P, KV_TILE), dtype=DT, buffer=nl.sbuf)  # P in the input type
    pt_sb = nl.ndarray((P, P), dtype=DT, buffer=nl.sbuf)
    acc = nl.ndarray((P, SUBS, D), dtype=nl.float32, buffer=nl.sbuf)  # O_acc
    state = nl.ndarray((P, SUBS, 4), dtype=nl.float32, buffer=nl.sbuf)  # per sub-tile: two max slots, l
    tmp = nl.ndarray((P, 5), dtype=nl.float32, buffer=nl.sbuf)  # per-row scratch
    o_stage = nl.ndarray((P, D), dtype=DT, buffer=nl.sbuf)
    diag = nisa.iota(nl.arange(KV_TILE)[None, :] - nl.arange(P)[:, None], dtype=nl.float32)  # key - row

    # trace-time state: the K/V tile in its slot, the score sets, the transposes' banks
    kv_last, units, transposes = None, 0, 0
    for qt in nl.affine_range(Q_TILES):  # q tiles
        q0 = qt * Q_TILE
        qn = min(Q_TILE, SEQ - q0)
        nisa.dma_copy(dst=q_sb[0:D, 0:qn], src=Q[0:D, q0:q0 + qn])
        kv_count = KV_TILES
        if SKIP_MASKED:  # the kv tiles this q tile attends to
            kv_count = min(KV_TILES, (q0 + qn + KV_TILE - 1) // KV_TILE)
        for idx in nl.sequential_range(kv_count):  # carries max, sum and O_acc
            k0 = idx * KV_TILE
            kn = min(KV_TILE, SEQ - k0)
            slot = idx % KV_BUFS
            if idx != kv_last:  # dma_order q, k, v: K and V load in that order
                kv_last = idx
                nisa.dma_copy(dst=k_sb[0:D, slot, 0:kn], src=K[0:D, k0:k0 + kn])
                for b in nl.affine_range((kn + P - 1) // P):
                    bn = min(P, kn - b * P)
                    nisa.dma_copy(dst=v_sb[0:bn, slot, b, 0:D], src=V[k0 + b * P:k0 + b * P + bn, 0:D])
            for sub in nl.affine_range(SUBS):
                r0 = sub * P
                if r0 >= qn:
                    continue
                rn = min(P, qn - r0)
                zs = units % S_SETS
                units += 1
                cur, old = state[0:rn, sub, idx % 2:idx % 2 + 1], state[0:rn, sub, (idx + 1) % 2:(idx + 1) % 2 + 1]
                l = state[0:rn, sub, 2:3]
                tile_max, row_sum, alpha, bias, diff = (tmp[0:rn, i:i + 1] for i in range(5))
                # S = Q^T K in fp32 PSUM, S_CHUNK keys per matmul
                for c in nl.affine_range((kn + S_CHUNK - 1) // S_CHUNK):
                    cw = min(S_CHUNK, kn - c * S_CHUNK)
                    nisa.nc_matmul(dst=s_psum[0:rn, zs, c * S_CHUNK:c * S_CHUNK + cw], stationary=q_sb[0:D, r0:r0 + rn],
                                   moving=k_sb[0:D, slot, c * S_CHUNK:c * S_CHUNK + cw], accumulate=False)
                scores = s_psum[0:rn, zs, 0:kn]
                if k0 + kn - 1 > q0 + r0:  # the tile crosses the diagonal: mask key > row
                    nisa.tensor_scalar(dst=s_sb[0:rn, 0:kn], data=diag[0:rn, 0:kn], op0=nl.greater,
                                       operand0=float(q0 + r0 - k0), op1=nl.multiply, operand1=MASK, engine=nisa.engine.gpsimd)
                    nisa.tensor_tensor(dst=s_sb[0:rn, 0:kn], data1=s_sb[0:rn, 0:kn], data2=scores, op=nl.add,
                   engine=nisa.engine.vector)
                    scores = s_sb[0:rn, 0:kn]
                if idx == 0:
                    nisa.tensor_reduce(dst=cur, op=nl.max, data=scores, axis=1, keepdims=True)
                else:
                    nisa.tensor_reduce(dst=tile_max, op=nl.max, data=scores, axis=1, keepdims=True)
                    nisa.tensor_tensor(dst=cur, data1=old, data2=tile_max, op=nl.maximum, engine=nisa.engine.vector)
                nisa.tensor_scalar(dst=bias, data=cur, op0=nl.multiply, operand0=-SCALE, engine=nisa.engine.vector)
                if idx > 0:  # O_acc *= exp((old max - new max) * SCALE)
                    nisa.activation(dst=alpha, op=nl.exp, data=old, scale=SCALE, bias=bias)
                    nisa.tensor_scalar(dst=acc[0:rn, sub, :], data=acc[0:rn, sub, :], op0=nl.multiply, operand0=alpha,
                   engine=nisa.engine.vector)
                # P = exp((S - max) * SCALE) in DT, its row sum in fp32 (ScalarE)
                nisa.activation(dst=p_sb[0:rn, 0:kn], op=nl.exp, data=scores, scale=SCALE, bias=bias,
                                reduce_op=nl.add, reduce_res=l if idx == 0 else row_sum, reduce_cmd=nisa.reduce_cmd.reset_reduce)
                if idx > 0:  # l = l * alpha + row_sum
                    nisa.scalar_tensor_tensor(dst=l, data=l, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=row_sum)
                # O_part = P V: P transposed on TensorE a 128-key block at a time, accumulated in PSUM
                blocks = (kn + P - 1) // P
                for b in nl.affine_range(blocks):
                    bn = min(P, kn - b * P)
                    pt = transposes % 2
                    transposes += 1
                    nisa.nc_transpose(dst=pt_psum[0:bn, pt, 0:rn], data=p_sb[0:rn, b * P:b * P + bn])
                    nisa.tensor_copy(dst=pt_sb[0:bn, 0:rn], src=pt_psum[0:bn, pt, 0:rn], engine=nisa.engine.vector)
                    nisa.nc_matmul(dst=o_psum[0:rn, 0:D], stationary=pt_sb[0:bn, 0:rn], moving=v_sb[0:bn, slot, b, 0:D],
                                   accumulate=b > 0)
                if idx == 0:
                    nisa.tensor_copy(dst=acc[0:rn, sub, :], src=o_psum[0:rn, 0:D], engine=nisa.engine.vector)
                else:
                    nisa.tensor_tensor(dst=acc[0:rn, sub, :], data1=acc[0:rn, sub, :], data2=o_psum[0:rn, 0:D], op=nl.add,
                   engine=nisa.engine.vector)
                if idx == kv_count - 1:  # O = O_acc / l
                    nisa.reciprocal(dst=row_sum, data=l)
                    nisa.tensor_scalar(dst=o_stage[0:rn, 0:D], data=acc[0:rn, sub, :], op0=nl.multiply, operand0=row_sum,
                   engine=nisa.engine.vector)
                    nisa.dma_copy(dst=O[q0 + r0:q0 + r0 + rn, 0:D], src=o_stage[0:rn, 0:D])
    return O


def reference(Q, K, V):
    """O in float64, from the same inputs."""
    s = Q.astype(np.float64).T @ K.astype(np.float64) * SCALE
    if CAUSAL:
        s = np.where(np.tri(SEQ, dtype=bool), s, -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return {"O": (e @ V.astype(np.float64)) / e.sum(axis=1, keepdims=True)}
