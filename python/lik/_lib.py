"""Private ctypes layer over the C API in ``include/lik.h``.

Everything that touches ctypes lives here:

* locating and loading ``liblik.so`` (next to this file, else ``$LIK_LIBRARY``),
* the ``lik_tensor`` / ``lik_options`` structures,
* building a ``lik_tensor`` view of a numpy array or a torch tensor without
  copying (pointer + shape + strides in elements),
* turning a ``lik_status`` into a Python exception carrying
  ``lik_last_error()``,
* one thin wrapper per C entry point (:func:`call_maxsim`,
  :func:`call_maxsim_pairs`, :func:`call_retrieve`) that takes already
  allocated outputs.

The public functions in :mod:`lik._api` decide shapes, allocate outputs and
call these wrappers; an autograd layer (torch.library custom ops) can call the
same wrappers, e.g. ``call_maxsim(..., argmax=buf)`` to get the saved argmax.
"""

from __future__ import annotations

import ctypes
import operator
import os
import struct
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

try:  # torch is optional
    import torch as _torch
except ImportError:  # pragma: no cover - exercised only without torch
    _torch = None

# isinstance(x, _Tensor) is is_torch(x) without a call (the hot paths use it)
_Tensor = _torch.Tensor if _torch is not None else ()

# ---- constants mirrored from lik.h -------------------------------------------

LIK_MAX_DIMS = 4

LIK_OK = 0
LIK_ERR_NULL = 1
LIK_ERR_SHAPE = 2
LIK_ERR_DTYPE = 3
LIK_ERR_VALUE = 4
LIK_ERR_DEVICE = 5
LIK_ERR_ALLOC = 6
LIK_ERR_UNSUPPORTED = 7
LIK_ERR_CUDA = 8

LIK_F32, LIK_F16, LIK_BF16, LIK_F64, LIK_BOOL, LIK_U8, LIK_I32, LIK_I64 = range(8)
LIK_I8, LIK_F8E4M3, LIK_F8E5M2 = 8, 9, 10  # low-bit embeddings (lik_experimental.h)

LIK_CPU = 1
LIK_CUDA = 2

BACKWARD_CODES = {"auto": 0, "unified": 1, "lowmem": 2}


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1
#: lik_plaid_index_search's largest top_k (src/api/plaid_index.c).
PLAID_MAX_TOP_K = 2**40


def int_arg(value, name: str, lo: int | None = INT64_MIN, hi: int | None = INT64_MAX) -> int:
    """An integer argument, checked once before it reaches C: an ``int`` (or
    anything with ``__index__``, numpy integers included; not a bool) in
    ``[lo, hi]`` -- by default int64's range, the C type of lik's counts, so
    that nothing wraps modulo 2**64 on its way into ctypes (``lo`` / ``hi``
    None: no bound on that side, for arguments the caller clamps).

    Raises:
        TypeError: not an integer, or a bool (message: the name, the type).
        ValueError: outside ``[lo, hi]`` (message: the name, the value, the range).
    """
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected an int, got bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}") from None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
        raise ValueError(f"{name}: {v} is outside {rng}")
    return v


def check_backward(backward) -> str:
    """A ``backward=`` argument: one of BACKWARD_CODES, None meaning "auto"."""
    if backward is None:
        return "auto"
    if backward not in BACKWARD_CODES:
        raise ValueError(f"backward= must be one of {tuple(BACKWARD_CODES)} or None, got {backward!r}")
    return backward

_NP_DTYPES = {
    np.dtype(np.float32): LIK_F32,
    np.dtype(np.float16): LIK_F16,
    np.dtype(np.float64): LIK_F64,
    np.dtype(np.bool_): LIK_BOOL,
    np.dtype(np.uint8): LIK_U8,
    np.dtype(np.int32): LIK_I32,
    np.dtype(np.int64): LIK_I64,
    np.dtype(np.int8): LIK_I8,
}

if _torch is not None:
    _TORCH_DTYPES = {
        _torch.float32: LIK_F32,
        _torch.float16: LIK_F16,
        _torch.bfloat16: LIK_BF16,
        _torch.float64: LIK_F64,
        _torch.bool: LIK_BOOL,
        _torch.uint8: LIK_U8,
        _torch.int32: LIK_I32,
        _torch.int64: LIK_I64,
        _torch.int8: LIK_I8,
        _torch.float8_e4m3fn: LIK_F8E4M3,
        _torch.float8_e5m2: LIK_F8E5M2,
    }
else:  # pragma: no cover
    _TORCH_DTYPES = {}

_SUPPORTED_NAMES = ("float32, float16, bfloat16 (torch), float64; masks bool or uint8; "
                    "int32 / int64 for lengths, offsets and indices; "
                    "int8, float8_e4m3fn / float8_e5m2 (torch) for low-bit MaxSim")


# ---- structures ------------------------------------------------------------


class LikTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * LIK_MAX_DIMS),
        ("strides", ctypes.c_int64 * LIK_MAX_DIMS),
        ("device", ctypes.c_int),
        ("device_id", ctypes.c_int32),
    ]


class LikOptions(ctypes.Structure):
    _fields_ = [
        ("normalize", ctypes.c_int),
        ("num_threads", ctypes.c_int),
        ("stream", ctypes.c_void_p),
        ("backward", ctypes.c_int),
        ("max_seqlen_q", ctypes.c_int64),
        ("context", ctypes.c_void_p),
        ("q_lengths", ctypes.c_void_p),
        ("d_lengths", ctypes.c_void_p),
        ("fp32_precision", ctypes.c_int),
    ]


class LikContextOptions(ctypes.Structure):
    _fields_ = [
        ("num_threads", ctypes.c_int),
        ("cpu_isa", ctypes.c_char_p),
        ("cuda_off", ctypes.c_uint),
    ]


