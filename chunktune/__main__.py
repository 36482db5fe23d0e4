"""``python -m chunktune``: the same as the ``chunktune`` command."""

from chunktune._cli import main

raise SystemExit(main())
