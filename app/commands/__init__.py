"""One module per ``python -m app <command>``.

Each module defines ``HELP`` (one line), ``configure(parser)`` to add its arguments and
``execute(args, settings) -> int``. The registry in app.cli imports a module only when its command
runs, so ``--help`` stays fast and a command's heavy imports (Streamlit, NVML) cost nothing elsewhere.
"""