_PT = ctypes.POINTER(LikTensor)
_PO = ctypes.POINTER(LikOptions)

# ---- loading -----------------------------------------------------------------

_LIB_NAMES = {
    "linux": ("liblik.so",),
    "darwin": ("liblik.dylib", "liblik.so"),
    "win32": ("lik.dll", "liblik.dll"),
}.get(sys.platform, ("liblik.so",))


def _find_library() -> str:
    here = Path(__file__).resolve().parent
    for name in _LIB_NAMES:
        cand = here / name
        if cand.is_file():
            return str(cand)
    env = os.environ.get("LIK_LIBRARY")
    if env:
        p = Path(env)
        if p.is_dir():
            for name in _LIB_NAMES:
                if (p / name).is_file():
                    return str(p / name)
        if p.is_file():
            return str(p)
        raise ImportError(f"lik: LIK_LIBRARY={env!r} is not a file or a folder holding {_LIB_NAMES[0]}")
    raise ImportError(
        f"lik: the C library {_LIB_NAMES[0]} was not found next to {here} and LIK_LIBRARY is not set. "
        "Install the package with `pip install .`, or build it with "
        "`cmake -B build && cmake --build build` and set LIK_LIBRARY=build/liblik.so."
    )


library_path = _find_library()
try:
    lib = ctypes.CDLL(library_path)
except OSError as exc:  # pragma: no cover
    raise ImportError(f"lik: cannot load {library_path}: {exc}") from exc

lib.lik_version_number.restype = ctypes.c_int
lib.lik_version_number.argtypes = []
lib.lik_version_string.restype = ctypes.c_char_p
lib.lik_version_string.argtypes = []
lib.lik_status_string.restype = ctypes.c_char_p
lib.lik_status_string.argtypes = [ctypes.c_int]
lib.lik_last_error.restype = ctypes.c_char_p
lib.lik_last_error.argtypes = []
lib.lik_cpu_isa.restype = ctypes.c_char_p
lib.lik_cpu_isa.argtypes = []
for _fn in ("lik_maxsim", "lik_maxsim_pairs"):
    getattr(lib, _fn).restype = ctypes.c_int
    getattr(lib, _fn).argtypes = [_PT, _PT, _PT, _PT, _PO, _PT, _PT]
lib.lik_retrieve.restype = ctypes.c_int
lib.lik_context_create.restype = ctypes.c_int
lib.lik_context_create.argtypes = [ctypes.POINTER(LikContextOptions), ctypes.POINTER(ctypes.c_void_p)]
lib.lik_context_free.restype = None
lib.lik_context_free.argtypes = [ctypes.c_void_p]
lib.lik_retrieve.argtypes = [_PT, _PT, _PT, _PT, ctypes.c_int64, _PO, _PT, _PT]
lib.lik_topk_merge.restype = ctypes.c_int
lib.lik_topk_merge.argtypes = [_PT, _PT, _PT, ctypes.c_int64, _PO, _PT, _PT]


def version_string() -> str:
    return lib.lik_version_string().decode()


def version_number() -> int:
    return int(lib.lik_version_number())


def cpu_isa() -> str:
    return lib.lik_cpu_isa().decode()


# ---- errors ------------------------------------------------------------------

_EXC = {
    LIK_ERR_NULL: ValueError,
    LIK_ERR_SHAPE: ValueError,
    LIK_ERR_VALUE: ValueError,
    LIK_ERR_DEVICE: ValueError,
    LIK_ERR_DTYPE: TypeError,
}


