#!/usr/bin/env python3
"""Turns bench_green's JSON lines into docs/img/green_isolation.png (the small
kernel's latency against the big kernel's bandwidth, per setting) and the
measured tables in docs/green-contexts.md (between its green-table markers):
the settings, and cucore against the raw driver per partition size. A
partitioned setting's latencies and big-kernel time are the medians over
bench_green's rounds (its "rounds" metric); the pooled percentiles of all
rounds' samples are kept as "pooled small p50" etc. and shown as ratios.

    tools/plot_green.py [bench.jsonl] [--png docs/img/green_isolation.png] [--doc docs/green-contexts.md]

The input is the file $CUCORE_BENCH_JSON pointed at during scripts/gpu-check
(its default). Lines are bench/common.hpp's: {"name": "green[<setting>]
<metric>", "unit", "cucore", ["peer", "peer_value", "ratio", "goal_ratio"]}.
Without matplotlib the table is still written. The last value of a name wins
(a file holding several runs gives the latest).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAME = re.compile(r"^green\[(?P<setting>[^\]]+)\] (?P<metric>.+)$")
BEGIN, END = "<!-- green-table:begin -->", "<!-- green-table:end -->"


def read(path: pathlib.Path) -> dict[str, dict[str, dict]]:
    """setting -> metric -> the JSON record."""
    out: dict[str, dict[str, dict]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            j = json.loads(line)
        except json.JSONDecodeError:
            continue
        m = NAME.match(str(j.get("name", "")))
        if m:
            out.setdefault(m["setting"], {})[m["metric"]] = j
    return out


def settings_in_order(data: dict) -> list[str]:
    fixed = ["alone", "shared", "shared-high-priority"]
    parts = sorted((s for s in data if s.startswith("partitioned-")), key=lambda s: int(s.split("-")[1]))
    return [s for s in fixed if s in data] + parts


def label(setting: str, data: dict | None = None) -> str:
    if setting.startswith("partitioned-"):
        small = setting.split("-")[1]
        big = value((data or {}).get(setting, {}).get("big kernel SMs"))
        if big is not None:  # the remainder the big kernel ran on (68 beside 64 on a 132-SM H200)
            return f"green contexts, {small} SMs for the small kernel + {big:.0f} for the big one"
        return f"green contexts, {small} SMs for the small kernel"
    return {"alone": "small kernel alone", "shared": "sharing the whole GPU",
            "shared-high-priority": "sharing, small kernel on a high-priority stream"}.get(setting, setting)


def value(rec: dict | None, key: str = "cucore") -> float | None:
    return None if rec is None else rec.get(key)


def fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "—"
    if unit == "samples":
        return f"{v:.0f}"
    if unit == "us" and v >= 1000:
        return f"{v / 1000:.2f} ms"
    return f"{v:.1f} µs" if unit == "us" else f"{v:.2f} ms" if unit == "ms" else f"{v:.0f} GB/s"


def ratio(rec: dict | None) -> str:
    r = None if rec is None else rec.get("ratio")
    return "—" if r is None else f"{r:.3f}"


def samples(d: dict) -> str:
    n = fmt(value(d.get("samples")), "samples")
    rounds = value(d.get("rounds"))
    return n if rounds is None else f"{n} in {rounds:.0f} rounds"


def settings_table(data: dict) -> str:
    rows = ["| setting | samples | small p50 | p99 | p99.9 | big kernel | big bandwidth | p99.9, sharing / this |",
            "|---|---|---|---|---|---|---|---|"]
    big_alone = data.get("big alone", {})
    if big_alone:
        rows.append(f"| big kernel alone | — | — | — | — | {fmt(value(big_alone.get('big kernel')), 'ms')} | "
                    f"{fmt(value(big_alone.get('big bandwidth')), 'GB/s')} | — |")
    for s in settings_in_order(data):
        d = data[s]
        # The "vs shared" row's ratio is partitioned / shared (goal <= 0.01): shown as how many times better.
        isolation = "—"
        vs = d.get("small p99.9 vs shared", {}).get("ratio")
        if vs:
            isolation = f"{1 / vs:.0f}×"
        rows.append(f"| {label(s, data)} | {samples(d)} | "
                    f"{fmt(value(d.get('small p50')), 'us')} | {fmt(value(d.get('small p99')), 'us')} | "
                    f"{fmt(value(d.get('small p99.9')), 'us')} | {fmt(value(d.get('big kernel')), 'ms')} | "
                    f"{fmt(value(d.get('big bandwidth')), 'GB/s')} | {isolation} |")
    return "\n".join(rows)


def against_raw_table(data: dict) -> str:
    """cucore against the raw driver per partition size: the medians over rounds and their ratios (the goal's
    figures), and the pooled percentiles' ratios for reference."""
    def pair(d: dict, metric: str, unit: str) -> str:
        rec = d.get(metric)
        return f"{fmt(value(rec), unit)} / {fmt(value(rec, 'peer_value'), unit)}"

    rows = ["| green contexts | rounds | p50, cucore / raw | p99, cucore / raw | p99.9, cucore / raw "
            "| big kernel, cucore / raw | ratios p50, p99, p99.9, big (goal ≤ 1.1) | pooled ratios p50, p99, p99.9 |",
            "|---|---|---|---|---|---|---|---|"]
    for s in settings_in_order(data):
        d = data[s]
        if "ratio" not in d.get("small p99.9", {}):
            continue
        rounds = value(d.get("rounds"))
        big = value(d.get("big kernel SMs"))
        sms = s.split("-")[1] + (f" + {big:.0f}" if big is not None else "") + " SMs"
        ratios = ", ".join(ratio(d.get(m)) for m in ("small p50", "small p99", "small p99.9", "big kernel"))
        pooled = ", ".join(ratio(d.get(f"pooled small {q}")) for q in ("p50", "p99", "p99.9"))
        rows.append(f"| {sms} | {'—' if rounds is None else f'{rounds:.0f}'} | {pair(d, 'small p50', 'us')} | "
                    f"{pair(d, 'small p99', 'us')} | {pair(d, 'small p99.9', 'us')} | "
                    f"{pair(d, 'big kernel', 'ms')} | {ratios} | {pooled} |")
    return "\n".join(rows)


