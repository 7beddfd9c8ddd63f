"""``make chaos-sweep``: ``replog chaos`` over many seeds, one fresh cluster per seed.

    python -m chaos.sweep [--seeds 200] [--first 1] [--duration 60] [--nemesis all]
                          [--keep-going] [--base-dir DIR]

Seeds ``first .. first+seeds-1`` run in turn; the first invalid verdict stops the sweep
(unless ``--keep-going``) and prints the replay command and the line to append to
``tests/chaos/regression_seeds.txt`` (nemeses named, so the line keeps replaying that
schedule when nemeses are added). A run's data dir (history, logs) is
deleted when it was valid and kept when it was not. The last line is the summary to paste
into an issue.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chaos.cli import _duration
from chaos.schedule import parse_nemeses


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--first", type=int, default=1)
    ap.add_argument("--duration", default="60")
    ap.add_argument("--nemesis", default="all")
    ap.add_argument("--keep-going", action="store_true")
    ap.add_argument("--base-dir", default=None)
    args = ap.parse_args(argv)
    base = Path(args.base_dir or tempfile.mkdtemp(prefix="replog-chaos-sweep-"))
    base.mkdir(parents=True, exist_ok=True)
    valid, invalid, started = 0, [], time.monotonic()
    longest: tuple[float, int | None] = (0.0, None)  # (longest acks=all write gap, seed)
    past_bound = 0  # fault windows whose gap exceeded the detection bound, all seeds
    for seed in range(args.first, args.first + args.seeds):
        data = base / f"seed-{seed}"
        t = time.monotonic()
        rc = subprocess.call([sys.executable, "-m", "admin.cli", "chaos", "--seed", str(seed),
                              "--duration", args.duration, "--nemesis", args.nemesis,
                              "--data-dir", str(data)],
                             stdout=(base / f"seed-{seed}.out").open("w"),
                             stderr=subprocess.STDOUT)
        verdict = next((line for line in (base / f"seed-{seed}.out").read_text().splitlines()
                        if line.startswith("Verdict:")), "Verdict: none (the run crashed)")
        print(f"seed {seed}: rc {rc} in {time.monotonic() - t:.0f}s  {verdict}", flush=True)
        try:
            st = json.loads((data / "verdict.json").read_text())["stats"]
        except (OSError, ValueError, KeyError):
            st = {}
        longest = max(longest, (st.get("max_unavailable_s", 0.0), seed))
        past_bound += st.get("faults_past_bound", 0)
        if rc == 0:
            valid += 1
            shutil.rmtree(data, ignore_errors=True)
            continue
        invalid.append(seed)
        print(f"  replay: replog chaos --seed {seed} --duration {args.duration} "
              f"--nemesis {args.nemesis}; kept {data} and {base / f'seed-{seed}.out'}",
              flush=True)
        print(f"  regression line: {seed} {_duration(args.duration):g} "
              f"{','.join(parse_nemeses(args.nemesis))}  # <what broke>", flush=True)
        if not args.keep_going:
            break
    print(f"chaos sweep: {valid + len(invalid)} seeds x {args.duration}s, nemeses "
          f"{args.nemesis}: {valid} valid, {len(invalid)} invalid"
          + (f" (seeds {', '.join(map(str, invalid))})" if invalid else "")
          + f"; longest acks=all write gap {longest[0]:.1f}s (seed {longest[1]}), "
            f"{past_bound} fault window(s) past the detection bound"
          + f" in {(time.monotonic() - started) / 60:.1f} min")
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main())
