#!/usr/bin/env python3
"""bench/make_report.py: turns the raw output of one bench/compare run into the three result files.

  make_report.py RAW_DIR OUT_DIR [--meta KEY=VALUE ...]

RAW_DIR holds what bench/compare collected:
  vm/perftest/<test>-<size>.txt  perftest client output (ib_send_lat, ib_send_lat_e, ib_send_bw)
  vm/echo.jsonl                  rdmarpc / gRPC points and idle probes (one JSON object per line)
  callgrind.jsonl                instructions per call (host, valgrind --tool=callgrind)
OUT_DIR gets results.md (tables with ratios and one line per target), results.json (every number)
and latency.dat + latency.gp, from which bench/compare draws latency.png with gnuplot.
Standard library only, so it runs on a fresh Debian with nothing but python3.
"""

import json
import os
import re
import sys

PAYLOADS_DEFAULT = [64, 4096, 65536, 1048576]


def size_label(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def fmt(v, digits=1):
    if v is None:
        return "n/a"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_ratio(r):
    return "n/a" if r is None else f"{r:.2f}×"


# ---------------------------------------------------------------------------------------- parsing
def parse_perftest(path):
    """The result row of a perftest client output, as a dict, or None when the run failed."""
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    header = None
    for line in lines:
        if "#bytes" in line:
            header = line
            continue
        if header and re.match(r"^\s*\d+\s+\d+\s", line):
            cols = line.split()
            try:
                vals = [float(c) for c in cols]
            except ValueError:
                return None
            if any(v != v or v in (float("inf"), float("-inf")) for v in vals):
                return None
            if "t_typical" in header:  # ib_send_lat: one-way = round trip / 2, per iteration
                keys = ["bytes", "iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev", "p99", "p999"]
                r = dict(zip(keys, vals))
                r["kind"] = "lat"
                # perftest halves each measured round trip; twice its figures are round trips.
                for k in ("t_min", "t_max", "t_typical", "t_avg", "p99", "p999"):
                    if k in r:
                        r["rtt_" + k] = 2 * r[k]
                return r
            if "MsgRate" in header:  # ib_send_bw
                keys = ["bytes", "iterations", "bw_peak_mb_s", "bw_avg_mb_s", "msg_rate_mpps"]
                r = dict(zip(keys, vals))
                r["kind"] = "bw"
                r["msgs_per_s"] = r.get("msg_rate_mpps", 0) * 1e6
                return r
    return None


def load_jsonl(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return out


class results:
    def __init__(self, raw):
        self.perftest = {}  # (test, size) -> dict
        pdir = os.path.join(raw, "vm", "perftest")
        if os.path.isdir(pdir):
            for name in sorted(os.listdir(pdir)):
                m = re.match(r"^(ib_send_lat_e|ib_send_lat|ib_send_bw)-(\d+)\.txt$", name)
                if m:
                    r = parse_perftest(os.path.join(pdir, name))
                    if r:
                        r["test"] = m.group(1)
                        self.perftest[(m.group(1), int(m.group(2)))] = r
        records = load_jsonl(os.path.join(raw, "vm", "echo.jsonl"))
        self.echo = [r for r in records if r.get("kind") is None]
        self.clock = next((r for r in records if r.get("kind") == "clock"), None)
        self.idle = [r for r in records if r.get("kind") == "idle"]
        self.callgrind = load_jsonl(os.path.join(raw, "callgrind.jsonl"))
        top = os.path.join(raw, "callgrind-top.txt")
        self.profile = open(top).read().rstrip() if os.path.exists(top) else ""
        sizes = sorted({s for (_, s) in self.perftest} | {r["payload"] for r in self.echo})
        self.payloads = sizes or PAYLOADS_DEFAULT

    def point(self, system, transport, payload, concurrency, mode="event"):
        for r in self.echo:
            if (r["system"], r["transport"], r["mode"], r["payload"], r["concurrency"]) == (
                system, transport, mode, payload, concurrency):
                return r
        return None

    def lat(self, system, transport, payload, concurrency, pct="p50", mode="event"):
        p = self.point(system, transport, payload, concurrency, mode)
        return p["latency_us"][pct] if p and p["calls"] > 0 else None

    def rate(self, system, transport, payload, concurrency, mode="event"):
        p = self.point(system, transport, payload, concurrency, mode)
        return p["calls_per_s"] if p and p["calls"] > 0 else None

    def pt(self, test, size, key):
        r = self.perftest.get((test, size))
        return r.get(key) if r else None

    def ipc(self, system, transport):
        for r in self.callgrind:
            if r["system"] == system and r["transport"] == transport:
                return r["instructions_per_call"]
        return None

    def idle_of(self, system, transport, mode="event"):
        for r in self.idle:
            if (r["system"], r["transport"], r["mode"]) == (system, transport, mode):
                return r
        return None


# ---------------------------------------------------------------------------------------- targets
def targets(res):
    """One entry per target (issues #5 and #9): value, limit, met, and how far from the limit."""
    out = []

    def add(name, value, limit, lower_is_better, value_text, limit_text, note=""):
        if value is None or limit is None:
            out.append({"target": name, "value": value, "limit": limit, "met": None,
                        "line": f"**not measured** — {name}: {note or 'a number is missing (see the raw logs)'}"})
            return
        met = value <= limit if lower_is_better else value >= limit
        if lower_is_better:
            by = (limit - value) / limit * 100 if met else (value - limit) / limit * 100
        else:
            by = (value - limit) / limit * 100 if met else (limit - value) / limit * 100
        word = "MET" if met else "MISSED"
        how = "under" if lower_is_better else "over"
        if not met:
            how = "over" if lower_is_better else "under"
        out.append({"target": name, "value": value, "limit": limit, "met": met, "margin_percent": by,
                    "line": f"**{word}** — {name}: {value_text} vs limit {limit_text} ({by:.0f} % {how} the limit){note}"})

    rtt_e = res.pt("ib_send_lat_e", 64, "rtt_t_typical")
    v = res.lat("rdmarpc", "rdma", 64, 1)
    add("64 B echo p50 over rxe, event mode ≤ 1.25 × ib_send_lat -R -e round trip", v,
        None if rtt_e is None else 1.25 * rtt_e, True, f"{fmt(v)} µs",
        "n/a" if rtt_e is None else f"1.25 × {fmt(rtt_e)} µs = {fmt(1.25 * rtt_e)} µs")
    rtt_p = res.pt("ib_send_lat", 64, "rtt_t_typical")
    v = res.lat("rdmarpc", "rdma", 64, 1, mode="busy_poll")
    add("64 B echo p50 over rxe, busy-poll mode ≤ 1.25 × ib_send_lat -R (polling) round trip", v,
        None if rtt_p is None else 1.25 * rtt_p, True, f"{fmt(v)} µs",
        "n/a" if rtt_p is None else f"1.25 × {fmt(rtt_p)} µs = {fmt(1.25 * rtt_p)} µs")
    busy = res.lat("rdmarpc", "rdma", 64, 1, mode="busy_poll")
    v = res.lat("rdmarpc", "rdma", 64, 1, mode="adaptive")
    add("64 B echo p50 over rxe, adaptive mode ≤ 1.2 × busy-poll p50", v,
        None if busy is None else 1.2 * busy, True, f"{fmt(v)} µs",
        "n/a" if busy is None else f"1.2 × {fmt(busy)} µs = {fmt(1.2 * busy)} µs")
    idle = res.idle_of("rdmarpc", "rdma", mode="adaptive")
    v = None if idle is None else idle["cpu_percent"]
    add("idle connected client+server over rdma (adaptive mode): ≤ 1 % of one core", v, 1.0, True,
        "n/a" if v is None else f"{v:.3f} % ({idle['cpu_seconds'] * 1e3:.1f} ms CPU in {idle['seconds']:.1f} s)",
        "1 %")
    bw = res.pt("ib_send_bw", 64, "msgs_per_s")
    v = res.rate("rdmarpc", "rdma", 64, 64, mode="adaptive")
    add("64 B echo calls/s over rxe at 64 in flight, adaptive polling (the library default) "
        "≥ 0.6 × ib_send_bw -R -s 64 messages/s", v,
        None if bw is None else 0.6 * bw, False, f"{fmt(v)} calls/s",
        "n/a" if bw is None else f"0.6 × {fmt(bw)} msg/s = {fmt(0.6 * bw)}")
    g = res.lat("grpc", "tcp", 64, 1)
    v = res.lat("rdmarpc", "tcp", 64, 1)
    add("tcp:// 64 B p50 at 1 in flight ≤ 0.5 × gRPC's", v, None if g is None else 0.5 * g, True,
        f"{fmt(v)} µs", "n/a" if g is None else f"0.5 × {fmt(g)} µs = {fmt(0.5 * g)} µs")
    g = res.rate("grpc", "tcp", 64, 64)
    v = res.rate("rdmarpc", "tcp", 64, 64)
    add("tcp:// 64 B calls/s at 64 in flight ≥ 2 × gRPC's", v, None if g is None else 2 * g, False,
        f"{fmt(v)} calls/s", "n/a" if g is None else f"2 × {fmt(g)} = {fmt(2 * g)}")
    for transport in ("tcp", "loopback"):
        v = res.ipc("rdmarpc", transport)
        add(f"instructions per 64 B echo call (client+server), rdmarpc {transport} ≤ 5,000", v, 5000, True,
            f"{fmt(v)}", "5,000")
    idle = res.idle_of("rdmarpc", "rdma")
    v = None if idle is None else idle["cpu_percent"]
    add("idle connected client+server over rdma (event mode): CPU near zero (≤ 1 % of one core)", v, 1.0, True,
        "n/a" if v is None else f"{v:.3f} % ({idle['cpu_seconds'] * 1e3:.1f} ms CPU in {idle['seconds']:.1f} s)",
        "1 %")
    return out


# ---------------------------------------------------------------------------------------- markdown
def markdown(res, meta, tgts):
    L = []
    w = L.append
    w(f"# rdmarpc benchmark results — {meta.get('date', '?')}")
    w("")
    w("Produced by `bench/compare` in one run: raw verbs (perftest), rdmarpc over `rdma://` and `tcp://`,")
    w("and the gRPC C++ baseline over TCP, all in the same Soft-RoCE VM boot; instruction counts from")
    w("callgrind on the host. Every echo call carries the payload both ways (request and reply).")
    w("")
    w("| | |")
    w("|---|---|")
    for k in ("commit", "host", "cpu", "vm", "duration"):
        if k in meta:
            w(f"| {k} | {meta[k]} |")
    if res.clock:
        w(f"| guest clock | {res.clock.get('clocksource')} |")
    w("")
    w("**Read with care:** the VM runs under TCG (software CPU emulation; this host has no usable")
    w("KVM), so every absolute number is far slower than real hardware. Only the ratios, measured on")
    w("the same device in the same run, carry meaning. rxe (Soft-RoCE) is itself software on the")
    w("kernel's UDP stack. Ratios: rdmarpc ÷ baseline (latency: lower is better; rate: higher is better).")
    w("")
    if res.clock and res.clock.get("clocksource") != "tsc":
        w(f"**WARNING: the guest clock was `{res.clock.get('clocksource')}`, not `tsc`** (available: "
          f"{res.clock.get('available')}): latencies are quantized to its resolution; rerun.")
        w("")
    w("## Targets (issues #5 and #9)")
    w("")
    for t in tgts:
        w(f"- {t['line']}")
    w("")

    # --- rdmarpc rdma vs raw verbs: latency
    w("## rdmarpc over rxe vs raw verbs: latency at 1 call in flight (µs, round trip)")
    w("")
    w("perftest prints one-way latency (each round trip halved); the columns below are round trips")
    w("(2 × perftest's figure). perftest `typical` ≈ median.")
    w("")
    w("| payload | rdmarpc rdma event p50 | `ib_send_lat -R -e` RTT | ratio | rdmarpc rdma p99 | `-e` RTT p99 | ratio | rdmarpc busy-poll p50 | `ib_send_lat -R` RTT | ratio |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in res.payloads:
        a = res.lat("rdmarpc", "rdma", s, 1)
        b = res.pt("ib_send_lat_e", s, "rtt_t_typical")
        a99 = res.lat("rdmarpc", "rdma", s, 1, "p99")
        b99 = res.pt("ib_send_lat_e", s, "rtt_p99")
        c = res.lat("rdmarpc", "rdma", s, 1, mode="busy_poll")
        d = res.pt("ib_send_lat", s, "rtt_t_typical")
        w(f"| {size_label(s)} | {fmt(a)} | {fmt(b)} | {fmt_ratio(ratio(a, b))} | {fmt(a99)} | {fmt(b99)} | "
          f"{fmt_ratio(ratio(a99, b99))} | {fmt(c)} | {fmt(d)} | {fmt_ratio(ratio(c, d))} |")
    w("")

    # --- polling modes side by side (64 B)
    w("## rdmarpc over rxe, 64 B: the three completion polling modes")
    w("")
    w("`event` sleeps on the completion channel after every batch, `busy_poll` never sleeps, `adaptive` ")
    w("(the library default) keeps polling for `adaptive_spin` after the last completion, then sleeps.")
    w("")
    w("| mode | p50 µs (1 in flight) | p99 µs | calls/s (64 in flight) | idle CPU % of a core |")
    w("|---|---:|---:|---:|---:|")
    for mode in ("event", "busy_poll", "adaptive"):
        idle = res.idle_of("rdmarpc", "rdma", mode=mode)
        w(f"| {mode} | {fmt(res.lat('rdmarpc', 'rdma', 64, 1, mode=mode))} | "
          f"{fmt(res.lat('rdmarpc', 'rdma', 64, 1, 'p99', mode=mode))} | {fmt(res.rate('rdmarpc', 'rdma', 64, 64, mode=mode))} | "
          f"{'n/a' if idle is None else format(idle['cpu_percent'], '.3f')} |")
    w("")

    # --- rdmarpc rdma vs raw verbs: rate
    w("## rdmarpc over rxe vs raw verbs: rate at 64 calls in flight")
    w("")
    w("An echo call moves the payload twice (request + reply); `ib_send_bw` counts one-way messages.")
    w("")
    w("| payload | rdmarpc calls/s | `ib_send_bw -R` msg/s | ratio | rdmarpc MB/s (one way) | `ib_send_bw` MB/s | ratio |")
    w("|---|---:|---:|---:|---:|---:|---:|")
    for s in res.payloads:
        a = res.rate("rdmarpc", "rdma", s, 64)
        b = res.pt("ib_send_bw", s, "msgs_per_s")
        p = res.point("rdmarpc", "rdma", s, 64)
        am = p["mb_per_s"] if p and p["calls"] else None
        bm = res.pt("ib_send_bw", s, "bw_avg_mb_s")
        w(f"| {size_label(s)} | {fmt(a)} | {fmt(b)} | {fmt_ratio(ratio(a, b))} | {fmt(am, 2)} | {fmt(bm, 2)} | "
          f"{fmt_ratio(ratio(am, bm))} |")
    w("")

    # --- tcp vs gRPC
    w("## rdmarpc over tcp:// vs gRPC C++ over TCP (same .proto, same client options)")
    w("")
    w("| payload | in flight | rdmarpc calls/s | gRPC calls/s | ratio | rdmarpc p50 µs | gRPC p50 µs | ratio | rdmarpc p99 µs | gRPC p99 µs | ratio |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    concs = sorted({r["concurrency"] for r in res.echo if r["transport"] == "tcp"})
    for s in res.payloads:
        for c in concs:
            a, b = res.rate("rdmarpc", "tcp", s, c), res.rate("grpc", "tcp", s, c)
            a50, b50 = res.lat("rdmarpc", "tcp", s, c), res.lat("grpc", "tcp", s, c)
            a99, b99 = res.lat("rdmarpc", "tcp", s, c, "p99"), res.lat("grpc", "tcp", s, c, "p99")
            w(f"| {size_label(s)} | {c} | {fmt(a)} | {fmt(b)} | {fmt_ratio(ratio(a, b))} | {fmt(a50)} | {fmt(b50)} | "
              f"{fmt_ratio(ratio(a50, b50))} | {fmt(a99)} | {fmt(b99)} | {fmt_ratio(ratio(a99, b99))} |")
    w("")

    # --- CPU cost
    w("## CPU cost per call (callgrind, 64 B echo, 1 in flight, client + server)")
    w("")
    w("Both sides run in one process (server thread + client thread); two runs with different call")
    w("counts are differenced, so start-up and warm-up cancel out. User-space instructions only")
    w("(callgrind does not see the kernel), the same for every system.")
    w("")
    w("| system | transport | instructions / call | ratio to gRPC |")
    w("|---|---|---:|---:|")
    g = res.ipc("grpc", "tcp")
    for r in res.callgrind:
        w(f"| {r['system']} | {r['transport']} | {fmt(r['instructions_per_call'])} | "
          f"{fmt_ratio(ratio(r['instructions_per_call'], g))} |")
    w("")

    if res.profile:
        w("Where rdmarpc's instructions go (tcp, 64 B, 5000 calls + start-up; self cost, top 20):")
        w("")
        w("```")
        for line in res.profile.splitlines():
            # keep the function, drop the long file paths and template noise
            line = re.sub(r"\s*\[[^\]]*\]$", "", line)
            w(line[:150])
        w("```")
        w("")

    # --- idle
    w("## Idle cost (connected client + server in one process, no calls)")
    w("")
    w("| system | transport | mode | wall s | CPU ms | CPU % of one core |")
    w("|---|---|---|---:|---:|---:|")
    for r in res.idle:
        w(f"| {r['system']} | {r['transport']} | {r['mode']} | {r['seconds']:.1f} | {r['cpu_seconds'] * 1e3:.1f} | "
          f"{r['cpu_percent']:.3f} |")
    w("")

    # --- cross comparison, reported not targeted
    w("## For reference only: rdmarpc over rxe vs gRPC over TCP (not a target)")
    w("")
    w("rxe is software on top of the kernel's UDP stack, so this says more about rxe than about rdmarpc.")
    w("")
    w("| payload | in flight | rdmarpc rdma calls/s | gRPC tcp calls/s | ratio | rdmarpc rdma p50 µs | gRPC p50 µs | ratio |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in res.payloads:
        for c in concs:
            a, b = res.rate("rdmarpc", "rdma", s, c), res.rate("grpc", "tcp", s, c)
            a50, b50 = res.lat("rdmarpc", "rdma", s, c), res.lat("grpc", "tcp", s, c)
            w(f"| {size_label(s)} | {c} | {fmt(a)} | {fmt(b)} | {fmt_ratio(ratio(a, b))} | {fmt(a50)} | {fmt(b50)} | "
              f"{fmt_ratio(ratio(a50, b50))} |")
    w("")

    # --- every point
    w("## Every echo point")
    w("")
    w("| system | transport | mode | payload | in flight | calls | errors | calls/s | MB/s | p50 | p90 | p99 | p99.9 | max (µs) |")
    w("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in res.echo:
        l = r["latency_us"]
        w(f"| {r['system']} | {r['transport']} | {r['mode']} | {size_label(r['payload'])} | {r['concurrency']} | "
          f"{r['calls']} | {r['errors']} | {fmt(r['calls_per_s'])} | {fmt(r['mb_per_s'], 2)} | {fmt(l['p50'])} | "
          f"{fmt(l['p90'])} | {fmt(l['p99'])} | {fmt(l['p99.9'])} | {fmt(l['max'])} |")
    w("")
    w("## perftest raw figures (one-way µs as printed; bandwidth MB/s)")
    w("")
    w("| test | bytes | iterations | typical | avg | p99 | p99.9 | BW avg MB/s | msg/s |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (test, s), r in sorted(res.perftest.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        w(f"| {test} | {s} | {int(r.get('iterations', 0))} | {fmt(r.get('t_typical'), 2)} | {fmt(r.get('t_avg'), 2)} | "
          f"{fmt(r.get('p99'), 2)} | {fmt(r.get('p999'), 2)} | {fmt(r.get('bw_avg_mb_s'), 2)} | {fmt(r.get('msgs_per_s'))} |")
    w("")
    w("![latency percentiles](latency.png)")
    w("")
    return "\n".join(L)


# ---------------------------------------------------------------------------------------- plot data
def plot_files(res, out_dir):
    """latency.dat: one block per payload, a row per system; latency.gp draws latency.png."""
    series = [
        ("perftest-send-lat-e-RTT", lambda s, p: res.pt("ib_send_lat_e", s, {"p50": "rtt_t_typical", "p90": None,
                                                                              "p99": "rtt_p99", "p99.9": "rtt_p999"}[p] or "none")),
        ("perftest-send-lat-poll-RTT", lambda s, p: res.pt("ib_send_lat", s, {"p50": "rtt_t_typical", "p90": None,
                                                                               "p99": "rtt_p99", "p99.9": "rtt_p999"}[p] or "none")),
        ("rdmarpc-rdma-event", lambda s, p: res.lat("rdmarpc", "rdma", s, 1, p)),
        ("rdmarpc-rdma-busy-poll", lambda s, p: res.lat("rdmarpc", "rdma", s, 1, p, mode="busy_poll")),
        ("rdmarpc-tcp", lambda s, p: res.lat("rdmarpc", "tcp", s, 1, p)),
        ("gRPC-tcp", lambda s, p: res.lat("grpc", "tcp", s, 1, p)),
    ]
    blocks = []
    for s in res.payloads:
        rows = [f"# payload {size_label(s)}: system p50 p90 p99 p99.9"]
        for name, get in series:
            vals = [get(s, p) for p in ("p50", "p90", "p99", "p99.9")]
            if all(v is None for v in vals):
                continue
            rows.append(name + " " + " ".join("NaN" if v is None else f"{v:.3f}" for v in vals))
        blocks.append("\n".join(rows))
    with open(os.path.join(out_dir, "latency.dat"), "w") as f:
        f.write("\n\n\n".join(blocks) + "\n")
    n = len(res.payloads)
    cols = 2 if n > 1 else 1
    rows = (n + cols - 1) // cols
    gp = [
        "set terminal pngcairo size 1400,%d font ',10'" % (450 * rows),
        "set output 'latency.png'",
        "set style data histogram",
        "set style histogram clustered gap 1",
        "set style fill solid 0.85 border -1",
        "set logscale y",
        "set ylabel 'latency, µs (log)'",
        "set grid ytics",
        "set key top left",
        "set xtics rotate by -20",
        "set datafile missing 'NaN'",
        f"set multiplot layout {rows},{cols} title 'Echo latency percentiles at 1 call in flight "
        "(perftest: round trip = 2 × one-way; no p90 from perftest)'",
    ]
    for i, s in enumerate(res.payloads):
        gp.append(f"set title '{size_label(s)}'")
        gp.append(f"plot 'latency.dat' index {i} using 2:xtic(1) title 'p50', '' index {i} using 3 title 'p90', "
                  f"'' index {i} using 4 title 'p99', '' index {i} using 5 title 'p99.9'")
    gp.append("unset multiplot")
    with open(os.path.join(out_dir, "latency.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    raw, out_dir = argv[1], argv[2]
    meta = {}
    for a in argv[3:]:
        if a.startswith("--meta="):
            a = a[len("--meta="):]
        if "=" in a:
            k, v = a.split("=", 1)
            meta[k] = v
    os.makedirs(out_dir, exist_ok=True)
    res = results(raw)
    tgts = targets(res)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(markdown(res, meta, tgts))
    doc = {
        "meta": meta,
        "targets": tgts,
        "perftest": [dict(v, test=k[0], payload=k[1]) for k, v in sorted(res.perftest.items())],
        "echo": res.echo,
        "idle": res.idle,
        "clock": res.clock,
        "callgrind": res.callgrind,
    }
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    plot_files(res, out_dir)
    for t in tgts:
        print(re.sub(r"\*\*", "", t["line"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