class LikError(RuntimeError):
    """Raised for library failures that are not the caller's argument error
    (allocation failure, unsupported request, CUDA runtime error)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def check(status: int) -> None:
    """Raise the exception for a non-OK ``lik_status``.

    SHAPE / VALUE / NULL / DEVICE -> ValueError, DTYPE -> TypeError, others ->
    :class:`LikError` (a RuntimeError).  The message is ``lik_last_error()``
    (which names the argument and the sizes), else the status name.
    """
    if status == LIK_OK:
        return
    msg = (lib.lik_last_error() or b"").decode(errors="replace")
    if not msg:
        msg = lib.lik_status_string(status).decode()
    exc = _EXC.get(status)
    if exc is None:
        raise LikError(msg, status)
    raise exc(msg)


# ---- threads -----------------------------------------------------------------

_num_threads = 0
_nt_lock = threading.Lock()


def set_num_threads(n: int) -> None:
    global _num_threads
    n = int_arg(n, "set_num_threads: n (0 = $LIK_NUM_THREADS or all cores)", 0, INT32_MAX)
    with _nt_lock:
        _num_threads = n


def get_num_threads() -> int:
    return _num_threads


_CUDA_FEATURES = {"wgmma": 1, "split": 2, "bulk": 4, "bw_sparse": 8, "bw_buckets": 16, "pool": 32, "bw_ranges": 64}  # LIK_CUDA_NO_* (lik_experimental.h)
_current = threading.local()


class Context:
    """A lik context (``lik_context``, ``lik_experimental.h``): what calls read
    of their environment, resolved once, plus cached CUDA device properties.

    Use it as a context manager: calls made by this thread inside ``with ctx:``
    run in it; outside, calls use the process's default context (made on first
    use from ``LIK_NUM_THREADS``, ``LIK_CPU_ISA`` and ``LIK_CUDA_WGMMA`` /
    ``LIK_CUDA_SPLIT`` / ``LIK_CUDA_BULK`` / ``LIK_CUDA_BW_SPARSE`` /
    ``LIK_CUDA_BW_BUCKETS`` / ``LIK_CUDA_POOL`` / ``LIK_CUDA_BW_RANGES``, read
    once).

    Args:
        num_threads: int >= 0, CPU threads for calls (0: the default context's
            rule; :func:`lik.set_num_threads` still takes precedence).
        cpu_isa: ``None``, ``"portable"``, ``"avx2"``, ``"avx512"`` (x86-64),
            ``"neon"`` or ``"sve"`` (aarch64) (a path the CPU cannot run falls
            back to the best it can).
        cuda_off: names of CUDA features to turn off, of ``"wgmma"``,
            ``"split"``, ``"bulk"``, ``"bw_sparse"`` (the backward's
            CTA-per-document grad_D kernel), ``"bw_buckets"`` (grad_D by
            buckets of the transposed argmax), ``"bw_ranges"`` (grad_D by
            row ranges: a CTA per range of document rows); they exist to
            compare kernel families in tests: results agree, only speed
            differs.
            ``"pool"``: CUDA scratch from the device's default stream-ordered
            pool (``cudaMallocAsync``) instead of lik's own (one per device,
            kept for the process, up to 256 MiB reserved between calls;
            benches read the default pool's high-water mark).

    Raises:
        ValueError: a negative ``num_threads``, an unknown ISA or feature name.
    """

    def __init__(self, *, num_threads: int = 0, cpu_isa: str | None = None, cuda_off=()):
        bad = [f for f in cuda_off if f not in _CUDA_FEATURES]
        if bad:
            raise ValueError(f"Context: cuda_off: unknown feature(s) {bad}, expected some of {list(_CUDA_FEATURES)}")
        o = LikContextOptions()
        o.num_threads = int_arg(num_threads, "Context: num_threads", 0, INT32_MAX)
        o.cpu_isa = cpu_isa.encode() if cpu_isa is not None else None
        o.cuda_off = sum(_CUDA_FEATURES[f] for f in set(cuda_off))
        h = ctypes.c_void_p()
        check(lib.lik_context_create(ctypes.byref(o), ctypes.byref(h)))
        self._handle = h.value
        self._outer: list = []

    def __enter__(self) -> "Context":
        self._outer.append(getattr(_current, "handle", None))
        _current.handle = self._handle
        return self

    def __exit__(self, *exc) -> None:
        _current.handle = self._outer.pop()

    def __del__(self) -> None:
        h, self._handle = getattr(self, "_handle", None), None
        if h and lib is not None:
            lib.lik_context_free(h)


def flag(value, name: str) -> bool:
    """A bool argument (``normalize``, ``largest``, ...): bool or numpy bool,
    else TypeError (a string such as "False" would be truthy)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected a bool, got {type(value).__name__}")
    return bool(value)


def make_options(*, normalize: bool = False, backward: str = "auto", stream: int | None = None,
                 max_seqlen_q: int = 0, q_lengths=None, d_lengths=None, tf32: bool = False) -> LikOptions:
    """The lik_options struct from explicit values (:func:`call_options` is
    what a call uses: it takes the stream and the fp32 precision from torch).
    ``q_lengths`` / ``d_lengths`` (int32 arrays or None) are referenced by the
    returned object for as long as it lives."""
    o = LikOptions()
    o.normalize = 1 if flag(normalize, "normalize") else 0
    o.num_threads = _num_threads
    o.stream = stream
    o.backward = BACKWARD_CODES[backward]
    o.max_seqlen_q = max_seqlen_q
    o.context = getattr(_current, "handle", None)
    o.fp32_precision = 1 if tf32 else 0
    if q_lengths is not None or d_lengths is not None:
        o.keep = (view(q_lengths), view(d_lengths))
        o.q_lengths = ctypes.addressof(o.keep[0][1]) if q_lengths is not None else None
        o.d_lengths = ctypes.addressof(o.keep[1][1]) if d_lengths is not None else None
    return o


def call_options(like: Any = None, *, normalize: bool = False, backward: str = "auto", max_seqlen_q: int = 0,
                 q_lengths=None, d_lengths=None) -> LikOptions:
    """The lik_options of one C call whose tensors live where ``like`` does:
    every call of the package (padded, packed, retrieve, backward, residual,
    low-bit, head; numpy or torch) builds its options here, so all of them
    follow torch's state alike:

    * ``stream``: for a CUDA tensor, torch's current stream on its device
      (the C call is ordered with torch's work and captured in a CUDA graph);
    * ``fp32_precision``: :func:`tf32_of` -- fp32 CUDA tensors follow
      ``torch.get_float32_matmul_precision()`` (the library applies it to the
      forward and ignores it elsewhere);
    * threads and context: this thread's :func:`set_num_threads` /
      :class:`Context`.
    """
    return make_options(normalize=normalize, backward=backward, stream=cuda_stream_of(like),
                        max_seqlen_q=max_seqlen_q, q_lengths=q_lengths, d_lengths=d_lengths, tf32=tf32_of(like))


def tf32_of(x: Any) -> bool:
    """fp32 CUDA tensors follow torch.get_float32_matmul_precision(): "high" /
    "medium" allow TF32 (lik.h LIK_FP32_TF32), "highest" keeps fp32 accuracy."""
    return (is_torch(x) and x.is_cuda and x.dtype == _torch.float32
            and _torch.get_float32_matmul_precision() != "highest")


def lengths_arg(x: Any, name: str):
    """A q_lengths / d_lengths argument as int32 (None stays None).

    Any integer dtype but uint8 (a mask dtype); other integers are clamped
    to [-1, INT32_MAX] first, so an entry outside int32 stays out of range
    (the library's error on the CPU, its clamp on CUDA) instead of wrapping
    to a valid length.

    Raises:
        TypeError: not an array, or not of an integer dtype.
    """
    if x is None:
        return None
    if not is_array(x) or (is_torch(x) and x.layout != _torch.strided):
        check_array(x, name)  # raises: not an array, a sparse tensor
    if is_torch(x):
        integer = not (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype in (_torch.bool, _torch.uint8))
    else:
        integer = x.dtype.kind in "iu" and x.dtype != np.uint8
    if not integer:
        raise TypeError(f"{name}: dtype {dtype_name(x)} is not an integer dtype for lengths (int8 to int64, "
                        "uint16 to uint64; bool and uint8 are mask dtypes)")
    if is_torch(x):
        if x.dtype != _torch.int32:
            x = x.to(_torch.int64).clamp(-1, 2**31 - 1).to(_torch.int32)
    elif x.dtype != np.int32:
        info = np.iinfo(x.dtype)
        x = np.asarray(np.clip(x, max(info.min, -1), min(info.max, 2**31 - 1))).astype(np.int32)  # 0-d: an array
    check_array(x, name)
    return x


