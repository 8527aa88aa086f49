"""``python -m streamtasks.sweeps replay POINT --seed N`` (the replay command a sweep's
violations print), or ``python -m streamtasks.sweeps GRID --out DIR`` (as ``streamtasks sweep``)."""

from __future__ import annotations

import argparse
import sys

from streamtasks.errors import StreamTasksError
from streamtasks.sweeps.command import add_sweep_arguments, replay_main, run_sweep_command


def main() -> int:
    try:
        if sys.argv[1:2] == ["replay"]:
            return replay_main(sys.argv[2:])
        parser = argparse.ArgumentParser(prog="python -m streamtasks.sweeps")
        add_sweep_arguments(parser)
        return run_sweep_command(parser.parse_args())
    except StreamTasksError as exc:
        print(f"streamtasks: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
