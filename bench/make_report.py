#!/usr/bin/env python3
"""bench/make_report.py: turns the raw output of one bench/compare run into the three result files.

  make_report.py RAW_DIR OUT_DIR [--meta KEY=VALUE ...]
  make_report.py --callgrind-record SYSTEM TRANSPORT HANDLER LOW HIGH LOW.out HIGH.out
      (bench/compare's callgrind stage: one JSON line for callgrind.jsonl from two profiles)

RAW_DIR holds what bench/compare collected:
  vm/perftest/<test>-<size>.txt  perftest client output (ib_send_lat, ib_send_lat_e, ib_send_bw); the
                                 latency tests also at the 64 B echo's wire size, here and in each round
  vm/frame_bytes                 that size (rdmarpc_echo_bench frame-size); absent: no such section
  vm/echo.jsonl                  rdmarpc / gRPC / Cap'n Proto points (echo calls, and server streams with
                                 "rpc": "server_stream") and idle probes (one JSON object per line)
  vm/rounds/<r>/perftest/*.txt, vm/rounds/<r>/echo.jsonl
                                 the 64 B points behind the rxe targets, measured again in more rounds
                                 (the targets are judged on the median of the per-round ratios)
  vm/rounds/<r>/echo-coroutine.jsonl
                                 the busy-poll 64 B point with the server's coroutine handler (what an
                                 instruction on the round trip costs)
  vm/rounds/<r>/transport_floor.jsonl
                                 rdmarpc's transport alone, busy-poll, the echo's wire size (the
                                 transport's share of the distance from perftest)
  vm/ucx/<test>.txt              ucx_perftest client output (tag_lat, tag_bw over rc_verbs on rxe0)
  vm/ucx/status.jsonl            how each UCX run went (settings, exit status)
  vm/liveness.jsonl              dead-peer detection and failover runs (rdmarpc_failover_bench) and
                                 heartbeat CPU probes (rdmarpc_echo_bench heartbeats); absent when the
                                 VM's liveness part did not run
  liveness-host.jsonl            the heartbeat CPU probes on the host (tcp://127.0.0.1, with and without
                                 heartbeats), the figure the heartbeat target is judged on, and
                                 heartbeat_floor's record (raw sockets, an exchange per connection); absent with
                                 --no-host-liveness
  cut/cut.jsonl                  the two-host bed's link-cut runs (tests/multihost, MULTIHOST_JSON): time from
                                 the link going silent to detection and to pick_first failover; absent
                                 with --no-cut
  callgrind.jsonl                instructions, stages and allocations per call (callgrind: on the host, and
                                 rdmarpc over rdma:// in the VM)
OUT_DIR gets results.md (tables with ratios and one line per target), results.json (every number)
and latency.dat + latency.gp, from which bench/compare draws latency.png with gnuplot.
Standard library only, so it runs on a fresh Debian with nothing but python3.
"""

import json
import os
import re
import sys

PAYLOADS_DEFAULT = [64, 4096, 65536, 1048576]


def fmt_per_call(x):
    """A per-call count differenced from two runs: it can come out a hair below zero (the longer run
    allocated a few blocks fewer), which reads as "-0.00"; within rounding it is 0."""
    return f"{0.0 if abs(x) < 0.005 else x:.2f}"


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


def fmt_count(v):
    return "n/a" if v is None else f"{v:,.0f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_ratio(r):
    return "n/a" if r is None else f"{r:.2f}×"


def median(values):
    """Unrounded (a target compares it with its limit); round where it is shown."""
    v = sorted(values)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


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


def parse_ucx(path):
    """The "Final:" row of an ucx_perftest client output as a dict, or None when there is none.
    Latency tests print one-way latency (each round trip halved), like perftest."""
    with open(path, errors="replace") as f:
        text = f.read()
    for line in text.splitlines():
        m = re.match(r"^Final:\s+(.*)$", line.strip())
        if not m:
            continue
        try:
            vals = [float(c) for c in m.group(1).split()]
        except ValueError:
            return None
        if len(vals) < 8:
            return None
        keys = ["iterations", "lat_typical", "lat_avg", "lat_overall", "bw_avg_mb_s", "bw_overall_mb_s",
                "msg_rate_avg", "msgs_per_s"]
        r = dict(zip(keys, vals))
        r["rtt_typical"] = 2 * r["lat_typical"]
        return r
    return None


def ucx_errors(path, limit=6):
    """The lines of an ucx_perftest output that say what went wrong (UCX's ERROR lines first)."""
    if not os.path.exists(path):
        return []
    with open(path, errors="replace") as f:
        lines = [l.rstrip() for l in f if l.strip() and not l.startswith(("+", "|"))]
    lines = [l for l in lines if not re.match(r"^\s*\d+\s+\S*(/|ucx_perftest)", l) and not l.startswith("====")]
    bad = [l for l in lines if re.search(r"ERROR|Fatal|error|failed|Terminated|unreachable", l)]
    # UCX prefixes each line with a timestamp and the host:pid; the message is what matters.
    bad = [re.sub(r"^\[[0-9.]+\]\s+\[[^\]]*\]\s+", "", l) for l in (bad or lines)]
    return bad[:limit]


# ---------------------------------------------------------------------------------------- callgrind
# Per-stage breakdown of one rdmarpc call, from callgrind's inclusive costs. A function's inclusive
# cost is the cost of every instruction executed in it (including code the compiler inlined into
# it) plus the inclusive cost of every call it makes: the figure `callgrind_annotate
# --inclusive=yes` prints for the function's own file entry. It is read straight from the profile
# (callgrind's file format), so inlined parts listed under other files are not counted twice.
# Functions are matched by name; the report prints what matched, so a rename shows up as "n/a".
#
#   stage            function (inclusive cost)                       covers
#   client send      rdmarpc::bench::EchoBench::Stub::do_echo        the generated stub call, the channel's
#                                                                    call record, the request frame written
#                                                                    into the reservation, commit
#   server dispatch  rdmarpc::server_connection_detail::             rpc/server_connection.cpp: frame
#                    connection_impl::on_message                     decode, method lookup, request parse,
#                                                                    the handler, reply written
#                                                                    and committed
#   client receive   rdmarpc::channel_detail::connection_events::    rpc/channel.cpp: reply decode, call
#                    on_message, minus client send                   lookup, reply parse, completion; the
#                                                                    bench's completion handler starts the
#                                                                    next call inside it (closed loop), so
#                                                                    that call's send is taken out again
#   rest             total per call minus the three                  the transport's delivery (loopback
#                                                                    post / tcp reads and writes), Asio's
#                                                                    scheduler and reactor, thread wake-ups
# Reported for the callback handler; a coroutine handler that never suspends (the echo) also runs
# inside on_message, its frames' teardown after the reply's commit.
STAGE_FUNCTIONS = {
    "client_send": r"^rdmarpc::bench::EchoBench::Stub::do_echo\(",
    "server_dispatch": r"^rdmarpc::server_connection_detail::connection_impl::on_message\(",
    "client_receive_gross": r"^rdmarpc::channel_detail::connection_events::on_message\(",
}
STAGES = [("client_send", "client send (stub call through commit)"),
          ("server_dispatch", "server dispatch (request decode + parse + handler + reply write)"),
          ("client_receive", "client receive (reply decode + parse + completion)"),
          ("rest", "rest (transport delivery, Asio scheduler / reactor)")]
# Heap allocations: calls to these functions. bench/compare runs callgrind with
# --separate-callers8 on them, so each allocation site is its own context ("operator new'caller'
# caller's caller'..."): a context with protobuf code (or a generated message's own methods) in its
# chain is protobuf allocating inside the messages (tests/rpc/allocation_test.cpp does not charge
# those to the framework either).
NEW_FUNCTIONS = ("operator new",)
MALLOC_FUNCTIONS = ("malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign")
PROTOBUF_CHAIN = re.compile(r"google::protobuf|::Echo(Request|Reply)::")


def read_callgrind(path):
    """(total Ir, inclusive Ir by function, calls by function) of one callgrind profile."""
    names, incl, calls = {}, {}, {}
    fn = cfn = None
    pending = 0
    total = None
    name_rx = re.compile(r"^(c?fn)=\((\d+)\)(?: (.*))?$")
    with open(path, errors="replace") as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                ir = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
                incl[fn] = incl.get(fn, 0) + ir
                if pending:
                    calls[cfn] = calls.get(cfn, 0) + pending
                    pending = 0
                continue
            m = name_rx.match(line.rstrip("\n"))
            if m:
                kind, ident, name = m.groups()
                if name is not None:
                    names[ident] = name
                if kind == "fn":
                    fn = names.get(ident, ident)
                else:
                    cfn = names.get(ident, ident)
            elif line.startswith("calls="):
                pending = int(line[6:].split()[0])
            elif line.startswith("summary:") or line.startswith("totals:"):
                total = int(line.split()[1])
    return total, incl, calls


def digest_callgrind(path):
    total, incl, calls = read_callgrind(path)
    stages, matched = {}, {}
    for key, rx in STAGE_FUNCTIONS.items():
        names = [n for n in incl if n and re.search(rx, n)]
        stages[key] = sum(incl[n] for n in names) if names else None
        matched[key] = names
    alloc = {"new": 0, "new_protobuf": 0, "malloc": 0, "malloc_protobuf": 0}
    for name, n in calls.items():
        if not name:
            continue
        base, _, chain = name.partition("'")
        kind = ("new" if base.startswith(NEW_FUNCTIONS) else
                "malloc" if base in MALLOC_FUNCTIONS else None)
        if kind is None:
            continue
        alloc[kind] += n
        if PROTOBUF_CHAIN.search(chain):
            alloc[kind + "_protobuf"] += n
    return {"ir": total, "stages": stages, "matched": matched, "alloc": alloc}


def callgrind_record(argv):
    system, transport, handler, low, high, out_low, out_high = argv
    low, high = int(low), int(high)
    a, b = digest_callgrind(out_low), digest_callgrind(out_high)
    per = lambda x, y: None if x is None or y is None else (y - x) / (high - low)
    # HANDLER "stream": per streamed message of a server stream (rdmarpc serves it with a coroutine
    # in either service); "calls" are then messages received.
    stream = handler == "stream"
    rec = {"kind": "callgrind", "system": system, "transport": transport,
           "handler": None if handler in ("-", "stream") else handler,
           "rpc": "server_stream" if stream else "unary", "calls_low": low, "calls_high": high,
           "ir_low": a["ir"], "ir_high": b["ir"],
           "instructions_per_call": int(per(a["ir"], b["ir"]))}
    for k in ("new", "new_protobuf", "malloc", "malloc_protobuf"):
        rec[k + "_per_call"] = round(per(a["alloc"][k], b["alloc"][k]), 3)
    if system == "rdmarpc" and not stream:
        st = {k: per(a["stages"][k], b["stages"][k]) for k in STAGE_FUNCTIONS}
        send, disp, recv = st["client_send"], st["server_dispatch"], st["client_receive_gross"]
        stages = {"client_send": send, "server_dispatch": disp,
                  "client_receive": None if recv is None or send is None else recv - send}
        known = [v for v in stages.values() if v is not None]
        stages["rest"] = rec["instructions_per_call"] - sum(known) if len(known) == 3 else None
        rec["stages"] = {k: None if v is None else round(v) for k, v in stages.items()}
        rec["stage_functions"] = {k: [n[:200] for n in v] for k, v in b["matched"].items()}
    print(json.dumps(rec, ensure_ascii=False))
    return 0