def table(data: dict) -> str:
    return f"{settings_table(data)}\n\ncucore against the raw driver, same run:\n\n{against_raw_table(data)}"


def update_doc(doc: pathlib.Path, text: str) -> None:
    body = doc.read_text()
    if BEGIN not in body or END not in body:
        sys.exit(f"{doc}: no {BEGIN} ... {END} markers to put the table between")
    head, rest = body.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def plot(data: dict, png: pathlib.Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_green: matplotlib is not installed; the table is written, the plot is not", file=sys.stderr)
        return False
    fig, ax = plt.subplots(figsize=(8, 5.5))
    markers = {"small p50": "o", "small p99": "s", "small p99.9": "^"}
    colors = plt.get_cmap("tab10")
    for i, s in enumerate(settings_in_order(data)):
        d = data[s]
        x = value(d.get("big bandwidth"))
        if x is None:  # the small kernel alone: its latencies as reference lines
            for metric, style in (("small p50", ":"), ("small p99.9", "--")):
                y = value(d.get(metric))
                if y:
                    ax.axhline(y, color="grey", linestyle=style, linewidth=0.8)
                    ax.annotate(f"alone, {metric.split()[1]}", (0.01, y), xycoords=("axes fraction", "data"),
                                fontsize=7, color="grey", va="bottom")
            continue
        ys = [value(d.get(m)) for m in markers]
        ax.plot([x] * 3, ys, color=colors(i), linewidth=0.8)
        for (metric, marker), y in zip(markers.items(), ys):
            legend = label(s, data) if metric == "small p50" else None
            ax.scatter([x], [y], marker=marker, color=colors(i), label=legend)
    big_alone = value(data.get("big alone", {}).get("big bandwidth"))
    if big_alone:
        ax.axvline(big_alone, color="black", linestyle="--", linewidth=0.8)
        ax.annotate("big kernel alone", (big_alone, 0.98), xycoords=("data", "axes fraction"), fontsize=7,
                    rotation=90, ha="right", va="top")
    ax.set_yscale("log")
    ax.set_xlabel("big kernel bandwidth (GB/s)")
    ax.set_ylabel("small kernel latency (µs): ○ p50, □ p99, △ p99.9")
    ax.set_title("Isolation with green contexts (bench_green; partitioned: medians over rounds)")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(png, dpi=130)
    return True


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("json", nargs="?", default=os.environ.get("CUCORE_BENCH_JSON"))
    p.add_argument("--png", default=str(ROOT / "docs/img/green_isolation.png"))
    p.add_argument("--doc", default=str(ROOT / "docs/green-contexts.md"))
    a = p.parse_args()
    if not a.json:
        p.error("give the JSON lines file (or set CUCORE_BENCH_JSON)")
    data = read(pathlib.Path(a.json))
    if not any(s.startswith("partitioned-") for s in data):
        sys.exit(f"{a.json}: no bench_green results (names 'green[partitioned-N] ...')")
    update_doc(pathlib.Path(a.doc), table(data))
    if plot(data, pathlib.Path(a.png)):
        print(f"wrote {a.png}")
    print(f"updated the table in {a.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
