"""Thin wrapper: ``python bench/run.py [options]`` is ``tensat bench [options]``.

See ``bench/README.md``; the harness itself is :mod:`tensat_py.bench`.
"""

from __future__ import annotations

import sys

from tensat_py.cli_bench import bench

if __name__ == "__main__":
    sys.exit(bench.main(args=sys.argv[1:], prog_name="tensat bench"))
