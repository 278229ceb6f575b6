"""A simulator process that binds its port only when told: the tests' engine that dies (SIGKILL) and
comes back after an exact outage. Started ahead, it imports everything and says ``ready``; a line on
its standard input starts the simulator on the port given (0: any), which it prints as JSON (its
URLs), then it serves until killed. ``python -m tests.support.held_sim PORT``."""

from __future__ import annotations

import json
import sys
import threading

from simulator import SimOptions, start_simulator


def main() -> None:
    port = int(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()
    sim = start_simulator(SimOptions(port=port, seed=1, load=4))
    print(json.dumps(sim.urls), flush=True)
    threading.Event().wait()  # serves until killed


if __name__ == "__main__":
    main()
