"""python -m tests.sim --seed N [--steps M] | --seeds A-B [--steps M] [--planted-bug NAME]"""

from __future__ import annotations

import argparse
import sys
import time

from controller import selectors
from tests.sim.sim import InvariantViolation, run_seed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.sim",
                                description="Deterministic controller simulation.")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--seed", type=int, help="replay one seed (prints its step log)")
    g.add_argument("--seeds", help="a range A-B of seeds to sweep")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--planted-bug", choices=sorted(selectors.KNOWN_PLANTED_BUGS),
                   help="turn on a deliberately broken selector (self-test of the checker)")
    args = p.parse_args(argv)
    if args.planted_bug:
        selectors.PLANTED_BUGS.add(args.planted_bug)
    if args.seed is not None:
        try:
            sim = run_seed(args.seed, args.steps)
        except InvariantViolation as e:
            print(f"FAIL {e}")
            return 1
        print(f"seed {args.seed}: ok ({' '.join(sim.log)})")
        return 0
    a, _, b = args.seeds.partition("-")
    seeds = range(int(a), int(b or a) + 1)
    t0 = time.monotonic()
    for seed in seeds:
        try:
            run_seed(seed, args.steps)
        except InvariantViolation as e:
            print(f"FAIL {e}\nreplay: python -m tests.sim --seed {seed} --steps {args.steps}")
            return 1
    print(f"{len(seeds)} seeds ok in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