# ---- array kinds -------------------------------------------------------------


def is_torch(x: Any) -> bool:
    return isinstance(x, _Tensor)


def is_array(x: Any) -> bool:
    return isinstance(x, (np.ndarray, _Tensor))


def to_torch(x: Any):
    """numpy -> torch CPU tensor (zero-copy when strides allow)."""
    if x is None or isinstance(x, _Tensor):
        return x
    if any(s < 0 for s in x.strides) or not x.dtype.isnative:
        x = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))
    return _torch.from_numpy(x)


def check_array(x: Any, name: str, *, optional: bool = False) -> None:
    """Python-side checks the C library cannot do: not an array at all, more
    dims than a lik_tensor holds, a dtype with no lik_dtype code."""
    if x is None:
        if optional:
            return
        raise TypeError(f"{name}: expected a numpy array or torch tensor, got None")
    if not isinstance(x, (np.ndarray, _Tensor)):
        raise TypeError(f"{name}: expected a numpy array or torch tensor, got {type(x).__name__}")
    if x.ndim > LIK_MAX_DIMS:
        raise ValueError(f"{name}: ndim={x.ndim} exceeds the {LIK_MAX_DIMS} dims lik supports (shape {tuple(x.shape)})")
    if isinstance(x, _Tensor):
        if x.layout != _torch.strided or x.is_nested:
            kind = "nested tensors are" if x.is_nested else f"torch layout {x.layout} is"
            raise TypeError(f"{name}: {kind} not supported (dense strided tensors only)")
        if x.dtype not in _TORCH_DTYPES:
            raise TypeError(f"{name}: dtype {dtype_name(x)} is not supported ({_SUPPORTED_NAMES})")
        if not (x.is_cpu or x.is_cuda):
            raise ValueError(f"{name}: device {x.device} is not supported (all tensors must be on the same "
                             "device, cpu or cuda)")
    else:
        if x.dtype.newbyteorder("=") not in _NP_DTYPES:
            raise TypeError(f"{name}: dtype {dtype_name(x)} is not supported ({_SUPPORTED_NAMES})")


def _code(x: Any) -> int:
    return _TORCH_DTYPES[x.dtype] if is_torch(x) else _NP_DTYPES[x.dtype.newbyteorder("=")]


def is_mask(x: Any) -> bool:
    """Whether an array accepted by :func:`check_array` has a mask dtype (bool, uint8)."""
    return _code(x) in (LIK_BOOL, LIK_U8)


def dtype_name(x: Any) -> str:
    """The dtype of an array as lik names it ("float32", "bool", ...)."""
    return str(x.dtype).removeprefix("torch.")


def _np_view(x: np.ndarray) -> tuple[np.ndarray, LikTensor]:
    if not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    item = x.itemsize
    if any(s % item for s in x.strides):  # e.g. a field of a structured array
        x = np.ascontiguousarray(x)
    t = LikTensor()
    t.data = x.ctypes.data if x.size else None
    t.dtype = _code(x)
    t.ndim = x.ndim
    for i, (n, s) in enumerate(zip(x.shape, x.strides)):
        t.shape[i] = n
        t.strides[i] = s // item
    t.device = LIK_CPU
    t.device_id = 0
    return x, t


# lik_tensor's bytes: data, dtype, ndim, shape[4], strides[4], device, device_id
_TENSOR_BYTES = struct.Struct("<Qii4q4qii")
_PAD = ((0,) * 4, (0,) * 3, (0,) * 2, (0,), ())
if _TENSOR_BYTES.size != ctypes.sizeof(LikTensor):  # pragma: no cover - a build for another ABI
    raise ImportError(f"lik: lik_tensor is {ctypes.sizeof(LikTensor)} bytes, expected {_TENSOR_BYTES.size}")


def _torch_view(x) -> tuple[Any, LikTensor]:
    # one pack_into instead of a field assignment each: a warm call's host
    # cost is mostly building these views (bench/host_cost.py)
    if x.is_neg():  # a view whose memory holds -x (x.conj().imag): read its values
        x = x.resolve_neg()
    t = LikTensor()
    shape, strides = x.shape, x.stride()
    pad = _PAD[len(shape)]
    _TENSOR_BYTES.pack_into(t, 0, x.data_ptr() if x.numel() else 0, _TORCH_DTYPES[x.dtype], len(shape),
                            *shape, *pad, *strides, *pad, LIK_CUDA if x.is_cuda else LIK_CPU,
                            max(x.get_device(), 0))
    return x, t


def view(x: Any) -> tuple[Any, LikTensor | None]:
    """(keep-alive object, lik_tensor) for a numpy array / torch tensor / None.

    The first element must stay referenced for the duration of the C call.
    """
    if x is None:
        return None, None
    if isinstance(x, _Tensor):
        return _torch_view(x)
    return _np_view(x)


def _ptr(t: LikTensor | None):
    return ctypes.byref(t) if t is not None else None


def cuda_stream_of(x: Any) -> int | None:
    if is_torch(x) and x.is_cuda:
        return _torch._C._cuda_getCurrentRawStream(x.get_device())
    return None


