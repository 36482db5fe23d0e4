"""What a first resolve would import in a worker thread, imported with chunktune instead.

A module's first import holds that module's import lock while it runs. A process that
forks meanwhile, in another thread (an async trainer starting its environments' workers
while chunktune's sweep runs in a thread of its own, say), leaves its child that lock
held by a thread the child does not have: the child's first import of the same module
waits for it for good. So what the first resolve imports on the way (anyio's asyncio
backend for ``resolve_sync``, numpy's masked arrays for the first median, the packages'
metadata reader for the key, the presets' resource reader, the ASCII codec for the
cache's writes) loads here, on the thread that imports chunktune. A fork during the
import of chunktune itself is the trainer's to avoid, as for any package.

``tests/test_eager.py`` runs a first resolve in a fresh interpreter and checks that it
imports nothing new; a module named here that a version lacks is skipped.
"""

from __future__ import annotations

import codecs
import contextlib
import importlib

__all__: list[str] = []

_FIRST_RESOLVE = (
    "anyio._backends._asyncio",  # anyio.run's, on its first call
    "numpy.ma",  # numpy's median's NaN check (numpy 2 loads it on first use)
    "email.parser",  # importlib.metadata's, reading a distribution's version
    "importlib.metadata._adapters",
    "importlib.readers",  # importlib.resources.files()'s, reading the presets
    "importlib.resources.readers",
    "importlib.resources._adapters",
    "importlib.resources._itertools",
)

for _name in _FIRST_RESOLVE:
    with contextlib.suppress(ImportError):  # another version keeps it elsewhere
        importlib.import_module(_name)
codecs.lookup("ascii")  # the codec's module, as the cache's first write encodes
