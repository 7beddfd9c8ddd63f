"""``python -m bench [--quick] [--runs N] [--data-dir DIR] [NAME ...]``

Runs ``main(opts)`` of every ``bench/bench_*.py`` module, or only the NAMEs given
(``storage`` or ``bench_storage``).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
from pathlib import Path


def discover() -> list[str]:
    here = str(Path(__file__).resolve().parent)
    return sorted(m.name[len("bench_"):] for m in pkgutil.iter_modules([here])
                  if m.name.startswith("bench_"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    available = discover()
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", metavar="NAME",
                   help=f"benchmarks to run (default: all of {', '.join(available)})")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: one run per figure, small sizes")
    p.add_argument("--runs", type=int, default=None,
                   help="runs per figure (median taken); default 5, 1 with --quick")
    p.add_argument("--data-dir", default=None,
                   help="parent dir for the benchmark's temporary data (default: /tmp)")
    opts = p.parse_args(argv)
    names = []
    for n in opts.names:
        n = n.removeprefix("bench_").removesuffix(".py")
        if n not in available:
            p.error(f"no benchmark {n!r}; available: {', '.join(available)}")
        names.append(n)
    opts.names = names or available
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    failed = []
    for name in opts.names:
        mod = importlib.import_module(f"bench.bench_{name}")
        t = time.perf_counter()
        try:
            mod.main(opts)
        except Exception as e:  # one broken bench must not hide the others' figures
            import traceback
            traceback.print_exc()
            failed.append(f"{name}: {e!r}")
        print(f"# bench {name} took {time.perf_counter() - t:.1f} s", flush=True)
    if failed:
        print("# failed: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
