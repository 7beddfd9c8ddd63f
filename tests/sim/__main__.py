"""python -m tests.sim --seed N [--steps M] | --seeds A-B [--steps M] [--planted-bug NAME]
python -m tests.sim cluster --seed N [--steps M] | --seeds A-B [--steps M] [--profile P]
                            [--planted NAME] [--log]   (the whole-cluster simulation)"""

from __future__ import annotations

import argparse
import sys
import time

from tests.sim import planted_selectors
from tests.sim.sim import InvariantViolation, run_seed


def _parser(prog: str, description: str, steps: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=description)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--seed", type=int, help="replay one seed")
    g.add_argument("--seeds", help="a range A-B of seeds to sweep")
    p.add_argument("--steps", type=int, default=steps)
    return p


def cluster_main(argv: list[str]) -> int:
    """The whole-cluster simulation (tests/sim/cluster): a failing seed prints its violation,
    the shortest step prefix found to still fail, and the command that replays it."""
    from tests.sim.cluster.planted import PLANTED, planted
    from tests.sim.cluster.world import PROFILES, InvariantViolation, World, shrink

    p = _parser("python -m tests.sim cluster", "Deterministic whole-cluster simulation.", 60)
    p.add_argument("--profile", choices=sorted(PROFILES), default="default")
    p.add_argument("--planted", choices=sorted(PLANTED),
                   help="re-create one of issue 26's defects (self-test of the checker)")
    p.add_argument("--log", action="store_true", help="print the seed's step log")
    p.add_argument("--keep-going", action="store_true", help="sweep past failures")
    args = p.parse_args(argv)
    replay = (f"python -m tests.sim cluster --steps {args.steps} --profile {args.profile}"
              + (f" --planted {args.planted}" if args.planted else ""))
    with planted(args.planted):
        if args.seed is not None:
            w = World(args.seed, args.steps, profile=args.profile)
            try:
                w.run()
            except InvariantViolation as e:
                if args.log:
                    print("\n".join(w.log))
                print(f"FAIL {e}")
                found = shrink(args.seed, args.steps, args.profile)
                if found is not None:
                    print(f"shortest failing prefix found: {found[0]} steps: {found[1]}")
                return 1
            if args.log:
                print("\n".join(w.log))
            print(f"seed {args.seed}: ok ({args.steps} steps, {w.now_ms} ms simulated)")
            return 0
        a, _, b = args.seeds.partition("-")
        seeds = range(int(a), int(b or a) + 1)
        t0 = time.monotonic()
        failed = 0
        for seed in seeds:
            try:
                World(seed, args.steps, profile=args.profile).run()
            except InvariantViolation as e:
                failed += 1
                found = shrink(seed, args.steps, args.profile)
                steps = found[0] if found is not None else args.steps
                print(f"FAIL {e}\nreplay: {replay.replace(f'--steps {args.steps}', f'--steps {steps}')}"
                      f" --seed {seed}")
                if not args.keep_going:
                    return 1
        print(f"{len(seeds)} seeds x {args.steps} steps: {len(seeds) - failed} ok, {failed} failed "
              f"in {time.monotonic() - t0:.1f} s")
        return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["cluster"]:
        return cluster_main(argv[1:])
    p = _parser("python -m tests.sim", "Deterministic controller simulation.", 30)
    p.add_argument("--planted-bug", choices=sorted(planted_selectors.PLANTED),
                   help="turn on a deliberately broken selector (self-test of the checker)")
    args = p.parse_args(argv)
    with planted_selectors.planted(args.planted_bug):
        return _controller_sweep(args)


def _controller_sweep(args: argparse.Namespace) -> int:
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
            print(f"FAIL {e}\nreplay: python -m tests.sim --seed {seed} --steps {args.steps}"
                  + (f" --planted-bug {args.planted_bug}" if args.planted_bug else ""))
            return 1
    print(f"{len(seeds)} seeds ok in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