def load_perftest(pdir):
    """(test, size) -> the parsed result of each perftest output in pdir."""
    out = {}
    if os.path.isdir(pdir):
        for name in sorted(os.listdir(pdir)):
            m = re.match(r"^(ib_send_lat_e|ib_send_lat|ib_send_bw)-(\d+)\.txt$", name)
            if m:
                r = parse_perftest(os.path.join(pdir, name))
                if r:
                    r["test"] = m.group(1)
                    out[(m.group(1), int(m.group(2)))] = r
    return out


def find_point(records, system, transport, mode, payload, concurrency):
    """The echo or stream point with these settings, or None."""
    return next((r for r in records if (r["system"], r["transport"], r["mode"], r["payload"], r["concurrency"]) ==
                 (system, transport, mode, payload, concurrency)), None)


def unary_points(records):
    return [r for r in records if r.get("kind") is None and r.get("rpc", "unary") == "unary"]


class vm_round:
    """One round of VM measurements: perftest's results and the echo points (rdmarpc's and the baselines')."""

    def __init__(self, perftest, echo, coroutine=(), transport_floor=()):
        self.perftest = perftest  # (test, size) -> dict
        self.echo = echo
        # The busy-poll 64 B point again with the server's coroutine handler (extra rounds only).
        self.coroutine = list(coroutine)
        # rdmarpc's transport alone, busy-poll, the echo's wire size (extra rounds only; transport_floor).
        self.transport_floor = list(transport_floor)

    def transport_p50(self, payload):
        return next((r["p50_us"] for r in self.transport_floor if r.get("mode") == "busy_poll"
                     and r.get("transport") == "rdma" and r.get("payload") == payload), None)

    def point(self, system, transport, payload, concurrency, mode="event"):
        return find_point(self.echo, system, transport, mode, payload, concurrency)

    def lat(self, system, transport, payload, concurrency, pct="p50", mode="event"):
        p = self.point(system, transport, payload, concurrency, mode)
        return p["latency_us"][pct] if p and p["calls"] > 0 else None

    def rate(self, system, transport, payload, concurrency, mode="event"):
        p = self.point(system, transport, payload, concurrency, mode)
        return p["calls_per_s"] if p and p["calls"] > 0 else None

    def pt(self, test, size, key):
        r = self.perftest.get((test, size))
        return r.get(key) if r else None