def can_read_back(x: Any) -> bool:
    """Whether a call may read the values of torch tensor ``x`` on the host
    now: not while torch.compile traces (fake tensors have no values), and
    for a CUDA tensor not while a CUDA graph is captured on the current
    stream (a device -> host copy would break the capture).  The host-side
    checks and reads of the package ask here, and are skipped (or replaced
    by an argument the caller passed) where it says no."""
    return not (_torch.compiler.is_compiling() or (x.is_cuda and _torch.cuda.is_current_stream_capturing()))


# ---- calls ---------------------------------------------------------------------


def _run(fn, Q, D, q_mask, d_mask, opts, extra, out1, out2):
    views = [view(x) for x in (Q, D, q_mask, d_mask, out1, out2)]  # referenced until the call returns
    p = [_ptr(t) for _, t in views]
    check(fn(p[0], p[1], p[2], p[3], *extra, ctypes.byref(opts), p[4], p[5]))


def call_maxsim(Q, D, q_mask, d_mask, scores, argmax=None, *, normalize=False, backward="auto",
                q_lengths=None, d_lengths=None) -> None:
    """lik_maxsim into caller-allocated ``scores`` (F32) and optional ``argmax``
    (I32); ``q_lengths`` / ``d_lengths``: None or int32 (lik_options)."""
    opts = call_options(Q, normalize=normalize, backward=backward, q_lengths=q_lengths, d_lengths=d_lengths)
    _run(lib.lik_maxsim, Q, D, q_mask, d_mask, opts, [], scores, argmax)


def call_maxsim_pairs(Q, D, q_mask, d_mask, scores, argmax=None, *, normalize=False, backward="auto",
                      q_lengths=None, d_lengths=None) -> None:
    """lik_maxsim_pairs into caller-allocated ``scores`` [B] and optional ``argmax`` [B, Lq]."""
    opts = call_options(Q, normalize=normalize, backward=backward, q_lengths=q_lengths, d_lengths=d_lengths)
    _run(lib.lik_maxsim_pairs, Q, D, q_mask, d_mask, opts, [], scores, argmax)


def call_retrieve(Q, D, q_mask, d_mask, top_k: int, scores, indices, *, normalize=True) -> None:
    """lik_retrieve into caller-allocated ``scores`` (F32) and ``indices`` (I64)."""
    opts = call_options(Q, normalize=normalize)
    _run(lib.lik_retrieve, Q, D, q_mask, d_mask, opts, [ctypes.c_int64(top_k)], scores, indices)


# ---- residual codec and compressed scoring (include/lik_experimental.h) ---------

RESIDUAL_LAYOUTS = {"colbert": 0, "lik": 1}


class LikCodec(ctypes.Structure):
    _fields_ = [
        ("centroids", _PT),
        ("bucket_cutoffs", _PT),
        ("bucket_weights", _PT),
        ("nbits", ctypes.c_int),
        ("layout", ctypes.c_int),
    ]


_PC = ctypes.POINTER(LikCodec)
lib.lik_codec_train.restype = ctypes.c_int
lib.lik_codec_train.argtypes = [_PT, ctypes.c_int, _PT, _PT]
lib.lik_codec_compress.restype = ctypes.c_int
lib.lik_codec_compress.argtypes = [_PC, _PT, _PO, _PT, _PT]
lib.lik_codec_decompress.restype = ctypes.c_int
lib.lik_codec_decompress.argtypes = [_PC, _PT, _PT, _PO, _PT]
for _fn in ("lik_maxsim_residual", "lik_maxsim_residual_varlen"):
    getattr(lib, _fn).restype = ctypes.c_int
    getattr(lib, _fn).argtypes = [_PT, _PC, _PT, _PT, _PT, _PO, _PT, _PT]
lib.lik_plaid_approx_score.restype = ctypes.c_int
lib.lik_plaid_approx_score.argtypes = [_PT, _PT, _PT, _PO, _PT]


def _views(keep, *xs):
    """lik_tensor pointers (or None) for arrays; the views stay alive in keep."""
    out = []
    for x in xs:
        k, t = view(x)
        keep.append((k, t))
        out.append(ctypes.byref(t) if t is not None else None)
    return out


def _make_codec(keep, centroids, cutoffs, weights, nbits: int, layout: str) -> LikCodec:
    c = LikCodec()
    for field, x in (("centroids", centroids), ("bucket_cutoffs", cutoffs), ("bucket_weights", weights)):
        k, t = view(x)
        keep.append((k, t))
        setattr(c, field, ctypes.pointer(t) if t is not None else None)
    c.nbits = nbits
    c.layout = RESIDUAL_LAYOUTS[layout]
    return c


def call_codec_train(residuals, nbits: int, cutoffs, weights) -> None:
    """lik_codec_train into caller-allocated F32 ``cutoffs`` / ``weights``."""
    keep = []
    check(lib.lik_codec_train(*_views(keep, residuals), nbits, *_views(keep, cutoffs, weights)))


def call_codec_compress(X, centroids, cutoffs, nbits: int, layout: str, codes, residuals) -> None:
    """lik_codec_compress into caller-allocated ``codes`` [T] and ``residuals`` [T, d*nbits/8]."""
    keep = []
    codec = _make_codec(keep, centroids, cutoffs, None, nbits, layout)
    opts = call_options(X)
    check(lib.lik_codec_compress(ctypes.byref(codec), *_views(keep, X), ctypes.byref(opts),
                                 *_views(keep, codes, residuals)))


def call_codec_decompress(codes, residuals, centroids, weights, nbits: int, layout: str, out, *,
                          normalize: bool) -> None:
    """lik_codec_decompress into caller-allocated ``out`` [T, d]."""
    keep = []
    codec = _make_codec(keep, centroids, None, weights, nbits, layout)
    opts = call_options(codes, normalize=normalize)
    check(lib.lik_codec_decompress(ctypes.byref(codec), *_views(keep, codes, residuals),
                                   ctypes.byref(opts), *_views(keep, out)))


