"""``make chaos-sweep``: ``replog chaos`` over many seeds, one fresh cluster per seed.

    python -m chaos.sweep [--seeds 200] [--first 1] [--duration 60] [--nemesis all]
                          [--zookeeper-nodes 3|5] [--hosts [--racks N]
                          [--inter-rack-latency-ms MS]] [--keep-going] [--base-dir DIR]

Seeds ``first .. first+seeds-1`` run in turn; the first invalid verdict stops the sweep
(unless ``--keep-going``) and prints the replay command and the line to append to
``tests/chaos/regression_seeds.txt`` (nemeses named, so the line keeps replaying that
schedule when nemeses are added). A run's data dir (history, logs) is
deleted when it was valid and kept when it was not. The last line is the summary to paste
into an issue. ``--zookeeper-nodes``, ``--hosts``, ``--racks`` and ``--inter-rack-latency-ms``
go to every run (``replog chaos --schedule-only`` checks them first: a refusal ends the sweep
at once, exit 2), into the replay command and into the regression line (as ``--option=value``
after the nemeses, which tests/chaos/test_regressions.py passes back to ``replog chaos``).
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


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--first", type=int, default=1)
    ap.add_argument("--duration", default="60")
    ap.add_argument("--nemesis", default="all")
    ap.add_argument("--zookeeper-nodes", type=int, choices=(1, 3, 5), default=1)
    ap.add_argument("--hosts", action="store_true")
    ap.add_argument("--racks", type=int, default=1)
    ap.add_argument("--inter-rack-latency-ms", type=float, default=0.0)
    ap.add_argument("--keep-going", action="store_true")
    ap.add_argument("--base-dir", default=None)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    options = cluster_options(args)
    # Refused options (--hosts without root, zk-* nemeses without an ensemble) are refused
    # once, in replog chaos's own line, not as 200 invalid seeds.
    check = subprocess.run([sys.executable, "-m", "admin.cli", "chaos", "--seed",
                            str(args.first), "--duration", args.duration, "--nemesis",
                            args.nemesis, *options, "--schedule-only"],
                           capture_output=True, text=True, check=False)
    if check.returncode != 0:
        print(f"chaos sweep: {check.stderr.strip() or check.stdout.strip()}", file=sys.stderr)
        return 2
    base = Path(args.base_dir or tempfile.mkdtemp(prefix="replog-chaos-sweep-"))
    base.mkdir(parents=True, exist_ok=True)
    valid, invalid, started = 0, [], time.monotonic()
    longest: tuple[float, int | None] = (0.0, None)  # (longest acks=all write gap, seed)
    past_bound = 0  # fault windows whose gap exceeded the detection bound, all seeds
    zk_judged = 0  # ZooKeeper leader/minority faults held to the session bound, all seeds
    for seed in range(args.first, args.first + args.seeds):
        data = base / f"seed-{seed}"
        t = time.monotonic()
        rc = subprocess.call([sys.executable, "-m", "admin.cli", "chaos", "--seed", str(seed),
                              "--duration", args.duration, "--nemesis", args.nemesis,
                              *options, "--data-dir", str(data)],
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
        zk_judged += sum(1 for f in st.get("zookeeper_faults", ()) if f["judged"])
        if rc == 0:
            valid += 1
            shutil.rmtree(data, ignore_errors=True)
            continue
        invalid.append(seed)
        print(f"  replay: replog chaos --seed {seed} --duration {args.duration} "
              f"--nemesis {args.nemesis}{''.join(' ' + o for o in options)}; kept {data} and "
              f"{base / f'seed-{seed}.out'}", flush=True)
        print(f"  regression line: {regression_line(seed, args.duration, args.nemesis, options)}"
              "  # <what broke>", flush=True)
        if not args.keep_going:
            break
    print(f"chaos sweep: {valid + len(invalid)} seeds x {args.duration}s, nemeses "
          f"{args.nemesis}{''.join(' ' + o for o in options)}: {valid} valid, "
          f"{len(invalid)} invalid"
          + (f" (seeds {', '.join(map(str, invalid))})" if invalid else "")
          + f"; longest acks=all write gap {longest[0]:.1f}s (seed {longest[1]}), "
            f"{past_bound} fault window(s) past the detection bound"
          + (f", {zk_judged} ZooKeeper leader/minority fault(s) held to the session bound"
             if args.zookeeper_nodes > 1 else "")
          + f" in {(time.monotonic() - started) / 60:.1f} min")
    return 1 if invalid else 0


def regression_line(seed: int, duration: str, nemesis: str, options: list[str]) -> str:
    """The line of tests/chaos/regression_seeds.txt that replays a run: nemeses named (``all``
    changes as nemeses are added), then the cluster options as ``--option=value`` tokens."""
    tokens, i = [], 0
    while i < len(options):
        if i + 1 < len(options) and not options[i + 1].startswith("--"):
            tokens.append(f"{options[i]}={options[i + 1]}")
            i += 2
        else:
            tokens.append(options[i])
            i += 1
    return " ".join([str(seed), f"{_duration(duration):g}",
                     ",".join(parse_nemeses(nemesis)), *tokens])


def cluster_options(args) -> list[str]:
    """The options of every run's own cluster, as ``replog chaos`` takes them."""
    out = []
    if args.zookeeper_nodes > 1:
        out += ["--zookeeper-nodes", str(args.zookeeper_nodes)]
    if args.hosts:
        out += ["--hosts", "--racks", str(args.racks)]
        if args.inter_rack_latency_ms:
            out += ["--inter-rack-latency-ms", f"{args.inter_rack_latency_ms:g}"]
    elif args.racks != 1 or args.inter_rack_latency_ms:
        out += ["--racks", str(args.racks), "--inter-rack-latency-ms",
                f"{args.inter_rack_latency_ms:g}"]  # replog chaos refuses them without --hosts
    return out


if __name__ == "__main__":
    sys.exit(main())
