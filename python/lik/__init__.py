"""lik — fused late-interaction (ColBERT MaxSim) kernels.

A thin ctypes binding over the C library ``liblik`` (``include/lik.h``).
The library is loaded from this package's folder (where ``pip install .``
puts it) or, for development, from ``$LIK_LIBRARY`` (the path of a built
``liblik.so``, e.g. ``build/liblik.so`` after ``cmake -B build && cmake
--build build``).

Public API (names, keywords and defaults of the seed package
late-interaction-kernels):

* :func:`maxsim` — scores ``[Nq, Nd]`` (cross), ``[Nq, K]`` (KD layout).
* :func:`maxsim_pairs` — scores ``[B]`` for same-index pairs.
* :func:`retrieve` — exact top-k documents per query.
* :func:`maxsim_varlen` / :func:`score_pairs_packed` — packed (``cu_seqlens``)
  layouts; :func:`maxsim_padded` / :func:`pack_padded` — padded reranking
  batches (torch).
* :class:`MaxSimScorer` — stateless scorer (a ``torch.nn.Module`` with torch).
* :func:`maxsim_residual` / :func:`maxsim_residual_varlen` — MaxSim against
  PLAID / ColBERTv2 compressed documents; the codec and the centroid score
  are in :mod:`lik.plaid`.
* :func:`quantize_int8` / :func:`quantize_binary`,
  :func:`maxsim_inference_int8` / :func:`maxsim_inference_fp8` /
  :func:`maxsim_inference_binary`, :func:`retrieve_binary`, the fp8
  quantisers (:func:`quantize_fp8_per_token`, ...) — low-bit MaxSim
  (:mod:`lik.quant`).
* :func:`maxsim_from_hidden` — MaxSim against hidden states projected on the
  fly (fused D-side head, :mod:`lik.head`).
* :func:`cpu_isa` — the CPU kernel path in use ("avx512", "avx2", "sve", "neon", "portable").
* :func:`set_num_threads` / :func:`get_num_threads` — CPU threads per call.
* :mod:`lik.compat` — the seed's names, signatures and submodules
  (``import lik.compat as late_interaction_kernels``).

Submodules: :mod:`lik.plaid`, :mod:`lik.quant` and :mod:`lik.index` are
imported with the package; :mod:`lik.compat`, :mod:`lik.distributed`,
:mod:`lik.integrations`, :mod:`lik.head` and :mod:`lik.padded` on first use
(``lik.distributed.retrieve(...)`` after a plain ``import lik``), so
``import lik`` costs no more than the package's own functions need.
``dir(lik)`` lists them all; ``__all__`` (what ``from lik import *`` binds)
holds the functions and classes, and ``plaid``.

Threads: every call uses ``get_num_threads()`` threads; 0 (the default) means
the library's default: ``$LIK_NUM_THREADS`` if set, else all cores.  Results
are bitwise identical for any thread count.  ``$LIK_CPU_ISA`` forces a CPU
kernel path (see lik.h).
"""

from __future__ import annotations

from . import _lib
from ._api import MaxSimScorer, maxsim, maxsim_pairs, retrieve
from ._lib import Context, LikError
from ._torch_ops import PackedBatch, maxsim_from_hidden, maxsim_padded, maxsim_varlen, pack_padded, score_pairs_packed
from . import plaid
from .plaid import maxsim_residual, maxsim_residual_varlen
from . import quant
from .quant import *  # noqa: F401,F403  (the names of quant.__all__, exported below)

__version__: str = _lib.version_string()

#: Path of the loaded C library.
library_path: str = _lib.library_path


def cpu_isa() -> str:
    """Name of the CPU kernel path chosen at run time (``lik_cpu_isa``;
    ``$LIK_CPU_ISA`` can force one the CPU supports).

    Args:
        None.

    Returns:
        ``"avx512"``, ``"avx2"`` or ``"portable"``.

    Raises:
        Nothing.
    """
    return _lib.cpu_isa()


def set_num_threads(n: int) -> None:
    """Set the CPU thread count used by every following lik call (all threads
    of this process).

    Args:
        n: int >= 0.  0 restores the default: ``$LIK_NUM_THREADS`` if set,
            else all cores (read by the C library at call time).

    Returns:
        None.

    Raises:
        TypeError: ``n`` is not an int.
        ValueError: ``n < 0``.

    Results do not depend on the thread count (bitwise), only the speed does.
    """
    _lib.set_num_threads(n)


def get_num_threads() -> int:
    """The CPU thread setting of :func:`set_num_threads`.

    Args:
        None.

    Returns:
        The value last given to :func:`set_num_threads` (0 = the library
        default).

    Raises:
        Nothing.
    """
    return _lib.get_num_threads()


#: Public submodules, imported by attribute access on first use (PEP 562):
#: ``lik.distributed`` works after a plain ``import lik``.  The eager ones
#: (plaid, quant, index; head and padded with torch) are attributes already.
_SUBMODULES = ("compat", "distributed", "head", "index", "integrations", "padded", "plaid", "quant")


def __getattr__(name: str):
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")  # binds lik.<name> for the next access
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULES))


__all__ = [
    "__version__",
    "maxsim",
    "maxsim_pairs",
    "retrieve",
    "maxsim_varlen",
    "score_pairs_packed",
    "maxsim_padded",
    "pack_padded",
    "PackedBatch",
    "maxsim_residual",
    "maxsim_residual_varlen",
    *quant.__all__,
    "maxsim_from_hidden",
    "plaid",
    "MaxSimScorer",
    "LikError",
    "Context",
    "cpu_isa",
    "set_num_threads",
    "get_num_threads",
    "library_path",
]