def call_maxsim_residual(Q, codes, residuals, lengths, centroids, weights, nbits: int, layout: str,
                         scores, argmax=None, *, normalize: bool, packed: bool) -> None:
    """lik_maxsim_residual (``lengths`` = doc_lengths) or, with ``packed``,
    lik_maxsim_residual_varlen (``lengths`` = cu_seqlens_d)."""
    keep = []
    codec = _make_codec(keep, centroids, None, weights, nbits, layout)
    opts = call_options(Q, normalize=normalize)
    fn = lib.lik_maxsim_residual_varlen if packed else lib.lik_maxsim_residual
    q, c, r, n = _views(keep, Q, codes, residuals, lengths)
    check(fn(q, ctypes.byref(codec), c, r, n, ctypes.byref(opts), *_views(keep, scores, argmax)))


def call_plaid_approx(centroid_scores, codes, cu_seqlens_d, scores) -> None:
    """lik_plaid_approx_score into caller-allocated ``scores``."""
    keep = []
    opts = call_options(centroid_scores)
    cs, c, cu = _views(keep, centroid_scores, codes, cu_seqlens_d)
    check(lib.lik_plaid_approx_score(cs, c, cu, ctypes.byref(opts), *_views(keep, scores)))


def call_topk_merge(scores, indices, lengths, top_k: int, out_scores, out_indices) -> None:
    """lik_topk_merge (lik_experimental.h): R sorted candidate lists per query,
    ``scores`` F32 / ``indices`` I64 ``[R, Nq, K]``, optional ``lengths`` I64
    ``[R, Nq]`` (any strides), into caller-allocated ``out_scores`` F32 /
    ``out_indices`` I64 ``[Nq, top_k]`` (CPU arrays)."""
    opts = call_options()
    keep, tv = [], []
    for x in (scores, indices, lengths, out_scores, out_indices):
        k, t = view(x)
        keep.append(k)
        tv.append(t)
    check(lib.lik_topk_merge(_ptr(tv[0]), _ptr(tv[1]), _ptr(tv[2]), ctypes.c_int64(top_k),
                             ctypes.byref(opts), _ptr(tv[3]), _ptr(tv[4])))
    del keep


# ---- PLAID index (include/lik_experimental.h) ------------------------------------------

_PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


class LikPlaidBuildOptions(ctypes.Structure):
    _fields_ = [
        ("nbits", ctypes.c_int),
        ("kmeans_niters", ctypes.c_int),
        ("num_centroids", ctypes.c_int64),
        ("total_tokens", ctypes.c_int64),
        ("max_points_per_centroid", ctypes.c_int64),
        ("sample_docs", ctypes.c_int64),
        ("seed", ctypes.c_uint64),
        ("chunk_docs", ctypes.c_int64),
        ("num_threads", ctypes.c_int),
        ("context", ctypes.c_void_p),
        ("progress", _PROGRESS_FN),
        ("progress_user", ctypes.c_void_p),
        ("expand_centroids", ctypes.c_int),
        ("device", ctypes.c_int),
        ("device_id", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
    ]


class LikPlaidSearchParams(ctypes.Structure):
    _fields_ = [
        ("top_k", ctypes.c_int64),
        ("n_ivf_probe", ctypes.c_int64),
        ("n_full_scores", ctypes.c_int64),
        ("prune", ctypes.c_int),
        ("centroid_score_threshold", ctypes.c_float),
        ("num_threads", ctypes.c_int),
        ("context", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
    ]


class LikPlaidIndexInfo(ctypes.Structure):
    _fields_ = [
        ("num_docs", ctypes.c_int64),
        ("num_tokens", ctypes.c_int64),
        ("dim", ctypes.c_int64),
        ("num_centroids", ctypes.c_int64),
        ("num_chunks", ctypes.c_int64),
        ("nbits", ctypes.c_int),
        ("has_ivf", ctypes.c_int),
        ("num_deleted", ctypes.c_int64),
        ("next_id", ctypes.c_int64),
        ("device", ctypes.c_int),
        ("device_bytes", ctypes.c_int64),
    ]


_PBO = ctypes.POINTER(LikPlaidBuildOptions)
_PVP = ctypes.POINTER(ctypes.c_void_p)
lib.lik_plaid_index_build.restype = ctypes.c_int
lib.lik_plaid_index_build.argtypes = [_PT, _PT, _PBO, _PVP]
lib.lik_plaid_index_train.restype = ctypes.c_int
lib.lik_plaid_index_train.argtypes = [_PT, _PBO, _PVP]
lib.lik_plaid_index_add.restype = ctypes.c_int
lib.lik_plaid_index_add.argtypes = [ctypes.c_void_p, _PT, _PT, _PBO]
lib.lik_plaid_index_save.restype = ctypes.c_int
lib.lik_plaid_index_save.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _PT]
lib.lik_plaid_index_load.restype = ctypes.c_int
lib.lik_plaid_index_load.argtypes = [ctypes.c_char_p, ctypes.c_uint, _PVP]
lib.lik_plaid_index_search.restype = ctypes.c_int
lib.lik_plaid_index_search.argtypes = [ctypes.c_void_p, _PT, _PT, _PT, _PT,
                                       ctypes.POINTER(LikPlaidSearchParams), _PT, _PT]
lib.lik_plaid_index_get_info.restype = ctypes.c_int
lib.lik_plaid_index_get_info.argtypes = [ctypes.c_void_p, ctypes.POINTER(LikPlaidIndexInfo)]
lib.lik_plaid_index_free.restype = None
lib.lik_plaid_index_free.argtypes = [ctypes.c_void_p]
lib.lik_plaid_index_delete.restype = ctypes.c_int
lib.lik_plaid_index_delete.argtypes = [ctypes.c_void_p, _PT]
lib.lik_plaid_index_update.restype = ctypes.c_int
lib.lik_plaid_index_update.argtypes = [ctypes.c_void_p, _PT, _PT, _PT, _PBO]
lib.lik_plaid_index_compact.restype = ctypes.c_int
lib.lik_plaid_index_compact.argtypes = [ctypes.c_void_p]
lib.lik_plaid_index_get_ids.restype = ctypes.c_int
lib.lik_plaid_index_get_ids.argtypes = [ctypes.c_void_p, _PT]
lib.lik_plaid_index_set_metadata_db.restype = ctypes.c_int
lib.lik_plaid_index_set_metadata_db.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64]
lib.lik_plaid_index_get_metadata_db.restype = ctypes.c_int
lib.lik_plaid_index_get_metadata_db.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                                ctypes.POINTER(ctypes.c_int64)]
lib.lik_plaid_index_to_device.restype = ctypes.c_int
lib.lik_plaid_index_to_device.argtypes = [ctypes.c_void_p, ctypes.c_int]


