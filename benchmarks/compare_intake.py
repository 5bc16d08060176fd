"""Before/after for the intake benchmark: the phases of ``bench_intake.py`` run from two source trees,
interleaved (before, after; then after, before; ...), on the same payloads, each run in its own
process; prints each phase's median and spread of wall and CPU time, and the ratio of the medians to
the ideal's (measured with the "before" tree's script).

On a shared machine wall time mostly measures the neighbours; CPU time (of the process, all threads)
the work. An export of an older commit serves as "before":

    git archive COMMIT | tar -x -C /tmp/before
    python benchmarks/compare_intake.py /tmp/before --phases ideal,encode,store,read --runs 7
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _run(tree: Path, phase: str, payloads: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'collectors'}")
    out = subprocess.run(
        [
            sys.executable,
            str(tree / "benchmarks" / "bench_intake.py"),
            "--child",
            phase,
            "--payloads",
            str(payloads),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=payloads.parent,  # not the tree: its own package must come from PYTHONPATH
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("before", type=Path, help="a source tree of tracejudge (e.g. an export of a commit)")
    parser.add_argument("--after", type=Path, default=HERE.parent, help="default: this checkout")
    parser.add_argument("--phases", default="ideal,encode,store,read", help="phases of bench_intake.py")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--spans", type=int, default=10_000)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from bench_intake import generate

    phases = [p for p in args.phases.split(",") if p]
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="tj-compare-") as tmp:
        source = Path(tmp) / f"payloads-{args.spans}.bin"
        size = generate(args.spans, source)
        print(f"{args.spans} spans, {size / 1e6:.1f} MB; {args.runs} runs per phase and tree", flush=True)
        payloads = {}
        for name in trees:  # a folder per tree: the store phase's file is the read phase's input
            (Path(tmp) / name).mkdir()
            payloads[name] = Path(tmp) / name / source.name
            shutil.copy(source, payloads[name])
        for run in range(args.runs):
            order = list(trees) if run % 2 == 0 else list(trees)[::-1]
            for phase in phases:
                for name in order:
                    if phase == "ideal" and name == "after":
                        continue  # one floor for both
                    r = _run(trees[name], phase, payloads[name])
                    times.setdefault((phase, name), []).append((r["seconds"], r["cpu"]))
    ideal = times.get(("ideal", "before"))
    base_wall = statistics.median(w for w, _ in ideal) if ideal else None
    base_cpu = statistics.median(c for _, c in ideal) if ideal else None
    print(f"{'phase':8} {'tree':6} {'wall median (spread)':>26} {'CPU median (spread)':>26}")
    for (phase, name), runs in times.items():
        wall = sorted(w for w, _ in runs)
        cpu = sorted(c for _, c in runs)
        mw, mc = statistics.median(wall), statistics.median(cpu)
        vs_wall = f" {mw / base_wall:.2f}x" if base_wall else ""
        vs_cpu = f" {mc / base_cpu:.2f}x" if base_cpu else ""
        print(
            f"{phase:8} {name:6} {mw:7.3f} ({wall[0]:.3f}-{wall[-1]:.3f}){vs_wall:>7}"
            f" {mc:7.3f} ({cpu[0]:.3f}-{cpu[-1]:.3f}){vs_cpu:>7}"
        )


if __name__ == "__main__":
    main()