class results(vm_round):
    def __init__(self, raw):
        records = load_jsonl(os.path.join(raw, "vm", "echo.jsonl"))
        super().__init__(load_perftest(os.path.join(raw, "vm", "perftest")), unary_points(records))
        points = [r for r in records if r.get("kind") is None]
        # The rounds the rxe targets are judged on: the points above, then guest_bench.sh's extra rounds.
        rdir = os.path.join(raw, "vm", "rounds")
        extra = sorted(int(d) for d in os.listdir(rdir) if d.isdigit()) if os.path.isdir(rdir) else []
        self.rounds = [self] + [vm_round(load_perftest(os.path.join(rdir, str(d), "perftest")),
                                         unary_points(load_jsonl(os.path.join(rdir, str(d), "echo.jsonl"))),
                                         unary_points(load_jsonl(os.path.join(rdir, str(d), "echo-coroutine.jsonl"))),
                                         load_jsonl(os.path.join(rdir, str(d), "transport_floor.jsonl")))
                                for d in extra]
        self.stream = [r for r in points if r.get("rpc") == "server_stream"]
        self.clock = next((r for r in records if r.get("kind") == "clock"), None)
        self.idle = [r for r in records if r.get("kind") == "idle"]
        # Liveness (issue 11), the VM's "liveness" part: one record per detection or failover run
        # and one per heartbeat probe. Older raw directories and --only without it have none.
        # The host's heartbeat probes (tcp only) come from bench/compare itself; "where" tells them apart.
        lv = load_jsonl(os.path.join(raw, "vm", "liveness.jsonl"))
        self.detect = [r for r in lv if r.get("kind") == "detect"]
        self.failover = [r for r in lv if r.get("kind") == "failover"]
        self.heartbeats_vm = [dict(r, where="vm") for r in lv if r.get("kind") == "heartbeats"]
        self.heartbeats_host = [dict(r, where="host") for r in load_jsonl(os.path.join(raw, "liveness-host.jsonl"))
                                if r.get("kind") == "heartbeats"]
        self.heartbeats = self.heartbeats_host + self.heartbeats_vm
        # heartbeat_floor on the host: the same exchanges on raw sockets (what any heartbeat costs here).
        self.heartbeat_floor = next((r for r in load_jsonl(os.path.join(raw, "liveness-host.jsonl"))
                                     if r.get("kind") == "heartbeat_floor"), None)
        # A cut link in the two-host bed (bench/compare's "cut" part), one record per case and run.
        self.cuts = [r for r in load_jsonl(os.path.join(raw, "cut", "cut.jsonl")) if r.get("kind") == "cut"]
        # A run whose cases failed (an assertion, or host 2 unreachable) left fewer records: its
        # lines in cut-failures.txt make the cut targets missed, whatever the other runs measured.
        failures = os.path.join(raw, "cut", "cut-failures.txt")
        self.cut_failures = ([l.strip() for l in open(failures) if l.strip()] if os.path.exists(failures) else [])
        self.liveness = liveness_summary(self)
        cg = load_jsonl(os.path.join(raw, "callgrind.jsonl"))
        self.callgrind = [r for r in cg if r.get("rpc", "unary") == "unary"]
        self.callgrind_stream = [r for r in cg if r.get("rpc") == "server_stream"]
        # UCX (ucx_perftest) on rxe0: one status line per run; the client output beside it.
        udir = os.path.join(raw, "vm", "ucx")
        self.ucx = load_jsonl(os.path.join(udir, "status.jsonl"))
        for u in self.ucx:
            out = os.path.join(udir, u.get("file", ""))
            u["result"] = parse_ucx(out) if u.get("file") and os.path.exists(out) else None
            u["errors"] = [] if u["result"] else (ucx_errors(out) or [
                "server: " + l for l in ucx_errors(os.path.join(udir, u.get("server_log", "-")), 3)])
        top = os.path.join(raw, "callgrind-top.txt")
        self.profile = open(top).read().rstrip() if os.path.exists(top) else ""
        # (perftest's run at the echo's wire size has a section of its own, not a payload row.)
        self.frame_bytes = frame_bytes(raw)
        sizes = sorted({s for (_, s) in self.perftest if s != self.frame_bytes} | {r["payload"] for r in self.echo})
        self.payloads = sizes or PAYLOADS_DEFAULT

    def stream_point(self, system, transport, payload, streams, mode="event"):
        return find_point(self.stream, system, transport, mode, payload, streams)

    def stream_rate(self, system, transport, payload, streams, mode="event"):
        """Messages/s a server-streaming point received, or None."""
        p = self.stream_point(system, transport, payload, streams, mode)
        return p["calls_per_s"] if p and p["calls"] > 0 else None

    def cg_stream(self, system, transport):
        return next((r for r in self.callgrind_stream
                     if r["system"] == system and r["transport"] == transport), None)

    def cg(self, system, transport, handler=None):
        """The callgrind record of a system; rdmarpc's default is the callback handler."""
        if system == "rdmarpc" and handler is None:
            handler = "callback"
        for r in self.callgrind:
            if r["system"] == system and r["transport"] == transport and r.get("handler") in (handler, None):
                return r
        return None

    def ipc(self, system, transport, handler=None):
        r = self.cg(system, transport, handler)
        return r["instructions_per_call"] if r else None

    def ucx_run(self, test):
        """The successful UCX run of `test` (am_lat, am_bw, tag_lat, ...), or None."""
        for u in self.ucx:
            if u.get("test") == test and u.get("result"):
                return u
        return None

    def idle_runs(self, system, transport, mode="event"):
        """Every idle probe of the pair, in the order run."""
        return [r for r in self.idle if (r["system"], r["transport"], r["mode"]) == (system, transport, mode)]

    def idle_of(self, system, transport, mode="event"):
        """The pair's median idle probe by CPU (the lower middle one of an even count), or None: one
        probe moves by 2x between runs."""
        runs = sorted(self.idle_runs(system, transport, mode), key=lambda r: r["cpu_percent"])
        return runs[(len(runs) - 1) // 2] if runs else None


# ---------------------------------------------------------------------------------------- targets
def tcp_floor_suffix(res, rdmarpc_tcp):
    """The tcp instruction target's information: what the event loop alone costs (tcp_floor)."""
    floor, bare = res.ipc("tcp_floor", "tcp", "asio"), res.ipc("tcp_floor", "tcp", "epoll")
    if floor is None:
        return ""
    text = (f"; the same round trip with no rpc (tcp_floor): {fmt_count(floor)} with Asio driving the sockets as "
            "the transport does")
    if bare is not None:
        text += f", {fmt_count(bare)} with a bare epoll loop"
    if rdmarpc_tcp is not None:
        text += f", so rdmarpc's work beyond that floor (a wait, a recv and a send per side) is {fmt_count(rdmarpc_tcp - floor)}"
    return text


def transport_floor_suffix(res, transport, rdmarpc_calls):
    """The instruction targets' information: what rdmarpc's transport alone costs (transport_floor)."""
    alone = res.ipc("transport_floor", transport, None)
    if alone is None:
        return ""
    text = f"; rdmarpc's transport alone, no rpc layer (transport_floor): {fmt_count(alone)}"
    if rdmarpc_calls is not None:
        text += f", so the rpc layer's share is {fmt_count(rdmarpc_calls - alone)}"
    return text


def idle_measured(res, mode):
    """The idle target's measured text: the median probe, and every run when there were several."""
    idle = res.idle_of("rdmarpc", "rdma", mode=mode)
    if idle is None:
        return "n/a"
    text = f"{idle['cpu_percent']:.3f} % ({idle['cpu_seconds'] * 1e3:.1f} ms CPU in {idle['seconds']:.1f} s)"
    runs = res.idle_runs("rdmarpc", "rdma", mode=mode)
    if len(runs) > 1:
        each = ", ".join(f"{r['cpu_percent']:.3f}" for r in runs)
        text += f", median of {len(runs)} runs ({each} %)"
    return text


def idle_without_heartbeats(res, mode):
    """The idle probe's information suffix: the same pair without heartbeats (the polling mode's
    own cost at rest), when the run has it."""
    r = res.idle_of("rdmarpc", "rdma", mode=f"{mode}-no_heartbeats")
    if r is None:
        return ""
    return (f"; with heartbeats off {r['cpu_percent']:.3f} %: the rest is the default heartbeats' one "
            f"ping/pong per ~600 ms, a few ms of CPU each under TCG (Liveness: Heartbeat CPU)")


# The rxe targets: each the ratio of two 64 B figures measured in the same round (key, target,
# limit on the ratio, lower is better, rdmarpc's figure, the baseline's figure, unit). Each is
# judged on the median of its per-round ratios: one round's ratio moves by tens of percent with the
# VM's speed.
RXE_RATIOS = [
    ("event", "64 B echo p50 over rxe, event mode ≤ 1.25 × ib_send_lat -R -e round trip", 1.25, True,
     lambda r: r.lat("rdmarpc", "rdma", 64, 1), lambda r: r.pt("ib_send_lat_e", 64, "rtt_t_typical"), "µs"),
    ("busy_poll", "64 B echo p50 over rxe, busy-poll mode ≤ 1.25 × ib_send_lat -R (polling) round trip", 1.25, True,
     lambda r: r.lat("rdmarpc", "rdma", 64, 1, mode="busy_poll"), lambda r: r.pt("ib_send_lat", 64, "rtt_t_typical"),
     "µs"),
    ("adaptive", "64 B echo p50 over rxe, adaptive mode ≤ 1.2 × busy-poll p50", 1.2, True,
     lambda r: r.lat("rdmarpc", "rdma", 64, 1, mode="adaptive"),
     lambda r: r.lat("rdmarpc", "rdma", 64, 1, mode="busy_poll"), "µs"),
    ("rate", "64 B echo calls/s over rxe at 64 in flight, adaptive polling (the library default) "
     "≥ 0.6 × ib_send_bw -R -s 64 messages/s", 0.6, False,
     lambda r: r.rate("rdmarpc", "rdma", 64, 64, mode="adaptive"), lambda r: r.pt("ib_send_bw", 64, "msgs_per_s"),
     "/s"),
]


# A verdict on an rxe ratio needs a quiet host. The sign of a busy one: the raw-verbs baseline (perftest,
# the same program every round) moving between the rounds of one run. Its spread is the largest
# figure over the smallest once the rounds of the highest and the lowest are left out (one odd round,
# often the main run's, should not decide it). Past RXE_NOISE_SPREAD the report says "not judged"
# instead of MET or MISSED, and still gives the ratios. On quiet hosts the spread stayed within 1.15x
# (the runs of 2026-12-05), 1.2x at most on others; the noisiest runs reached 1.4-1.7x.
RXE_NOISE_SPREAD = 1.3
# The perftest figure each target's host-noise check reads (the adaptive target's baseline is
# rdmarpc's own busy-poll point, which is no sign of the host: it reads perftest's polling latency).
RXE_NOISE = {
    "event": ("ib_send_lat -R -e", lambda r: r.pt("ib_send_lat_e", 64, "rtt_t_typical"), "µs"),
    "busy_poll": ("ib_send_lat -R", lambda r: r.pt("ib_send_lat", 64, "rtt_t_typical"), "µs"),
    "adaptive": ("ib_send_lat -R", lambda r: r.pt("ib_send_lat", 64, "rtt_t_typical"), "µs"),
    "rate": ("ib_send_bw -R", lambda r: r.pt("ib_send_bw", 64, "msgs_per_s"), "msg/s"),
}


def without_extremes(values):
    """`values` sorted, the highest and the lowest left out when there are at least 4."""
    v = sorted(values)
    return v[1:-1] if len(v) >= 4 else v


def round_ratios(res, value, base):
    """Per round: (rdmarpc's figure, the baseline's, their ratio or None)."""
    return [(value(r), base(r), ratio(value(r), base(r))) for r in res.rounds]


def instruction_cost(res):
    """What one more user-space instruction on the call path costs in busy-poll p50 over rxe here:
    the extra rounds measure the busy-poll 64 B point with the server's coroutine handler next to the
    callback one; their p50 difference over the two handlers' instruction difference (callgrind,
    loopback: the handler's work does not depend on the transport). From it, the instructions the
    busy-poll target leaves rdmarpc over the raw-verbs round trip. None without those figures."""
    rows = []
    for i, r in enumerate(res.rounds):
        if not r.coroutine:
            continue
        cb = r.lat("rdmarpc", "rdma", 64, 1, mode="busy_poll")
        co = vm_round({}, r.coroutine).lat("rdmarpc", "rdma", 64, 1, mode="busy_poll")
        rows.append({"round": i + 1, "callback_p50_us": cb, "coroutine_p50_us": co,
                     "delta_us": None if cb is None or co is None else co - cb,
                     "perftest_rtt_us": r.pt("ib_send_lat", 64, "rtt_t_typical")})
    cb_ipc, co_ipc = res.ipc("rdmarpc", "loopback", "callback"), res.ipc("rdmarpc", "loopback", "coroutine")
    deltas = [x["delta_us"] for x in rows if x["delta_us"] is not None]
    rtts = [x["perftest_rtt_us"] for x in rows if x["perftest_rtt_us"] is not None]
    if len(deltas) < 3 or not rtts or cb_ipc is None or co_ipc is None or co_ipc <= cb_ipc:
        return {"rounds": rows, "ns_per_instruction": None} if rows else None
    extra = co_ipc - cb_ipc
    delta = median(deltas)
    ns = delta / extra * 1e3
    if ns <= 0:  # the VM's drift swamped the difference: no estimate
        return {"rounds": rows, "ns_per_instruction": None}
    rtt = median(rtts)
    return {"rounds": rows, "extra_instructions": extra, "median_delta_us": delta, "ns_per_instruction": ns,
            "perftest_rtt_us": rtt, "rdma_instructions": res.ipc("rdmarpc", "rdma", "callback"),
            "rdma_transport_instructions": res.ipc("transport_floor", "rdma", None),
            # The busy-poll target allows 0.25 x the raw round trip on top of it.
            "busy_poll_budget_instructions": 0.25 * rtt / ns * 1e3}


def targets(res):
    """One entry per target (issues #5, #9 and #11): value, limit, met, and how far from the limit."""
    out = []

    def add(name, value, limit, lower_is_better, value_text, limit_text, note="", fail=None):
        # fail: why the target is missed whatever the value says (lost calls, a run that never
        # recovered); the value is then shown as measured.
        if fail and (value is None or limit is None):
            out.append({"target": name, "value": value, "limit": limit, "met": False,
                        "line": f"**MISSED** — {name}: {fail}{note}"})
            return
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
        if fail:
            # Missed whatever the value says: margin_percent and value_within_limit describe the
            # value alone, and the line says so.
            out.append({"target": name, "value": value, "limit": limit, "met": False, "value_within_limit": met,
                        "margin_percent": by,
                        "line": f"**MISSED** — {name}: {value_text} vs limit {limit_text} ({by:.0f} % {how} "
                                f"the limit{', but' if met else ';'} {fail}){note}"})
            return
        out.append({"target": name, "value": value, "limit": limit, "met": met, "margin_percent": by,
                    "line": f"**{word}** — {name}: {value_text} vs limit {limit_text} ({by:.0f} % {how} the limit){note}"})

    def add_rxe_ratio(key):
        _, name, limit, lower, value, base, unit = next(x for x in RXE_RATIOS if x[0] == key)
        per = round_ratios(res, value, base)
        rs = [x[2] for x in per if x[2] is not None]
        n = len(per)
        # Judged only on enough rounds: dropping rounds can move a median across its limit.
        need = max(min(n, 3), (n + 1) // 2)
        v0, b0, _ = per[0]
        tool, noise_of, noise_unit = RXE_NOISE[key]
        # perftest's figure in the rounds that have a ratio, without its highest and lowest.
        noise = [noise_of(r) for r, p in zip(res.rounds, per) if p[2] is not None]
        kept = without_extremes(x for x in noise if x is not None and x > 0)
        spread = round(kept[-1] / kept[0], 2) if kept else None  # judged as shown
        if len(rs) < need:
            add(name, None, limit, lower, "", "",
                f"only {len(rs)} of {n} rounds have both figures (at least {need} needed; see the round table)")
        elif spread is not None and spread > RXE_NOISE_SPREAD:
            m = median(rs)
            out.append({"target": name, "value": m, "limit": limit, "met": None, "verdict": "not_judged",
                        "noise_spread": spread,
                        "line": f"**not judged** — {name}: the host was too noisy. `{tool}` ranged "
                                f"{fmt(kept[0])}–{fmt(kept[-1])} {noise_unit} across the rounds"
                                f"{' without its highest and lowest' if len(kept) < len(rs) else ''} "
                                f"({spread:.2f}×, more than {RXE_NOISE_SPREAD:.2f}×): median ratio {fmt_ratio(m)} of "
                                f"rounds {', '.join(fmt_ratio(x) for x in rs)}, limit {limit:.2f}×"})
        else:
            m = median(rs)
            add(name, m, limit, lower,
                f"median ratio {fmt_ratio(m)} of {len(rs)} of {n} rounds ({', '.join(fmt_ratio(x) for x in rs)})",
                f"{limit:.2f}×", f"; first round {fmt(v0)} vs {fmt(b0)} {unit}")
        out[-1]["unit"] = "ratio"  # older results.json files hold µs and calls/s for these targets

    for key in ("event", "busy_poll", "adaptive"):
        add_rxe_ratio(key)
    idle = res.idle_of("rdmarpc", "rdma", mode="adaptive")
    v = None if idle is None else idle["cpu_percent"]
    add("idle connected client+server over rdma (adaptive mode): ≤ 1 % of one core", v, 1.0, True,
        idle_measured(res, "adaptive"), "1 %", idle_without_heartbeats(res, "adaptive"))
    add_rxe_ratio("rate")
    bw = res.pt("ib_send_bw", 64, "msgs_per_s")
    v = res.stream_rate("rdmarpc", "rdma", 64, 1, mode="adaptive")
    add("server streaming over rxe, 64 B messages/s on one stream, adaptive polling "
        "≥ 0.7 × ib_send_bw -R -s 64 messages/s", v,
        None if bw is None else 0.7 * bw, False, f"{fmt(v)} msg/s",
        "n/a" if bw is None else f"0.7 × {fmt(bw)} msg/s = {fmt(0.7 * bw)}",
        "" if v is None or bw is None else f"; ratio {fmt_ratio(ratio(v, bw))}")
    g = res.stream_rate("grpc", "tcp", 64, 1)
    v = res.stream_rate("rdmarpc", "tcp", 64, 1)
    add("server streaming over tcp://, 64 B messages/s on one stream ≥ 3 × gRPC C++ streaming", v,
        None if g is None else 3 * g, False, f"{fmt(v)} msg/s",
        "n/a" if g is None else f"3 × {fmt(g)} msg/s = {fmt(3 * g)}",
        "" if v is None or g is None else f"; ratio {fmt_ratio(ratio(v, g))}")
    g = res.lat("grpc", "tcp", 64, 1)
    v = res.lat("rdmarpc", "tcp", 64, 1)
    add("tcp:// 64 B p50 at 1 in flight ≤ 0.5 × gRPC's", v, None if g is None else 0.5 * g, True,
        f"{fmt(v)} µs", "n/a" if g is None else f"0.5 × {fmt(g)} µs = {fmt(0.5 * g)} µs")
    g = res.rate("grpc", "tcp", 64, 64)
    v = res.rate("rdmarpc", "tcp", 64, 64)
    add("tcp:// 64 B calls/s at 64 in flight ≥ 2 × gRPC's", v, None if g is None else 2 * g, False,
        f"{fmt(v)} calls/s", "n/a" if g is None else f"2 × {fmt(g)} = {fmt(2 * g)}")
    c = res.lat("capnp", "tcp", 64, 1)
    v = res.lat("rdmarpc", "tcp", 64, 1)
    add("tcp:// 64 B p50 at 1 in flight ≤ 1.0 × Cap'n Proto RPC's", v, c, True,
        f"{fmt(v)} µs", "n/a" if c is None else f"1.0 × {fmt(c)} µs = {fmt(c)} µs",
        "" if c is None or v is None else f"; ratio {fmt_ratio(ratio(v, c))}")
    c = res.rate("capnp", "tcp", 64, 64)
    v = res.rate("rdmarpc", "tcp", 64, 64)
    add("tcp:// 64 B calls/s at 64 in flight ≥ 1.0 × Cap'n Proto RPC's", v, c, False,
        f"{fmt(v)} calls/s", "n/a" if c is None else f"1.0 × {fmt(c)} = {fmt(c)}",
        "" if c is None or v is None else f"; ratio {fmt_ratio(ratio(v, c))}")
    for transport in ("tcp", "loopback"):
        v = res.ipc("rdmarpc", transport, "callback")
        co = res.ipc("rdmarpc", transport, "coroutine")
        own = res.ipc("rdmarpc", transport, "callback+caller_reply")
        by_value = res.ipc("rdmarpc", transport, "callback+reply_by_value")
        dl = res.ipc("rdmarpc", transport, "callback+deadline")
        add(f"instructions per 64 B echo call (client+server), rdmarpc {transport}, callback handler (reply read by reference) ≤ 5,000",
            v, 5000, True, f"{fmt(v)}", "5,000",
            "" if v is None else f"; with the coroutine handler: {fmt(co)}"
            + ("" if by_value is None else f"; the handler taking the reply by value: {fmt(by_value)}")
            + ("" if own is None else f"; into the caller's own reply message (async_echo(request, reply, "
               f"token)): {fmt(own)}")
            + ("" if dl is None else f"; every call with a deadline (1 s): {fmt(dl)}")
            + (tcp_floor_suffix(res, v) if transport == "tcp" else "")
            + transport_floor_suffix(res, transport, v))
    base = res.ipc("rdmarpc", "loopback", "callback")
    for label, what in (("callback+metrics", "the server's built-in metrics"),
                        ("callback+interceptors", "metrics and a no-op interceptor on each side")):
        v = res.ipc("rdmarpc", "loopback", label)
        pct = None if v is None or not base else (v / base - 1) * 100
        add(f"cost of {what}, 64 B call, loopback, callback handler ≤ 5 % of the call's instructions", pct, 5.0,
            True, "n/a" if pct is None else f"{pct:.1f} % ({fmt(v)} vs {fmt(base)} instructions)", "5 %")
    r = res.cg("rdmarpc", "loopback", "callback")
    v = None if r is None or "new_per_call" not in r else r["new_per_call"] - r["new_protobuf_per_call"]
    add("heap allocations per 64 B echo call (operator new, client + server, loopback, callback handler), "
        "not counting protobuf's inside the messages ≤ 2", v, 2, True,
        "n/a" if v is None else fmt_per_call(v), "2",
        "" if v is None else f"; {fmt_per_call(r['new_per_call'])} in all, "
        f"{fmt_per_call(r['new_protobuf_per_call'])} by protobuf")
    idle = res.idle_of("rdmarpc", "rdma")
    v = None if idle is None else idle["cpu_percent"]
    add("idle connected client+server over rdma (event mode): CPU near zero (≤ 1 % of one core)", v, 1.0, True,
        idle_measured(res, "event"), "1 %", idle_without_heartbeats(res, "event"))
    liveness_targets(res, add)
    return out


LIVENESS_ABSENT = "the VM's liveness part did not run (an older run, --no-vm, or --only without liveness)"
HOST_HEARTBEATS_ABSENT = ("the host's heartbeat probe did not run (an older run, or --no-host-liveness); "
                          "the VM's figures in Liveness are information only")


def liveness_missing(res, kind, t):
    """Why a transport has no detection or failover figure: the VM part did not run, or it ran
    (its heartbeat probes are there) but rdmarpc_failover_bench left no records."""
    if not (res.detect or res.failover or res.heartbeats_vm):
        return LIVENESS_ABSENT
    if not (res.detect or res.failover):
        return ("the VM's liveness part ran but rdmarpc_failover_bench left no records (not built, or it "
                "failed: see raw/vm-console.log)")
    return f"no {kind} runs over {t} recorded (see raw/vm-console.log)"


CUT_ABSENT = ("the two-host bed's link-cut part did not run (an older run, --no-vm, --no-cut, --only without "
              "cut, or multihost_tests not built)")


def liveness_targets(res, add):
    """Issue 11's targets, per transport: detection ≤ 1 s (worst run, idle or busy); failover of
    wait_for_ready calls ≤ 1.5 s (worst run, either policy) with no lost call; heartbeats of 100
    idle connections ≤ 0.2 % of one core (client + server sides, minus the same without heartbeats),
    judged on the host over tcp: under TCG the VM's CPU shares are many times a real CPU's, so its
    heartbeat rows (rdma and tcp) are information only."""
    lv = res.liveness
    for t in ("rdma", "tcp"):
        rows = [d for d in lv["detect"] if d["transport"] == t]
        runs = sum(d["runs"] for d in rows)
        missed = sum(d["not_detected"] for d in rows)
        worst = max((d["max_ms"] for d in rows if d["max_ms"] is not None), default=None)
        parts = [f"{d['load_text']}: median {fmt(d['median_ms'], 0)} ms, max {fmt(d['max_ms'], 0)} ms" for d in rows]
        add(f"liveness, {t}: a hung server detected within 1 s (idle and with 8 calls in flight, worst run)",
            worst, 1000, True, f"{fmt(worst, 0)} ms (worst of {runs} runs)", "1,000 ms",
            f"; {'; '.join(parts)}" if parts else liveness_missing(res, "detection", t),
            fail=f"{missed} of {runs} runs not detected within 10 s" if missed else None)
    for t in ("rdma", "tcp"):
        rows = [f for f in lv["failover"] if f["transport"] == t]
        runs = sum(f["runs"] for f in rows)
        lost = sum(f["lost"] for f in rows)
        stuck = sum(f["not_recovered"] for f in rows)
        worst = max((f["failover_max_ms"] for f in rows if f["failover_max_ms"] is not None), default=None)
        why = [x for x in (f"{lost} lost calls" if lost else "",
                           f"{stuck} of {runs} runs did not recover within 10 s" if stuck else "") if x]
        parts = [f"{f['policy']}: median {fmt(f['failover_median_ms'], 0)} ms" for f in rows
                 if f["failover_median_ms"] is not None]
        add(f"liveness, {t}: wait_for_ready calls fail over to a second server within 1.5 s, no call lost "
            "(worst run)", worst, 1500, True, f"{fmt(worst, 0)} ms (worst of {runs} runs), {lost} lost",
            "1,500 ms, 0 lost",
            f"; {'; '.join(parts)}" if parts else liveness_missing(res, "failover", t),
            fail="; ".join(why) or None)
    cut_failed = (f"a run of the link-cut cases failed ({'; '.join(res.cut_failures)}; see raw/cut/cut-tests.log)"
                  if res.cut_failures else None)
    for t in ("rdma", "tcp"):
        rows = [c for c in lv["cut"] if c["transport"] == t and c["load"] in ("idle", "busy")]
        worst = max((c["detected_max_ms"] for c in rows if c["detected_max_ms"] is not None), default=None)
        parts = [f"{c['load_text']}: median {fmt(c['detected_median_ms'], 0)} ms, max {fmt(c['detected_max_ms'], 0)} ms"
                 for c in rows]
        add(f"liveness, {t}: a cut link detected within 1 s (two VMs; idle and with 16 calls in flight, worst run)",
            worst, 1000, True, f"{fmt(worst, 0)} ms (worst of {sum(c['runs'] for c in rows)} runs)", "1,000 ms",
            f"; {'; '.join(parts)}" if parts else CUT_ABSENT, fail=cut_failed)
    for t in ("rdma", "tcp"):
        c = next((c for c in lv["cut"] if c["transport"] == t and c["load"] == "failover"), None)
        worst = None if c is None else c["failover_max_ms"]
        add(f"liveness, {t}: wait_for_ready calls fail over to a healthy endpoint within 1.5 s of a cut link "
            "(two VMs, pick_first, worst run)", worst, 1500, True,
            f"{fmt(worst, 0)} ms (worst of {c['runs'] if c else 0} runs)", "1,500 ms",
            CUT_ABSENT if c is None else f"; median {fmt(c['failover_median_ms'], 0)} ms; detected (first call "
            f"failed) median {fmt(c['detected_median_ms'], 0)} ms; the calls in flight on the cut link fail "
            "UNAVAILABLE (never re-sent), the multi-host suite asserts it", fail=cut_failed)
    h = next((h for h in lv["heartbeats"] if h["where"] == "host" and h["transport"] == "tcp"), None)
    v = None if h is None else h["cost_percent"]
    if h is None:
        note = (HOST_HEARTBEATS_ABSENT if not res.heartbeats_host else
                "the host's probe with heartbeats gave no result (see raw/liveness-host.*.log)")
    elif v is None:
        note = "the host's probe without heartbeats (the baseline) gave no result (see raw/liveness-host.*.log)"
    else:
        pc = lambda x: "n/a" if x is None else f"{x:.3f} %"
        note = (f"; with heartbeats {pc(h['cpu_percent'])} (client side {pc(h['client_cpu_percent'])}, "
                f"server side {pc(h['server_cpu_percent'])}), without {pc(h['baseline_cpu_percent'])}, "
                f"{format(h['seconds'], '.0f')} s; depends on the host's syscall cost (see Liveness); "
                "the VM's rows (TCG, rdma and tcp) are information only")
        if h.get("floor_cpu_percent") is not None:
            note += (f"; raw sockets exchanging on every connection once per {h['floor_exchange_ms']} ms "
                     f"(heartbeat_floor: what any per-connection heartbeat pays) cost {pc(h['floor_cpu_percent'])} "
                     f"here, rdmarpc's {fmt(h['cost_over_floor'], 2)}× that, because its idle connections to one "
                     f"peer share their pings (clients in separate processes would each pay an exchange); a null syscall "
                     f"takes {fmt(h['null_syscall_us'], 2)} µs on this host")
    add("liveness, tcp on the host (event polling): heartbeats of 100 idle connections ≤ 0.2 % of one core "
        "(client + server sides, minus the same connections without heartbeats)", v, 0.2, True,
        "n/a" if v is None else f"{v:.3f} %", "0.2 %", note,
        fail=None if h is None or not h.get("heartbeat_timeouts") else
        f"{h['heartbeat_timeouts']} heartbeat timeouts on idle connections")


def pct(v):
    return "n/a" if v is None else f"{v:.3f}"


def liveness_summary(res):
    """The liveness tables' rows (results.json's liveness.summary): detection per transport and
    load, failover per transport and policy, heartbeat cost per place (host, vm), transport and
    polling mode."""
    detect, failover, heartbeats = [], [], []
    for t in ("rdma", "tcp"):
        for load, text in (("idle", "idle"), ("busy", "8 in flight")):
            runs = [r for r in res.detect if r.get("transport") == t and r.get("load") == load]
            if not runs:
                continue
            # A run that gave up counts with the time it waited (10 s): it is the worst case.
            ms = [r["detected_ms"] for r in runs]
            detect.append({"transport": t, "load": load, "load_text": text, "runs": len(runs),
                           "not_detected": sum(1 for r in runs if not r.get("detected")),
                           "median_ms": median(ms), "max_ms": max(ms), "runs_ms": ms})
        for policy in ("round_robin", "pick_first"):
            runs = [r for r in res.failover if r.get("transport") == t and r.get("policy") == policy]
            if not runs:
                continue
            ok = [r for r in runs if r.get("recovered")]
            fo = [r["failover_ms"] for r in ok]
            de = [r["detect_ms"] for r in runs if r.get("detect_ms", -1) >= 0]
            failover.append({"transport": t, "policy": policy, "runs": len(runs),
                             "not_recovered": len(runs) - len(ok),
                             "detect_median_ms": median(de), "detect_max_ms": max(de, default=None),
                             "failover_median_ms": median(fo), "failover_max_ms": max(fo, default=None),
                             "runs_ms": fo, "answered_median": median([r["ok"] for r in runs]),
                             "failed": [r["failed"] for r in runs], "lost": sum(r.get("hung", 0) for r in runs)})
    # Heartbeat cost: the host's rows (tcp; the target's) first, then the VM's (information).
    for where in ("host", "vm"):
        for t in ("rdma", "tcp"):
            for polling in ("adaptive", "event"):
                row = heartbeat_row(res, where, t, polling)
                if row is not None:
                    if where == "host" and t == "tcp":
                        add_floor(row, res.heartbeat_floor)
                    heartbeats.append(row)
    failed = [r for r in res.heartbeats if "cpu_percent" not in r]
    cut = []
    for t in ("rdma", "tcp"):
        for load, text in (("idle", "idle"), ("busy", "16 in flight"), ("failover", "pick_first failover")):
            runs = [r for r in res.cuts if r.get("transport") == t and r.get("load") == load]
            if not runs:
                continue
            de = [r["detected_ms"] for r in runs if r.get("detected_ms", -1) >= 0]
            fo = [r["failover_ms"] for r in runs if "failover_ms" in r]
            cut.append({"transport": t, "load": load, "load_text": text, "runs": len(runs),
                        "detected_median_ms": median(de), "detected_max_ms": max(de, default=None), "detected_ms": de,
                        "failover_median_ms": median(fo), "failover_max_ms": max(fo, default=None), "failover_ms": fo})
    return {"detect": detect, "failover": failover, "heartbeats": heartbeats, "cut": cut,
            "heartbeat_probes_failed": [{k: r.get(k) for k in ("where", "transport", "polling", "heartbeats", "rc")}
                                        for r in failed]}


def add_floor(row, floor):
    """The host row gains heartbeat_floor's figures: raw sockets exchanging at rdmarpc's rate."""
    if floor is None or "cpu_percent" not in floor:
        return
    row.update(floor_cpu_percent=floor["cpu_percent"], floor_exchange_ms=floor.get("exchange_ms"),
               floor_us_per_exchange=floor.get("us_per_exchange"), null_syscall_us=floor.get("null_syscall_us"),
               cost_over_floor=None if row["cost_percent"] is None or not floor["cpu_percent"] else
               round(row["cost_percent"] / floor["cpu_percent"], 3))


def heartbeat_row(res, where, t, polling):
    """One heartbeat table row: the probe with heartbeats next to the same without (the baseline)."""
    probes = [r for r in res.heartbeats if r.get("where") == where and r.get("transport") == t
              and r.get("polling") == polling and "cpu_percent" in r]
    on = next((r for r in probes if r.get("heartbeats")), None)
    off = next((r for r in probes if r.get("heartbeats") is False), None)
    if on is None:
        return None
    row = {"where": where, "transport": t, "polling": polling, "connections": on.get("connections", 100),
           "seconds": on["seconds"], "cpu_percent": on["cpu_percent"],
           "client_cpu_percent": on.get("client_cpu_percent"),
           "server_cpu_percent": on.get("server_cpu_percent"), "pings": on.get("pings"),
           "heartbeat_timeouts": on.get("heartbeat_timeouts"), "connects": on.get("connects"),
           "baseline_cpu_percent": None, "baseline_client_cpu_percent": None,
           "baseline_server_cpu_percent": None, "cost_percent": None}
    if off is not None:
        row.update(baseline_cpu_percent=off["cpu_percent"],
                   baseline_client_cpu_percent=off.get("client_cpu_percent"),
                   baseline_server_cpu_percent=off.get("server_cpu_percent"),
                   cost_percent=round(on["cpu_percent"] - off["cpu_percent"], 6))
    if row["pings"] is not None and on["seconds"]:
        row["pings_per_connection_s"] = round(row["pings"] / row["connections"] / on["seconds"], 3)
    return row


# ---------------------------------------------------------------------------------------- markdown
def rounds_section(res, w):
    """The rxe targets' figures and ratios in every round, and the medians the targets are judged on."""
    if len(res.rounds) < 2:
        return
    w("## rxe targets, round by round (64 B)")
    w("")
    w("guest_bench.sh measures the points behind each rxe target again in more rounds, after the rest of")
    w("the VM part; in each round the event and busy-poll baselines run right next to their rdmarpc points,")
    w("first one then the other, in alternating order by round, and `ib_send_bw` right before the adaptive")
    w("point; a baseline that follows an rdmarpc point waits 10 s first (within seconds of an rdmarpc run's end,")
    w("perftest reads up to 1.5× slower). Round 1 is the")
    w("main run's points (the tables below), whose baseline and rdmarpc figures are one to two minutes")
    w("apart (its busy-poll and adaptive points wait 10 s after the heavy event matrix). The targets are judged on the median ratio: under TCG one round's ratio moves by tens of")
    w("percent, and whole rounds can run slower than others. A target is not judged (neither met nor missed)")
    w("when the host was too busy for it: perftest's figure next to it (for the adaptive target, the polling")
    w(f"round trip) ranged more than {RXE_NOISE_SPREAD:.1f}× across the rounds, leaving out its highest and lowest round")
    w("when there are four or more.")
    iters = {t: sorted({int(r.perftest[(t, 64)]["iterations"]) for r in res.rounds if (t, 64) in r.perftest})
             for t in ("ib_send_lat", "ib_send_lat_e")}
    if iters["ib_send_lat"] and iters["ib_send_lat_e"]:
        counts = lambda t: "/".join(fmt_count(n) for n in iters[t])
        w(f"perftest's latency runs at 64 B and at the wire size took {counts('ib_send_lat')} polling round trips")
        w(f"and {counts('ib_send_lat_e')} with `-e` (up to 2026-12-06 they took 2,000 each, ~50 ms of polling).")
    w("")
    heads = {"event": ("event p50 µs", "`ib_send_lat -R -e` RTT"), "busy_poll": ("busy-poll p50 µs", "`ib_send_lat -R` RTT"),
             "adaptive": ("adaptive p50 µs", "busy-poll p50"),
             "rate": ("adaptive calls/s, 64 in flight", "`ib_send_bw -R` msg/s")}
    cols = [k for k, *_ in RXE_RATIOS]
    w("| round | " + " | ".join(f"{heads[k][0]} | {heads[k][1]} | ratio" for k in cols) + " |")
    w("|---|" + "---:|---:|---:|" * len(cols))
    per = {k: round_ratios(res, value, base) for k, _, _, _, value, base, _ in RXE_RATIOS}
    for i in range(len(res.rounds)):
        w(f"| {i + 1} | " + " | ".join(f"{fmt(per[k][i][0])} | {fmt(per[k][i][1])} | {fmt_ratio(per[k][i][2])}"
                                       for k in cols) + " |")
    w("| median | " + " | ".join(
        f" | | **{fmt_ratio(median([x[2] for x in per[k] if x[2] is not None]))}**" for k in cols) + " |")
    w("")


def frame_bytes(raw):
    """The bytes a 64 B echo puts on the wire per message (guest_bench.sh's frame_bytes), or None."""
    try:
        with open(os.path.join(raw, "vm", "frame_bytes")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def same_bytes(res, wire):
    """Per round, for the busy-poll and event targets: rdmarpc's p50, perftest's round trip at 64 B
    and at the echo's wire size, and the ratios. None without the wire-size runs."""
    if wire is None:
        return None
    out = {}
    for key, test, mode in (("busy_poll", "ib_send_lat", "busy_poll"), ("event", "ib_send_lat_e", "event")):
        rows = []
        for r in res.rounds:
            v = r.lat("rdmarpc", "rdma", 64, 1, mode=mode)
            b64 = r.pt(test, 64, "rtt_t_typical")
            bw = r.pt(test, wire, "rtt_t_typical")
            row = {"rdmarpc_p50_us": v, "perftest_64_us": b64, "perftest_wire_us": bw,
                   "frame_cost": ratio(bw, b64), "ratio_same_bytes": ratio(v, bw)}
            if mode == "busy_poll":
                t = r.transport_p50(wire)
                row.update({"transport_p50_us": t, "transport_over_perftest": ratio(t, bw),
                            "rpc_over_transport": ratio(v, t)})
            rows.append(row)
        out[key] = rows
    return {"wire_bytes": wire, "modes": out}


def same_bytes_section(sb, w):
    """sb: same_bytes()'s result."""
    if sb is None:
        return
    wire = sb["wire_bytes"]
    w(f"## rxe: rdmarpc against raw verbs carrying the same bytes ({wire} B)")
    w("")
    w(f"A 64 B echo puts up to {wire} B on the wire per message (the larger of request and reply:")
    w("rdmarpc's frame header, and protobuf's field tag and length around the payload;")
    w("`rdmarpc_echo_bench frame-size`), and the targets")
    w("above compare it with perftest sending 64 B. So each round also runs `ib_send_lat` at the")
    w(f"frame's size: its round trip at {wire} B over its round trip at 64 B is what the frame's extra")
    w("bytes alone cost on rxe here, and rdmarpc over perftest at the same size is what rdmarpc's own")
    w("work costs. For information: the targets stay judged against 64 B.")
    w("")
    w(f"| round | busy-poll p50 µs | `ib_send_lat -R` 64 B | {wire} B | frame's bytes | rdmarpc ÷ {wire} B "
      f"| event p50 µs | `-e` 64 B | {wire} B | frame's bytes | rdmarpc ÷ {wire} B |")
    w("|---|" + "---:|" * 10)
    busy, event = sb["modes"]["busy_poll"], sb["modes"]["event"]
    for i, (b, e) in enumerate(zip(busy, event)):
        w(f"| {i + 1} | " + " | ".join(
            f"{fmt(x['rdmarpc_p50_us'])} | {fmt(x['perftest_64_us'])} | {fmt(x['perftest_wire_us'])} | "
            f"{fmt_ratio(x['frame_cost'])} | {fmt_ratio(x['ratio_same_bytes'])}" for x in (b, e)) + " |")

    def med(rows, k):
        return fmt_ratio(median([x[k] for x in rows if x[k] is not None]))

    w("| median | " + " | ".join(f" | | | {med(x, 'frame_cost')} | **{med(x, 'ratio_same_bytes')}**"
                                   for x in (busy, event)) + " |")
    w("")
    transport_section(busy, wire, w)


def transport_section(busy, wire, w):
    """The busy-poll rows of same_bytes() that have the transport alone measured (extra rounds)."""
    rows = [(i + 1, x) for i, x in enumerate(busy) if x.get("transport_p50_us") is not None]
    if not rows:
        return
    w(f"## rxe busy-poll: the transport's share and the rpc layer's ({wire} B)")
    w("")
    w("The extra rounds also run rdmarpc's transport alone (`bench/transport_floor`: the rdma connection,")
    w("its rings, credits and completion polling, driven by Asio as always, but no rpc layer: the server")
    w(f"copies each {wire} B message into a send reservation and commits it), busy-polling, next to the")
    w("rpc echo's busy-poll point. Over perftest at the same size it is what the transport costs; the rpc")
    w("echo over it is what the rpc layer adds (frame, call table, protobuf's parse and serialize on both")
    w("sides, the handler). For information; the target stays judged against perftest at 64 B. The three")
    w("points of a round run within a minute of each other, yet one round's ratios still move by tens of")
    w("percent under TCG (the rpc echo can even read faster than the transport alone): the medians carry")
    w("the meaning, and only on a quiet host (the round table's perftest figures holding still).")
    w("")
    w(f"| round | `ib_send_lat -R` {wire} B | transport alone p50 µs | ÷ perftest | rpc busy-poll p50 µs "
      "| ÷ transport | rpc ÷ perftest |")
    w("|---|" + "---:|" * 6)
    for i, x in rows:
        w(f"| {i} | {fmt(x['perftest_wire_us'])} | {fmt(x['transport_p50_us'])} | "
          f"{fmt_ratio(x['transport_over_perftest'])} | {fmt(x['rdmarpc_p50_us'])} | "
          f"{fmt_ratio(x['rpc_over_transport'])} | {fmt_ratio(x['ratio_same_bytes'])} |")

    def med(k):
        return fmt_ratio(median([x[k] for _, x in rows if x[k] is not None]))

    w(f"| median | | | **{med('transport_over_perftest')}** | | **{med('rpc_over_transport')}** "
      f"| **{med('ratio_same_bytes')}** |")
    w("")


def instruction_cost_section(c, w):
    """c: instruction_cost()'s result."""
    if c is None:
        return
    w("## What an instruction on the call path costs over rxe here")
    w("")
    w("Each extra round also measures the busy-poll 64 B point with the server's coroutine handler (the")
    w("generated `Service`: a coroutine frame and its launch per call) next to the callback one")
    w("(alternating which goes first). The coroutine handler executes more user-space instructions per")
    w("call (callgrind, loopback, client + server), most of them between the request's arrival and the")
    w("reply's commit (a handler that never suspends runs and answers inside the request's delivery, as")
    w("a callback does; its frames are torn down after the commit, in the same completion poll), so the")
    w("p50 difference over the instruction difference estimates what an")
    w("instruction of rdmarpc-like code costs on the round trip under this emulation (TCG runs")
    w("call-heavy code far slower per instruction than tight loops). The difference is small (about")
    w("1,700 instructions), so one round's noise weighs more in it than it did when it was 4,100.")
    w("")
    w("| round | callback p50 µs | coroutine p50 µs | difference µs | `ib_send_lat -R` RTT µs |")
    w("|---|---:|---:|---:|---:|")
    for x in c["rounds"]:
        w(f"| {x['round']} | {fmt(x['callback_p50_us'])} | {fmt(x['coroutine_p50_us'])} | {fmt(x['delta_us'])} | "
          f"{fmt(x['perftest_rtt_us'])} |")
    w("")
    if c.get("ns_per_instruction") is None:
        w("No estimate: fewer than 3 rounds with both points, no perftest round trip or instruction counts,")
        w("or a difference at or below zero (the VM's drift swamped it).")
        w("")
        return
    ns = c["ns_per_instruction"]
    w(f"Median difference {fmt(c['median_delta_us'])} µs for {fmt_count(c['extra_instructions'])} more instructions: "
      f"**{ns:.1f} ns per instruction** on the round trip (on a 3 GHz server core, well under 0.5 ns).")
    have = c.get("rdma_instructions")
    alone = c.get("rdma_transport_instructions")
    w(f"The busy-poll target (≤ 1.25 × the raw-verbs round trip, median {fmt(c['perftest_rtt_us'])} µs here) "
      f"leaves {fmt(0.25 * c['perftest_rtt_us'])} µs on top of raw verbs, about "
      f"**{fmt_count(c['busy_poll_budget_instructions'])} instructions** for everything rdmarpc does per call "
      f"(client + server: framing, protobuf, dispatch, the completion) beyond what perftest does"
      + (f"; rdmarpc's rdma:// call executes {fmt_count(have)} in all (event polling, the verbs provider's "
         "user-space code that perftest runs too included; see the CPU cost section)" if have else "")
      + (f", of which the transport alone (transport_floor) takes {fmt_count(alone)} and the rpc layer "
         f"{fmt_count(have - alone)}." if have and alone else "."))
    w("")


def markdown(res, meta, tgts, cost, same=None):
    L = []
    w = L.append
    w(f"# rdmarpc benchmark results — {meta.get('date', '?')}")
    w("")
    w("Produced by `bench/compare` in one run: raw verbs (perftest) and UCX (ucx_perftest) on rxe0, rdmarpc")
    w("over `rdma://` and `tcp://`, and the gRPC C++ and Cap'n Proto RPC baselines over TCP, all in the same")
    w("Soft-RoCE VM boot; instruction and allocation counts from callgrind (on the host; rdma:// in the VM). Every echo call")
    w("carries the payload both ways (request and reply); server streams (their own section) one way.")
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
    w("## Targets (issues #5, #9 and #11, and the server-streaming benchmark's)")
    w("")
    for t in tgts:
        w(f"- {t['line']}")
    w("")
    rounds_section(res, w)
    same_bytes_section(same, w)
    instruction_cost_section(cost, w)

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
    w("(the library default) keeps polling after the last completion, then sleeps; it polls `adaptive_spin`")
    w("(100 µs) at first and after a gap longer than `adaptive_spin_max` (1 ms), and twice as long")
    w("after each shorter gap it slept through, up to that maximum.")
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

    # --- UCX on the same rxe device
    if res.ucx:
        w("## A second peer on the same rxe0: UCX (ucx_perftest over rc_verbs), 64 B")
        w("")
        w("UCX 1.13's `ucx_perftest` in the same VM boot, server on vCPU 0 and client on vCPU 1 like perftest,")
        w("`UCX_NET_DEVICES=rxe0:1`. Like `ib_send_lat -R` without `-e`, UCX busy-polls, so its peer among")
        w("rdmarpc's modes is busy-poll. Latency tests print one-way latency; the table doubles it (RTT).")
        w("")
        w("| 64 B | RTT p50 µs (1 in flight) | messages or calls / s | rdmarpc busy-poll ÷ it: p50 | rdmarpc ÷ it: rate |")
        w("|---|---:|---:|---:|---:|")
        busy50 = res.lat("rdmarpc", "rdma", 64, 1, mode="busy_poll")
        busy_rate = res.rate("rdmarpc", "rdma", 64, 64, mode="busy_poll")
        rows = [("`ib_send_lat -R` / `ib_send_bw -R` (perftest, rdma_cm)", res.pt("ib_send_lat", 64, "rtt_t_typical"),
                 res.pt("ib_send_bw", 64, "msgs_per_s"))]
        lat, bw = res.ucx_run("am_lat"), res.ucx_run("am_bw")
        rows.append(("UCX uct `am_lat` / `am_bw`, rc_verbs (active messages, short)",
                     lat["result"]["rtt_typical"] if lat else None, bw["result"]["msgs_per_s"] if bw else None))
        tl, tb = res.ucx_run("tag_lat"), res.ucx_run("tag_bw")
        rows.append(("UCX ucp `tag_lat` / `tag_bw`, `UCX_TLS=rc_verbs`",
                     tl["result"]["rtt_typical"] if tl else None, tb["result"]["msgs_per_s"] if tb else None))
        ta = res.ucx_run("tag_lat_udaux")
        if ta:
            rows.append(("UCX ucp `tag_lat`, `UCX_TLS=rc_verbs,ud_verbs:aux`", ta["result"]["rtt_typical"], None))
        ran = {u.get("test") for u in res.ucx}
        for label, l50, rate in rows:
            failed_here = label.startswith("UCX ucp") and l50 is None and rate is None and {"tag_lat", "tag_bw"} & ran
            if failed_here:
                w(f"| {label} | failed (below) | failed (below) | | |")
                continue
            w(f"| {label} | {fmt(l50)} | {fmt(rate)} | {fmt_ratio(ratio(busy50, l50))} | {fmt_ratio(ratio(busy_rate, rate))} |")
        w(f"| rdmarpc rdma, busy-poll (64 in flight for the rate) | {fmt(busy50)} | {fmt(busy_rate)} | | |")
        w("")
        failed = [u for u in res.ucx if not u.get("result")]
        if failed:
            w("UCX runs that gave no result (what `ucx_perftest` printed, client first):")
            w("")
            for u in failed:
                w(f"- `{u.get('layer')}` `{u.get('test')}`, `UCX_TLS={u.get('tls')}` (`ucx_perftest {u.get('args')}`), "
                  f"exit status {u.get('rc')}{' (killed by the 45 s timeout)' if u.get('rc') == 124 else ''}:")
                w("")
                w("  ```")
                for line in u.get("errors") or ["(nothing beyond the table header before it was stopped)"]:
                    w("  " + line[:160])
                w("  ```")
            w("")
            no_aux = any("no auxiliary transport" in " ".join(u.get("errors") or []) for u in failed)
            ud_failed = any("ud_verbs" in u.get("tls", "") for u in failed)
            if no_aux:
                w("UCP (the tag and active-message protocol layer) connects an endpoint by exchanging wire-up")
                w("messages, which need a transport that reaches the peer without a connection (UD or shared")
                w("memory); with only `rc_verbs` allowed it has none (\"no auxiliary transport\")" +
                  (", and with `ud_verbs` allowed for the" if ud_failed else "."))
                if ud_failed:
                    w("wire-up the UD endpoint to the peer failed on rxe as quoted above.")
                w("UCX's transport layer (uct) connects rc_verbs endpoints directly, so UCX's RC datapath on rxe0")
                w("is what `am_lat` / `am_bw` measure" + ("." if res.ucx_run("am_lat") else " (when they ran)."))
                w("")

    # --- tcp vs the RPC baselines (gRPC, Cap'n Proto)
    concs = sorted({r["concurrency"] for r in res.echo if r["transport"] == "tcp"})
    for other, title in (("grpc", "gRPC C++ over TCP (same .proto, same client options)"),
                         ("capnp", "Cap'n Proto RPC over TCP (same echo in a .capnp schema, same client options)")):
        name = "gRPC" if other == "grpc" else "Cap'n Proto"
        if other == "capnp" and not any(r["system"] == "capnp" for r in res.echo):
            continue
        w(f"## rdmarpc over tcp:// vs {title}")
        w("")
        if other == "capnp":
            w("`capnp_echo_bench`: EzRpcServer / EzRpcClient (one connection, KJ event loop on one thread each),")
            w("`echo @0 (payload :Data) -> (payload :Data)`, the reply copies the request's payload; message")
            w("sizes are hinted so each message is one segment. Calls are chained per slot on the client.")
            w("")
        w(f"| payload | in flight | rdmarpc calls/s | {name} calls/s | ratio | rdmarpc p50 µs | {name} p50 µs | ratio | "
          f"rdmarpc p99 µs | {name} p99 µs | ratio |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for s in res.payloads:
            for c in concs:
                a, b = res.rate("rdmarpc", "tcp", s, c), res.rate(other, "tcp", s, c)
                a50, b50 = res.lat("rdmarpc", "tcp", s, c), res.lat(other, "tcp", s, c)
                a99, b99 = res.lat("rdmarpc", "tcp", s, c, "p99"), res.lat(other, "tcp", s, c, "p99")
                w(f"| {size_label(s)} | {c} | {fmt(a)} | {fmt(b)} | {fmt_ratio(ratio(a, b))} | {fmt(a50)} | {fmt(b50)} | "
                  f"{fmt_ratio(ratio(a50, b50))} | {fmt(a99)} | {fmt(b99)} | {fmt_ratio(ratio(a99, b99))} |")
        w("")

    # --- server streaming
    if res.stream or res.callgrind_stream:
        stream_section(res, w)

    # --- CPU cost and heap allocations
    w("## CPU cost and heap allocations per call (callgrind, 64 B echo, 1 in flight, client + server)")
    w("")
    w("Both sides run in one process (server thread + client thread); two runs with different call")
    w("counts are differenced, so start-up and warm-up cancel out. User-space instructions only")
    w("(callgrind does not see the kernel), the same for every system. rdmarpc serves the echo with the")
    w("generated `CallbackService` (`--handler callback`, answers before returning) or the coroutine")
    w("`Service` (`--handler coroutine`, a coroutine launched per call). Allocations are the calls to")
    w("`operator new` and to `malloc` (every heap block, `operator new`'s included) per call;")
    w("\"protobuf\" counts those made inside protobuf's code or the generated messages (parsing the")
    w("reply's `bytes` field, setting the reply's payload), which tests/rpc/allocation_test.cpp does not")
    w("charge to the framework either. The rdma row runs in the Soft-RoCE VM (rxe0, event polling: the")
    w("spinning modes would count their empty polls), with the verbs provider's user-space code (libibverbs,")
    w("librxe) counted like the rest; the kernel's share of rxe, as every syscall's, is not. The tcp_floor rows")
    w("are the same 64 B round trip over a tcp socket with no rpc at all (bench/tcp_floor.cpp): `asio` drives")
    w("it as rdmarpc's tcp transport does (a wait, a recv and a send per side), `epoll` is a bare epoll loop.")
    w("The transport_floor rows are rdmarpc's own transport carrying the same round trip with no rpc layer")
    w("(bench/transport_floor.cpp: the server copies each message into a send reservation and commits it):")
    w("the rpc echo's figure minus it is what the rpc layer (frames, call table, protobuf, dispatch) costs.")
    w("")
    w("| system | transport | handler | instructions / call | ratio to gRPC | ratio to Cap'n Proto | "
      "`operator new` / call | of which protobuf | `malloc` / call | of which protobuf |")
    w("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    g = res.ipc("grpc", "tcp")
    cp = res.ipc("capnp", "tcp")
    for r in sorted(res.callgrind, key=lambda r: r["system"] != "rdmarpc"):  # rdmarpc's rows together
        ipc = r["instructions_per_call"]
        al = lambda k: "n/a" if r.get(k) is None else fmt_per_call(r[k])
        rpc = r["system"] not in ("tcp_floor", "transport_floor")  # no rpc: no ratio to an rpc system
        w(f"| {r['system']} | {r['transport']} | {r.get('handler') or '–'} | {fmt_count(ipc)} | "
          f"{fmt_ratio(ratio(ipc, g)) if rpc else '–'} | {fmt_ratio(ratio(ipc, cp)) if rpc else '–'} | {al('new_per_call')} | "
          f"{al('new_protobuf_per_call')} | {al('malloc_per_call')} | {al('malloc_protobuf_per_call')} |")
    w("")

    # --- per-stage breakdown
    staged = [r for r in res.callgrind if r.get("stages") and r.get("handler") == "callback"]
    if staged:
        w("### Where one rdmarpc call's instructions go, by stage (callback handler)")
        w("")
        w("From the same differenced profiles: the inclusive cost of the function that starts each")
        w("stage (what `callgrind_annotate --inclusive=yes` prints for it), per call. The mapping of stages")
        w("to functions is documented in bench/make_report.py (`STAGE_FUNCTIONS`); a stage whose")
        w("function was not found shows n/a. Client receive includes the benchmark's completion handler")
        w("(closed-loop bookkeeping), minus the next call's send that the handler starts.")
        w("")
        head = " | ".join(f"{r['transport']} instr. | share" for r in staged)
        w(f"| stage | {head} |")
        w("|---|" + "---:|---:|" * len(staged))
        for key, label in STAGES:
            cells = []
            for r in staged:
                v = r["stages"].get(key)
                cells.append(f"{fmt_count(v)} | {'n/a' if v is None else format(100 * v / r['instructions_per_call'], '.0f') + ' %'}")
            w(f"| {label} | " + " | ".join(cells) + " |")
        w("| total per call | " + " | ".join(f"{fmt_count(r['instructions_per_call'])} | 100 %" for r in staged) + " |")
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
    w("rdmarpc's probes start once the pair had its first heartbeat exchange (the steady state, as in")
    w("Liveness' heartbeat CPU), and the first one waits BENCH_SETTLE s (10; --quick 3) after the parts")
    w("before it (the VM's after-effects of a heavy run; see bench/vm/guest_bench.sh).")
    w("")
    w("| system | transport | mode | wall s | CPU ms | CPU % of one core |")
    w("|---|---|---|---:|---:|---:|")
    for r in res.idle:
        w(f"| {r['system']} | {r['transport']} | {r['mode']} | {r['seconds']:.1f} | {r['cpu_seconds'] * 1e3:.1f} | "
          f"{r['cpu_percent']:.3f} |")
    w("")

    # --- liveness
    if res.detect or res.failover or res.heartbeats or res.cuts:
        liveness_section(res, tgts, w)

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


def liveness_section(res, tgts, w):
    """Dead-peer detection, failover and heartbeat CPU (issue 11), over rdma and tcp in the VM;
    heartbeat CPU over tcp on the host too (the target's figure)."""
    lv = res.liveness
    w("## Liveness: a hung server, a cut link, failover, heartbeat CPU (issue 11)")
    w("")
    w("`rdmarpc_failover_bench` and `rdmarpc_echo_bench heartbeats` in the same VM boot, and")
    w("`rdmarpc_echo_bench heartbeats` over `tcp://127.0.0.1` on the host; client and server(s) in one")
    w("process, library defaults (heartbeat interval 300 ms, timeout 300 ms; reconnect backoff")
    w("100 ms × 1.6; rdma polling adaptive). A hung host is played by blocking the server's only io")
    w("thread: its kernel (tcp) or rxe (rdma) still acknowledges, so only heartbeats can tell.")
    w("")
    if lv["detect"]:
        w("**Detection**: one server, one channel; from the hang to the channel ending the connection")
        w("(heartbeat timeout), idle or with 8 calls in flight (no deadline). Target ≤ 1,000 ms.")
        w("")
        w("| transport | load | runs | median ms | max ms | each run (ms) | not detected in 10 s |")
        w("|---|---|---:|---:|---:|---|---:|")
        for d in lv["detect"]:
            w(f"| {d['transport']} | {d['load_text']} | {d['runs']} | {fmt(d['median_ms'], 0)} | "
              f"{fmt(d['max_ms'], 0)} | {', '.join(fmt(x, 0) for x in d['runs_ms'])} | {d['not_detected']} |")
        w("")
    if lv["failover"]:
        w("**Failover**: two servers, one channel over both, 16 `wait_for_ready` calls kept in flight; the")
        w("server they are on hangs. Detected: the calls sent to it fail; failover: the first call answered")
        w("after that. Those calls fail UNAVAILABLE (they reached the server, so they are never sent again);")
        w("calls not yet sent move to the other server. *Failed*: calls that ended with any error, per run")
        w("in run order (the bench counts every error, not UNAVAILABLE alone). *Lost*: calls that never")
        w("completed at all (still pending 10 s after the hung server was released). Target ≤ 1,500 ms")
        w("with none lost.")
        w("")
        w("| transport | policy | runs | detected median / max ms | failover median / max ms | each run (ms) | "
          "answered per run (median) | failed per run | lost calls | not recovered in 10 s |")
        w("|---|---|---:|---:|---:|---|---:|---|---:|---:|")
        for f in lv["failover"]:
            failed = f["failed"]  # run order, one figure per run
            w(f"| {f['transport']} | {f['policy']} | {f['runs']} | {fmt(f['detect_median_ms'], 0)} / "
              f"{fmt(f['detect_max_ms'], 0)} | {fmt(f['failover_median_ms'], 0)} / {fmt(f['failover_max_ms'], 0)} | "
              f"{', '.join(fmt(x, 0) for x in f['runs_ms']) or 'n/a'} | {fmt_count(f['answered_median'])} | "
              f"{', '.join(str(x) for x in failed)} | {f['lost']} | {f['not_recovered']} |")
        w("")
    if lv["cut"]:
        w("**A cut link, across two hosts** (the multi-host bed: two VMs, each with its own kernel and rxe0,")
        w("joined by a virtual link; tests/multihost). Host 2's egress gets 100 % netem loss (silent: no")
        w("link event on either host) for 4 s. Times count from the moment the link went silent, as")
        w("host 1 saw it (an ICMP echo every 5 ms; the last answer), until: the idle connection ended")
        w("(heartbeat timeout); all 16 calls in flight (no deadline) failed UNAVAILABLE; for pick_first")
        w("over host 2 then a server on host 1, with 8 closed loops of `wait_for_ready` calls, the first")
        w("call failed (detected) and host 1 first answered one (failover). Targets: detected ≤ 1,000 ms,")
        w("failover ≤ 1,500 ms.")
        w("")
        w("| transport | case | runs | detected median / max ms | each run (ms) | failover median / max ms | each run (ms) |")
        w("|---|---|---:|---:|---|---:|---|")
        for c in lv["cut"]:
            fo = (f"{fmt(c['failover_median_ms'], 0)} / {fmt(c['failover_max_ms'], 0)}" if c["failover_ms"] else "")
            w(f"| {c['transport']} | {c['load_text']} | {c['runs']} | {fmt(c['detected_median_ms'], 0)} / "
              f"{fmt(c['detected_max_ms'], 0)} | {', '.join(fmt(x, 0) for x in c['detected_ms'])} | {fo} | "
              f"{', '.join(fmt(x, 0) for x in c['failover_ms'])} |")
        w("")
    if lv["heartbeats"] or lv["heartbeat_probes_failed"]:
        first = lambda where, k, d: next((h[k] for h in lv["heartbeats"] if h["where"] == where), d)
        secs = {where: first(where, "seconds", None) for where in ("host", "vm")}
        w(f"**Heartbeat CPU**: {first('host', 'connections', first('vm', 'connections', 100))} idle connections "
          "(one channel each) to one server for " +
          (" and ".join(f"{format(v, '.0f')} s ({'host' if k == 'host' else 'VM'})" for k, v in secs.items()
                        if v is not None) or "n/a") + ";")
        w("the process's CPU (getrusage) as a share of one core, split by thread (client: the channels'")
        w("io thread; server: its io thread). The baseline is the same connections without heartbeats;")
        w("their difference is what heartbeats cost. Target ≤ 0.2 % of one core for both sides together,")
        w("judged on the **host** row (tcp, event polling): under TCG every CPU share in the VM is many")
        w("times what the same code costs on a real CPU, so the VM rows (rdma in both polling modes, tcp)")
        w("are information only: their baseline and client/server split still show where the cost goes.")
        w("The probe measures the steady state: each connection's own first heartbeat exchange, after")
        w("which it shares the others' (one exchange per period for all of them), comes before the")
        w("window. The host figure depends on the host's syscall cost (each ping/pong is a few socket")
        w("syscalls and epoll wake-ups). Pings are counted by the channels, both ways (pings sent, and")
        w("the server's pings received).")
        fl = next((h for h in lv["heartbeats"] if h.get("floor_cpu_percent") is not None), None)
        if fl is not None:
            w("")
            w(f"**Per-connection heartbeats on this host**: `heartbeat_floor`, {fl['connections']} tcp pairs on raw")
            w(f"epoll threads exchanging 16 bytes on every connection every {fl['floor_exchange_ms']} ms (the least that")
            w(f"checks each connection within 1 s), costs {pct(fl['floor_cpu_percent'])} % of a core,")
            w(f"{fmt(fl['floor_us_per_exchange'], 1)} µs of CPU per exchange, with a null syscall at "
              f"{fmt(fl['null_syscall_us'], 2)} µs (~0.1 µs on bare")
            w("metal): what any heartbeat that pings each connection pays in sends, reads and wake-ups.")
            w("rdmarpc's idle connections to one peer share their heartbeats (one ping per period through two")
            w(f"of them, docs/wire-format.md, Heartbeat domains), so they cost {fmt(fl['cost_over_floor'], 2)}× that;")
            w("clients in separate processes would each pay an exchange.")
        if not any(h["where"] == "host" for h in lv["heartbeats"]):
            w("No host row in this run (an older run, --no-host-liveness, or the host probe failed): the")
            w("target is not measured.")
        w("")
        w("| where | transport | polling | with heartbeats % (client + server) | without (baseline) % (client + server) | "
          "heartbeats' cost % | pings per connection per s (both ways) | heartbeat timeouts |")
        w("|---|---|---|---:|---:|---:|---:|---:|")
        split = lambda a, c, s: f"{pct(a)} ({pct(c)} + {pct(s)})"
        for h in lv["heartbeats"]:
            base = ("n/a" if h["baseline_cpu_percent"] is None else
                    split(h["baseline_cpu_percent"], h["baseline_client_cpu_percent"], h["baseline_server_cpu_percent"]))
            pps = h.get("pings_per_connection_s")
            where = "host (target)" if h["where"] == "host" else "VM (TCG, information)"
            w(f"| {where} | {h['transport']} | {h['polling']} | "
              f"{split(h['cpu_percent'], h['client_cpu_percent'], h['server_cpu_percent'])} | "
              f"{base} | {pct(h['cost_percent'])} | "
              f"{'n/a' if pps is None else format(pps, '.2f')} | {fmt_count(h['heartbeat_timeouts'])} |")
        w("")
        for p in lv["heartbeat_probes_failed"]:
            logs = "raw/liveness-host.*.log" if p.get("where") == "host" else "raw/vm/log/"
            w(f"- the {'host' if p.get('where') == 'host' else 'VM'}'s {p['transport']} ({p['polling']}) probe "
              f"{'with' if p['heartbeats'] else 'without'} heartbeats gave no result (exit status {p['rc']}; see {logs}).")
        if lv["heartbeat_probes_failed"]:
            w("")
    lines = [t for t in tgts if t["target"].startswith("liveness, ")]
    if lines:
        w("Targets (also in the list at the top):")
        w("")
        for t in lines:
            w(f"- {t['line']}")
        w("")


def stream_section(res, w):
    """Server streaming: messages/s next to ib_send_bw (rxe) and gRPC's streaming (tcp)."""
    w("## Server streaming, 64 B messages")
    w("")
    w("`EchoBench.Stream`: the client opens N streams (1 for the targets), the server writes 64 B")
    w("`EchoReply` messages on each until the client cancels: `try_write` while it need not wait, else")
    w("`co_await async_write` (the *async_write only* columns: every message by `co_await async_write`);")
    w("gRPC: the async `ServerAsyncWriter`, as gRPC's own qps benchmark streams from the server, one")
    w("write outstanding. The client keeps one read outstanding per stream. Every message")
    w("received counts (warm-up, then a timed window, like the echo points); one way, so")
    w("`ib_send_bw -R -s 64` (raw sends, one way) is rxe's ceiling. Default stream windows on both")
    w("sides (rdmarpc: 64 messages / 1 MiB; gRPC: HTTP/2's with BDP probing).")
    w("")
    bw = res.pt("ib_send_bw", 64, "msgs_per_s")
    w("| streams | rdmarpc rdma adaptive msg/s | `ib_send_bw -R -s 64` msg/s | ratio (target ≥ 0.7×) | "
      "rdmarpc tcp msg/s | gRPC streaming msg/s | ratio (target ≥ 3×) | rdma, async_write only | "
      "ratio | tcp, async_write only | ratio |")
    w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sorted({r["concurrency"] for r in res.stream}) or [1]:
        a = res.stream_rate("rdmarpc", "rdma", 64, n, mode="adaptive")
        t = res.stream_rate("rdmarpc", "tcp", 64, n)
        g = res.stream_rate("grpc", "tcp", 64, n)
        ra, rt = ratio(a, bw), ratio(t, g)
        verdict = lambda r, lim: "" if r is None or n != 1 else (" **MET**" if r >= lim else " **MISSED**")
        aa = res.stream_rate("rdmarpc", "rdma", 64, n, mode="adaptive+async_write")
        ta = res.stream_rate("rdmarpc", "tcp", 64, n, mode="event+async_write")
        w(f"| {n} | {fmt(a)} | {fmt(bw)} | {fmt_ratio(ra)}{verdict(ra, 0.7)} | {fmt(t)} | {fmt(g)} | "
          f"{fmt_ratio(rt)}{verdict(rt, 3.0)} | {fmt(aa)} | {fmt_ratio(ratio(aa, bw))} | {fmt(ta)} | "
          f"{fmt_ratio(ratio(ta, g))} |")
    w("")
    w("The targets are for one stream; more streams are shown for reference (`ib_send_bw` is one QP).")
    w("")
    if res.callgrind_stream:
        w("CPU cost per streamed 64 B message (callgrind on the host, one stream, client + server in one")
        w("process, two runs with different message counts differenced like the echo rows):")
        w("")
        # No "of which protobuf" column: the stream's own functions take protobuf types as
        # parameters, so the caller-chain test of the echo rows would count them as protobuf's.
        w("| system | transport | instructions / message | ratio to gRPC | `operator new` / message | `malloc` / message |")
        w("|---|---|---:|---:|---:|---:|")
        g = res.cg_stream("grpc", "tcp")
        gi = g["instructions_per_call"] if g else None
        for r in res.callgrind_stream:
            ipc = r["instructions_per_call"]
            w(f"| {r['system']} | {r['transport']} | {fmt_count(ipc)} | {fmt_ratio(ratio(ipc, gi))} | "
              f"{fmt_per_call(r['new_per_call'])} | {fmt_per_call(r['malloc_per_call'])} |")
        w("")
    w("| system | transport | mode | streams | messages | errors | msg/s | MB/s | read wait p50 µs | p99 µs |")
    w("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in res.stream:
        l = r["latency_us"]
        w(f"| {r['system']} | {r['transport']} | {r['mode']} | {r['concurrency']} | {r['calls']} | {r['errors']} | "
          f"{fmt(r['calls_per_s'])} | {fmt(r['mb_per_s'], 2)} | {fmt(l['p50'])} | {fmt(l['p99'])} |")
    w("")
    w("\"read wait\": how long each read waited for its message (0 when the message was already there).")
    w("")


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
        ("capnp-tcp", lambda s, p: res.lat("capnp", "tcp", s, 1, p)),
        ("UCX-am-lat-RTT", lambda s, p: (res.ucx_run("am_lat")["result"]["rtt_typical"]
                                          if p == "p50" and s == 64 and res.ucx_run("am_lat") else None)),
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
    if len(argv) == 9 and argv[1] == "--callgrind-record":
        return callgrind_record(argv[2:])
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
    cost = instruction_cost(res)
    same = same_bytes(res, res.frame_bytes)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(markdown(res, meta, tgts, cost, same))
    doc = {
        "meta": meta,
        "targets": tgts,
        "perftest": [dict(v, test=k[0], payload=k[1]) for k, v in sorted(res.perftest.items())],
        "echo": res.echo,
        "rounds": [{"perftest": [dict(v, test=k[0], payload=k[1]) for k, v in sorted(r.perftest.items())],
                    "echo": r.echo, "echo_coroutine": r.coroutine, "transport_floor": r.transport_floor}
                   for r in res.rounds[1:]],
        "instruction_cost": cost,
        "same_bytes": same,
        "stream": res.stream,
        "idle": res.idle,
        "clock": res.clock,
        "callgrind": res.callgrind,
        "callgrind_stream": res.callgrind_stream,
        "ucx": res.ucx,
        "liveness": {"summary": res.liveness, "detect": res.detect, "failover": res.failover,
                     "heartbeats": res.heartbeats, "cut": res.cuts},
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