def plaid_build_options(*, nbits=2, kmeans_niters=4, num_centroids=0, total_tokens=0,
                        max_points_per_centroid=256, sample_docs=0, seed=42, chunk_docs=25000,
                        progress=None, expand_centroids=False, device: int = -1) -> tuple[LikPlaidBuildOptions, Any]:
    """(options, keep-alive) for the PLAID build calls; ``progress(done, total)`` or None;
    ``expand_centroids`` (add only) a bool; ``device`` -1 (the CPU threads) or the CUDA
    device that runs the nearest-centroid search and the coding (on torch's current
    stream of that device when torch has CUDA, else the legacy default stream).

    Raises:
        TypeError: an option that is not an int (bool included).
        ValueError: nbits not 1, 2, 4 or 8; a count outside its C field's
            range (ctypes would wrap it, e.g. 2**32 to 0).  The library checks
            the rest (negative counts).
    """
    o = LikPlaidBuildOptions()
    counts = {"nbits": nbits, "kmeans_niters": kmeans_niters, "num_centroids": num_centroids,
              "total_tokens": total_tokens, "max_points_per_centroid": max_points_per_centroid,
              "sample_docs": sample_docs, "chunk_docs": chunk_docs}
    for name, value in counts.items():
        bits = 8 * ctypes.sizeof(dict(LikPlaidBuildOptions._fields_)[name])
        setattr(o, name, int_arg(value, name, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1))
    if nbits not in (1, 2, 4, 8):
        raise ValueError(f"nbits: {nbits}, must be 1, 2, 4 or 8")
    o.seed = int_arg(seed, "seed", 0, UINT64_MAX)
    o.expand_centroids = 1 if expand_centroids else 0
    o.num_threads = _num_threads
    o.context = getattr(_current, "handle", None)
    if device >= 0:
        o.device = 2  # LIK_CUDA
        o.device_id = device
        torch = _torch
        if torch is not None and torch.cuda.is_available() and device < torch.cuda.device_count():
            o.stream = torch.cuda.current_stream(device).cuda_stream or None
    cb = None
    if progress is not None:
        cb = _PROGRESS_FN(lambda _u, done, total: progress(int(done), int(total)))
        o.progress = cb
    return o, cb


def call_plaid_build(documents, cu_seqlens, options) -> int:
    """lik_plaid_index_build: returns the index handle."""
    keep = []
    h = ctypes.c_void_p()
    check(lib.lik_plaid_index_build(*_views(keep, documents, cu_seqlens), ctypes.byref(options),
                                    ctypes.byref(h)))
    return h.value


def call_plaid_train(sample, options) -> int:
    keep = []
    h = ctypes.c_void_p()
    check(lib.lik_plaid_index_train(*_views(keep, sample), ctypes.byref(options), ctypes.byref(h)))
    return h.value


def call_plaid_add(handle, documents, cu_seqlens, options) -> None:
    keep = []
    check(lib.lik_plaid_index_add(handle, *_views(keep, documents, cu_seqlens), ctypes.byref(options)))


def call_plaid_save(handle, path: str, doc_ids=None) -> None:
    keep = []
    check(lib.lik_plaid_index_save(handle, os.fsencode(path), *_views(keep, doc_ids)))


def call_plaid_load(path: str, verify: bool) -> int:
    h = ctypes.c_void_p()
    check(lib.lik_plaid_index_load(os.fsencode(path), 1 if verify else 0, ctypes.byref(h)))
    return h.value


def call_plaid_search(handle, Q, q_lengths, subset, subset_cu, params: LikPlaidSearchParams, scores,
                      ids) -> None:
    """lik_plaid_index_search into caller-allocated ``scores`` / ``ids``;
    ``params``' threads, context and stream are :func:`call_options`' for
    ``Q`` (a CUDA ``Q``: torch's current stream of its device)."""
    keep = []
    o = call_options(Q)
    params.num_threads, params.context, params.stream = o.num_threads, o.context, o.stream
    q, ql, s, scu = _views(keep, Q, q_lengths, subset, subset_cu)
    check(lib.lik_plaid_index_search(handle, q, ql, s, scu, ctypes.byref(params),
                                     *_views(keep, scores, ids)))


def call_plaid_delete(handle, ids) -> None:
    keep = []
    check(lib.lik_plaid_index_delete(handle, *_views(keep, ids)))


def call_plaid_update(handle, ids, documents, cu_seqlens, options) -> None:
    keep = []
    check(lib.lik_plaid_index_update(handle, *_views(keep, ids, documents, cu_seqlens),
                                     ctypes.byref(options)))


def call_plaid_compact(handle) -> None:
    check(lib.lik_plaid_index_compact(handle))


