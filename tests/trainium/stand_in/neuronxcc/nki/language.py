"""neuronxcc.nki.language, the stand-in: numpy tiles with NKI's names."""
import numpy as np

float32 = np.float32
bfloat16 = np.float32  # numpy has no bf16; the tests use fp32
int32 = np.int32
shared_hbm = "shared_hbm"
sbuf = "sbuf"
psum = "psum"


class tile_size:
    pmax = 128  # partition dimension of SBUF/PSUM tiles
    psum_fmax = 512  # free dimension of a matmul result in PSUM


class _state:
    tracing = False  # set while the stand-in "compiler" traces a kernel
    cost_ns = 0.0  # the latency model: what the traced ops would take


class CompilerError(Exception):
    pass


def _check_tile(shape, what):
    if len(shape) >= 1 and shape[0] > tile_size.pmax:
        raise CompilerError(
            f"[NKI stand-in] {what}: partition dimension {shape[0]} exceeds "
            f"nl.tile_size.pmax ({tile_size.pmax})")


def ndarray(shape, dtype=np.float32, buffer=None):
    if buffer != shared_hbm:
        _check_tile(shape, "ndarray")
    return np.zeros(shape, dtype=dtype)


def zeros(shape, dtype=np.float32, buffer=None):
    return ndarray(shape, dtype, buffer)


def affine_range(n):
    return range(int(n))


def load(src):
    tile = np.array(src, dtype=np.float32)
    _check_tile(tile.shape, "load")
    _state.cost_ns += 200 + tile.size * 0.05  # one DMA: fixed cost + bytes
    return tile


def store(dst, value):
    value = np.asarray(value)
    _state.cost_ns += 200 + value.size * 0.05
    dst[...] = value


def matmul(x, y, transpose_x=False):
    x = x.T if transpose_x else x
    _check_tile(x.shape, "matmul stationary")
    if y.shape[-1] > tile_size.psum_fmax:
        raise CompilerError(
            f"[NKI stand-in] matmul: free dimension {y.shape[-1]} exceeds "
            f"nl.tile_size.psum_fmax ({tile_size.psum_fmax})")
    _state.cost_ns += 64 + x.shape[0] * y.shape[-1] * x.shape[1] / 4096.0
    return np.matmul(x.astype(np.float32), y.astype(np.float32))


def add(x, y):
    _state.cost_ns += 60 + np.asarray(x).size / 256.0
    return np.add(x, y)
