"""Summarise the `top` snapshots bench/gpu_call_settings.sh takes during a harness run: the host's mean CPU use
(user, system, idle) and, per command name, its mean share of one core over the snapshots, busiest first.

    python3 bench/top_summary.py $OUT/top_0.txt"""
from __future__ import annotations

import re
import signal
import sys
from collections import defaultdict


def main(path: str) -> None:
    snaps, cpu_lines, per_cmd = 0, [], defaultdict(float)
    with open(path) as f:
        for line in f:
            if line.startswith("%Cpu"):
                snaps += 1
                m = re.search(r"([\d.]+) us,\s*([\d.]+) sy.*?([\d.]+) id", line)
                if m:
                    cpu_lines.append(tuple(float(x) for x in m.groups()))
                continue
            parts = line.split()
            if len(parts) >= 12 and parts[0].isdigit():
                try:
                    per_cmd[" ".join(parts[11:])[:60]] += float(parts[8])
                except ValueError:
                    pass
    if not snaps:
        print("no snapshots")
        return
    if cpu_lines:
        us, sy, idle = (sum(c[i] for c in cpu_lines) / len(cpu_lines) for i in range(3))
        print(f"{snaps} snapshots: host CPU user {us:.0f} %, system {sy:.0f} %, idle {idle:.0f} % (mean)")
    for cmd, total in sorted(per_cmd.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {total / snaps:6.0f} % of a core  {cmd}")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)   # piped into `head`: stop quietly
    main(sys.argv[1])