def call_plaid_ids(handle, out) -> None:
    """lik_plaid_index_get_ids into int64 ``out [num_docs]`` (-1: deleted)."""
    keep = []
    check(lib.lik_plaid_index_get_ids(handle, *_views(keep, out)))


def plaid_metadata_db(handle) -> bytes | None:
    """The index's metadata.sqlite bytes, or None."""
    n = ctypes.c_int64()
    check(lib.lik_plaid_index_get_metadata_db(handle, None, 0, ctypes.byref(n)))
    if n.value < 0:
        return None
    buf = ctypes.create_string_buffer(max(n.value, 1))
    check(lib.lik_plaid_index_get_metadata_db(handle, buf, n.value, ctypes.byref(n)))
    return buf.raw[: n.value]


def set_plaid_metadata_db(handle, data: bytes | None) -> None:
    check(lib.lik_plaid_index_set_metadata_db(handle, data, -1 if data is None else len(data)))


def plaid_info(handle) -> LikPlaidIndexInfo:
    info = LikPlaidIndexInfo()
    check(lib.lik_plaid_index_get_info(handle, ctypes.byref(info)))
    return info


def call_plaid_to_device(handle, device_id: int) -> None:
    """lik_plaid_index_to_device: the search state copied to CUDA device
    ``device_id`` (>= 0), or the copy freed (-1)."""
    check(lib.lik_plaid_index_to_device(handle, int_arg(device_id, "device", -1, INT32_MAX)))


def plaid_free(handle) -> None:
    if handle and lib is not None:
        lib.lik_plaid_index_free(handle)


# ---- low-bit MaxSim: int8, fp8, binary (include/lik_experimental.h) ---------------

lib.lik_quantize_int8.restype = ctypes.c_int
lib.lik_quantize_int8.argtypes = [_PT, _PO, _PT, _PT]
lib.lik_quantize_binary.restype = ctypes.c_int
lib.lik_quantize_binary.argtypes = [_PT, _PO, _PT]
lib.lik_maxsim_scaled.restype = ctypes.c_int
lib.lik_maxsim_scaled.argtypes = [_PT, _PT, _PT, _PT, _PT, _PT, _PO, _PT]
lib.lik_maxsim_binary.restype = ctypes.c_int
lib.lik_maxsim_binary.argtypes = [_PT, _PT, _PT, ctypes.c_int64, _PT, _PT, _PO, _PT]


def call_quantize_int8(X, X_int8, scale, *, normalize: bool = False) -> None:
    """lik_quantize_int8 into caller-allocated ``X_int8`` (I8) and ``scale`` (F32)."""
    keep = []
    opts = call_options(X, normalize=normalize)
    x, q, sc = _views(keep, X, X_int8, scale)
    check(lib.lik_quantize_int8(x, ctypes.byref(opts), q, sc))


def call_quantize_binary(X, bits) -> None:
    """lik_quantize_binary into caller-allocated ``bits`` (U8)."""
    keep = []
    opts = call_options(X)
    x, b = _views(keep, X, bits)
    check(lib.lik_quantize_binary(x, ctypes.byref(opts), b))


def call_maxsim_scaled(Q, scale_Q, D, scale_D, q_mask, d_mask, scores) -> None:
    """lik_maxsim_scaled (int8 / fp8) into caller-allocated ``scores`` (F32)."""
    keep = []
    opts = call_options(Q)
    *ins, out = _views(keep, Q, scale_Q, D, scale_D, q_mask, d_mask, scores)
    check(lib.lik_maxsim_scaled(*ins, ctypes.byref(opts), out))


def call_maxsim_binary(Q, scale_Q, D_bits, d: int, q_mask, d_mask, scores) -> None:
    """lik_maxsim_binary into caller-allocated ``scores`` (F32)."""
    keep = []
    opts = call_options(Q)
    q, sq, db, qm, dm, out = _views(keep, Q, scale_Q, D_bits, q_mask, d_mask, scores)
    check(lib.lik_maxsim_binary(q, sq, db, ctypes.c_int64(d), qm, dm, ctypes.byref(opts), out))


# ---- fused D-side head (include/lik_experimental.h) ----------------------------

lib.lik_maxsim_from_hidden.restype = ctypes.c_int
lib.lik_maxsim_from_hidden.argtypes = [_PT] * 6 + [_PO, _PT, _PT]
lib.lik_maxsim_from_hidden_backward.restype = ctypes.c_int
lib.lik_maxsim_from_hidden_backward.argtypes = [_PT] * 8 + [_PO] + [_PT] * 4


def call_maxsim_from_hidden(Q, H_d, W, b, q_mask, d_mask, scores, argmax=None, *, normalize=True) -> None:
    """lik_maxsim_from_hidden into caller-allocated ``scores`` (F32) and optional ``argmax`` (I32)."""
    keep = []
    opts = call_options(Q, normalize=normalize)
    ins = _views(keep, Q, H_d, W, b, q_mask, d_mask)
    check(lib.lik_maxsim_from_hidden(*ins, ctypes.byref(opts), *_views(keep, scores, argmax)))


def call_maxsim_from_hidden_backward(Q, H_d, W, b, q_mask, d_mask, argmax, grad_scores, grad_Q, grad_H_d,
                                     grad_W, grad_b, *, normalize=True) -> None:
    """lik_maxsim_from_hidden_backward into caller-allocated gradients (None: skipped)."""
    keep = []
    opts = call_options(Q, normalize=normalize)
    ins = _views(keep, Q, H_d, W, b, q_mask, d_mask, argmax, grad_scores)
    outs = _views(keep, grad_Q, grad_H_d, grad_W, grad_b)
    check(lib.lik_maxsim_from_hidden_backward(*ins, ctypes.byref(opts), *outs))
