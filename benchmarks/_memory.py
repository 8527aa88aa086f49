"""Row 6 of ``benchmarks/state.py``: resident memory per million keys in a store, as its own process.

    python -P benchmarks/_memory.py --keys 1000000 --cache-bytes N --dir DIR

Writes ``--keys`` keys (``k<i>`` → an 8-byte count, the App's ``counts`` store) into one
:class:`~streamtasks.state.KeyValueStore`, through a :class:`~streamtasks.state.CachedStore`
of ``--cache-bytes`` (0: no cache), reads every key back once, and prints one JSON line: RSS
(``/proc/self/statm``) before opening the store and after, and the cache's entries and bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--cache-bytes", type=int, default=0)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()
    from streamtasks.state import CacheBudget, CachedStore, KeyValueStore

    before = rss_bytes()
    budget = CacheBudget(args.cache_bytes)
    with KeyValueStore(Path(args.dir) / "counts", name="counts") as store:
        view: KeyValueStore | CachedStore = store if args.cache_bytes == 0 else CachedStore(store, budget)
        one = (1).to_bytes(8, "big")
        for i in range(args.keys):
            view.put(f"k{i}".encode(), one)
        for i in range(args.keys):
            view.get(f"k{i}".encode())
        after = rss_bytes()
        cached = len(view) if isinstance(view, CachedStore) else 0
        print(json.dumps({"before": before, "after": after, "entries": cached, "cache_bytes": budget.used}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
