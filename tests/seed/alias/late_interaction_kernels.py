"""``import late_interaction_kernels`` gives ``lik.compat`` (the seed's suite
runs with this folder on PYTHONPATH, so its subprocesses see it too).

``late_interaction_kernels`` and every ``late_interaction_kernels.X`` are the
module objects of ``lik.compat`` / ``lik.compat.X``, each imported once (a
patch made through one name is seen through the other); a seed module that
lik.compat does not have stays missing (``ModuleNotFoundError``).
"""

import importlib
import pkgutil
import sys

import lik.compat

sys.modules[__name__] = lik.compat
for _info in pkgutil.iter_modules(lik.compat.__path__):
    sys.modules[f"{__name__}.{_info.name}"] = importlib.import_module("lik.compat." + _info.name)
