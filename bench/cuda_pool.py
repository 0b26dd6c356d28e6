"""The device's default stream-ordered memory pool (cudaMallocAsync), read
through the driver API: lik's CUDA scratch comes from it in a context with
cuda_off "pool" (by default from lik's own pool), torch's caching
allocator does not, so a step's peak is torch's peak plus this pool's
high-water mark.  Used by bench/gpu_train.py and tests/gpu."""

import ctypes
import functools

_USED_MEM_HIGH = 8  # CU_MEMPOOL_ATTR_USED_MEM_HIGH (cuda.h)


@functools.cache
def _driver():
    return ctypes.CDLL("libcuda.so.1")


def _pool(device: int):
    pool = ctypes.c_void_p()
    if _driver().cuDeviceGetDefaultMemPool(ctypes.byref(pool), ctypes.c_int(device)):
        raise RuntimeError("cuDeviceGetDefaultMemPool failed")
    return pool


def pool_reset(device: int = 0) -> None:
    """Restarts the high-water mark from the pool's current use."""
    zero = ctypes.c_uint64(0)
    if _driver().cuMemPoolSetAttribute(_pool(device), _USED_MEM_HIGH, ctypes.byref(zero)):
        raise RuntimeError("cuMemPoolSetAttribute failed")


def pool_high(device: int = 0) -> int:
    """Bytes: the most the pool held since the last pool_reset."""
    v = ctypes.c_uint64(0)
    if _driver().cuMemPoolGetAttribute(_pool(device), _USED_MEM_HIGH, ctypes.byref(v)):
        raise RuntimeError("cuMemPoolGetAttribute failed")
    return v.value
