"""Only the callback part of make bench: a fresh database, bootstrap, then bench/callback_throughput.measure().

    uv run python bench/callbacks_only.py [--events 2000] [--backlog 100000] [--database payments_bench]

Same settings and environment as bench/run.py (its Bench: config.settings.bench, Redis broker, CONN_MAX_AGE),
without the merchants and the gunicorn/wrk part.
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run import Bench  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    Bench.add_environment_arguments(parser)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--backlog", type=int, default=0, help="pending events of a dead merchant, written first")
    args = parser.parse_args()

    bench = Bench(args)
    try:
        bench.setup_database()
        result = bench.measure_callbacks(events=args.events, timeout=args.timeout, concurrency=args.concurrency,
                                       backlog=args.backlog)
    finally:
        bench.stop()
    print(json.dumps(result))
    if not result["ok"]:
        raise SystemExit(f"{result['undelivered']} of {result['events']} events left undelivered")


if __name__ == "__main__":
    main()
