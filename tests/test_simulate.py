"""`bench simulate`: traces that pair up, a record that the other commands read, bad input refused."""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from capture_check import ONE_SIDED
from support import bench_here, needs_simgrid, python

import a2a
from a2a import fabric
from a2a.errors import BadConfig, BadOption
from a2a.record.results import Recorder, Row
from a2a.schedules import world
from a2a.schedules.events import Burst, Collective, Copy, Event, Irecv, Isend, Recv, Send, Sendrecvs, Wait, unpacked
from a2a.simulate import capture as capture_module
from a2a.simulate import platforms, replay, simgrid, traces
from a2a.simulate.calibrate import message_cost
from a2a.simulate.capture import capture, capture_unit, stepped
from a2a.simulate.driver import Machine

NODES = [[0, 1, 2], [3, 4, 5]]


Message = tuple[int, int, int, int]  # (sender, receiver, tag, bytes)


def messages(p: int, lines: list[list[str]]) -> tuple[Counter[Message], Counter[Message]]:
    """(sender, receiver, tag, bytes) of every send and every receive in the ranks' trace lines."""
    sent: Counter[Message] = Counter()
    received: Counter[Message] = Counter()
    for rank, trace in enumerate(lines):
        for line in trace:
            fields = line.split()
            if fields[1] in ("isend", "send"):
                sent[(rank, int(fields[2]), int(fields[3]), int(fields[4]))] += 1
            elif fields[1] in ("irecv", "recv"):
                received[(int(fields[2]), rank, int(fields[3]), int(fields[4]))] += 1
    return sent, received


@pytest.mark.parametrize("name", [n for n in a2a.algorithms("alltoall") if n not in ("auto", *ONE_SIDED)])
def test_every_send_meets_its_receive(name):
    """The lowered traces of each algorithm pair every send with one receive of the same size and tag."""
    schedule = capture(name, {}, 6, 5, "float32", nodes=NODES)
    lines = [list(traces.trace_lines(events, r, 6, 1e9)) for r, events in enumerate(schedule.events)]
    sent, received = messages(6, lines)
    assert sent == received
    for rank, trace in enumerate(lines):
        assert trace[0].endswith("init") and trace[-1].endswith("finalize")
        pending = set()
        for line in trace:  # every wait names a request in flight, and each is waited for before the end
            _, kind, *rest = line.split()
            if kind in ("isend", "irecv"):
                peer, tag = int(rest[0]), int(rest[1])
                pending.add((rank, peer, tag) if kind == "isend" else (peer, rank, tag))
            elif kind == "wait":
                sender, receiver, tag = map(int, rest)
                pending.remove((sender, receiver, tag))
        assert not pending, name


KINDS = {"isend": Isend, "irecv": Irecv, "send": Send, "recv": Recv, "wait": Wait, "copy": Copy, "coll": Collective,
         "alltoall": traces.WholeAlltoall}


def typed(events: list[tuple]) -> list:
    """Events written as (kind, fields...) tuples, as the capture's typed events."""
    return [KINDS[kind](*fields) for kind, *fields in events]


def test_lowering_by_hand():
    """Self messages become copies; sub-communicator gathers become point-to-point; native whole-job Alltoall stays,
    after the copy of the own block."""
    events = [("irecv", 1, 8, 0), ("irecv", 0, 8, 1), ("isend", 1, 8, 2), ("isend", 0, 8, 3), ("wait", (0, 1, 2, 3)),
              ("copy", 100), ("coll", "gather", (0, 2), 2, (0, 8), (0, 0)), ("coll", "alltoall", (0, 1, 2), None,
                                                                           (4, 4, 4), (4, 4, 4))]
    lines = list(traces.trace_lines(typed(events), 0, 3, 2e9))
    scale = platforms.TIME_SCALE
    assert lines == ["0 init", "0 irecv 1 0 8", "0 isend 1 0 8", f"0 compute {8 / 2e9 * 1e9 * scale:.0f}",
                     "0 wait 1 0 0", "0 wait 0 1 0", f"0 compute {100 / 2e9 * 1e9 * scale:.0f}", "0 isend 2 0 8",
                     "0 wait 0 2 0", f"0 compute {4 / 2e9 * 1e9 * scale:.0f}", "0 alltoall 4 4", "0 finalize"]


def test_every_wait_names_its_request():
    """A wait for all (SMPI 3.32's waitall is a waitany per request, O(n^2)) is one wait per request, in order."""
    events = [("isend", 1, 8, 0), ("isend", 2, 8, 1), ("irecv", 1, 8, 2), ("wait", (0,)), ("wait", (1, 2))]
    assert list(traces.trace_lines(typed(events), 0, 3, 1e9))[4:7] == ["0 wait 0 1 0", "0 wait 0 2 0", "0 wait 1 0 0"]


def test_messages_from_2_gib_count_in_doubles():
    """SMPI passes trace counts as int: 4 GiB go as 2^29 MPI_DOUBLEs (datatype 0), smaller sizes as bytes."""
    events = [("isend", 1, 4 << 30, 0), ("irecv", 1, 8, 1), ("wait", (0, 1)), ("coll", "alltoall", (0, 1), None,
                                                                           (4 << 20, 4 << 20), (4 << 20, 4 << 20))]
    lines = list(traces.trace_lines(typed(events), 0, 1024, 1e9))
    assert lines[1:3] == ["0 irecv 1 0 8", f"0 isend 1 0 {1 << 29} 0"]
    lines = list(traces.trace_lines(typed(events[3:]), 0, 2, 1e9))  # the whole job of 2: SMPI's own alltoall
    assert lines[1:3] == [f"0 compute {(4 << 20) * platforms.TIME_SCALE}", f"0 alltoall {4 << 20} {4 << 20}"]
    lines = list(traces.trace_lines(typed([("alltoall", 4 << 20)]), 0, 1024, 1e9))
    assert lines[1] == f"0 alltoall {1 << 19} {1 << 19} 0 0"


def test_posts_of_one_instant_go_receives_first_by_peer():
    """Posts between two lines that take time are reordered for SMPI's matching; a copy or wait ends them."""
    events = [("irecv", 2, 8, 0), ("isend", 2, 8, 1), ("isend", 1, 8, 2), ("isend", 2, 16, 3), ("irecv", 1, 8, 4),
              ("copy", 8), ("isend", 3, 8, 5), ("irecv", 3, 8, 6), ("wait", (0, 1, 2, 3, 4, 5, 6)),
              ("isend", 1, 8, 7), ("irecv", 1, 8, 8), ("wait", (7, 8))]
    lines = list(traces.trace_lines(typed(events), 0, 4, 1e9))
    assert lines[1:7] == ["0 irecv 1 0 8", "0 irecv 2 0 8", "0 isend 1 0 8", "0 isend 2 0 8", "0 isend 2 1 16",
                          "0 compute 8000"]
    assert lines[7:9] == ["0 irecv 3 0 8", "0 isend 3 0 8"]
    assert lines[16:18] == ["0 irecv 1 1 8", "0 isend 1 1 8"] and lines[18:20] == ["0 wait 0 1 1", "0 wait 1 0 1"]


@pytest.mark.parametrize("name,options,p,compact", [
    ("linear", {}, 5, 1), ("throttled", {"window": 2}, 6, 1), ("linear_sync", {}, 4, 1), ("pairwise", {}, 5, 1),
    ("pairwise", {"schedule": "xor"}, 8, 1), ("bine", {}, 6, 1), ("node_aware", {"ppn": 2}, 5, 1),
    ("pairwise_inplace", {}, 5, 1)])
def test_a_compact_event_writes_the_lines_of_its_messages(name, options, p, compact):
    """Batches read from steps are one Burst event, a run of pairwise steps one Sendrecvs event; the trace of
    either is line for line that of its messages one by one."""
    steps = stepped(name, options, p)
    assert steps is not None, name
    schedule = steps.scaled(4)
    assert sum(isinstance(e, (Burst, Sendrecvs)) for e in schedule.events[0]) == compact
    for r, (compacted, one_by_one) in enumerate(zip(schedule.events, schedule.expanded().events)):
        assert list(traces.trace_lines(compacted, r, p, 1e9)) == list(traces.trace_lines(one_by_one, r, p, 1e9))


@pytest.mark.parametrize("cores", [1, 2])
def test_a_packed_capture_writes_the_lines_of_its_events(monkeypatch, cores):
    """The simulator's capture keeps a long run of posts as one Posts event and a wait for them as a range (in this
    process, or in forked ones); expanded, it is the capture event for event, and its trace is line for line."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    p, window = 20, {"window": 16}  # linear_sync posts 16 receives and 16 sends, then refills one slot per Waitany
    captured, packed = capture("linear_sync", window, p, 3), capture_unit("linear_sync", window, p).scaled(3)
    assert [e.kind for e in packed.events[0][:3]] == ["copy", "posts", "wait"]
    assert packed.expanded().events == captured.events
    for r, (events, one_by_one) in enumerate(zip(packed.events, captured.events)):
        assert list(traces.trace_lines(events, r, p, 1e9)) == list(traces.trace_lines(one_by_one, r, p, 1e9))
    whole = capture("locality_aware", {}, p, 1).packed()  # 19 receives and 19 sends, a copy, one wait for all
    assert [e.kind for e in whole.events[0]] == ["posts", "copy", "wait", "copy", "coll", "copy"]
    waited = whole.events[0][2]
    assert isinstance(waited, Wait) and waited.requests == range(2 * (p - 1))


def test_compact_events_count_tags_on_and_lower_a_message_to_themselves():
    """Tags go on from the messages before a Burst or Sendrecvs (a peer met twice in one Sendrecvs too); one that
    names its own rank has that message copied."""
    line = np.array
    two = line([2])
    events: list[Event] = [Copy(8), Burst(line([1, 2]), line([2, 1]), 8, 0, two, two), Isend(1, 8, 4), Wait((4,)),
              Burst(line([1, 0]), line([0, 1]), 8, 5, two, two), Sendrecvs(line([2, 2]), line([1, 1]), 8, 9),
              Sendrecvs(line([0]), line([0]), 8, 13)]
    lines = list(traces.trace_lines(events, 0, 3, 1e9))
    assert lines == list(traces.trace_lines(unpacked(events), 0, 3, 1e9))
    assert lines[2:6] == ["0 irecv 1 0 8", "0 irecv 2 0 8", "0 isend 1 0 8", "0 isend 2 0 8"]
    assert lines[10] == "0 isend 1 1 8"
    assert lines[12:17] == ["0 irecv 1 1 8", "0 compute 8000", "0 isend 1 2 8", "0 wait 1 0 1", "0 wait 0 1 2"]
    assert lines[17:25] == ["0 irecv 2 1 8", "0 isend 1 3 8", "0 wait 0 1 3", "0 wait 2 0 1",
                            "0 irecv 2 2 8", "0 isend 1 4 8", "0 wait 0 1 4", "0 wait 2 0 2"]
    assert lines[25:] == ["0 compute 8000", "0 finalize"]


def test_link_parsing():
    link = platforms.Link.parse("100Gbps,1us")
    assert link.bytes_per_second == 12.5e9 and link.latency == 1e-6
    assert platforms.Link.parse("125MBps,50us").bytes_per_second == 125e6
    for bad in ("100Gbps", "fast,1us", "100Gbps,1 parsec", "0Gbps,1us"):
        with pytest.raises(BadOption, match="--link"):
            platforms.Link.parse(bad)


def test_missing_simgrid_is_named(monkeypatch):
    monkeypatch.delenv(simgrid.SMPIRUN_VARIABLE, raising=False)
    monkeypatch.setattr(simgrid.shutil, "which", lambda name: None)
    problem = simgrid.missing()
    assert problem and "no smpirun" in problem and "make simgrid" in problem and "libsimgrid-dev" in problem


def test_an_smpirun_named_that_is_none_is_refused_once_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(simgrid.SMPIRUN_VARIABLE, str(tmp_path / "nowhere" / "smpirun"))
    code, _, err = simulate(tmp_path, capsys, "--nprocs", "4", "--sizes", "8", "--algorithms", "linear")
    assert code == 2 and err.count(f"A2A_SMPIRUN={tmp_path / 'nowhere' / 'smpirun'} names no program") == 1
    assert "/usr/bin/smpirun" in err and not (tmp_path / "sim").exists()


def test_simgrid_before_3_32_is_refused_once_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(simgrid, "missing", lambda: None)
    monkeypatch.setattr(simgrid, "version", lambda: "3.25")
    code, _, err = simulate(tmp_path, capsys, "--nprocs", "4", "--sizes", "8", "--algorithms", "linear")
    assert code == 2 and err.count("SimGrid 3.25") == 1 and "3.32 or later" in err and "make simgrid" in err
    assert not (tmp_path / "sim").exists()
    assert simgrid.unsupported("3.32") is None and simgrid.unsupported("4.1") is None


def test_smpirun_before_3_34_reads_a_message_cost_as_a_threshold_table(monkeypatch):
    """3.32's SMPI reads smpi/os only as THRESHOLD:BASE:PER_BYTE (one value crashes it); 3.34 and later read one."""
    config = ["--cfg=smpi/os:0.5", "--cfg=smpi/ois:0.5", "--cfg=smpi/or:0.7", "--cfg=smpi/bw-factor:0:1"]
    monkeypatch.setattr(simgrid, "version", lambda: "3.32")
    assert simgrid.smpirun_config(config) == ["--cfg=smpi/os:0:0.5:0", "--cfg=smpi/ois:0:0.5:0",
                                              "--cfg=smpi/or:0:0.7:0", "--cfg=smpi/bw-factor:0:1"]
    monkeypatch.setattr(simgrid, "version", lambda: "4.1")
    assert simgrid.smpirun_config(config) == config


@pytest.mark.parametrize("layout", ["lib/simgrid", "lib/x86_64-linux-gnu/simgrid"])
def test_the_replayer_is_the_one_of_smpiruns_simgrid(tmp_path, monkeypatch, layout):
    monkeypatch.delenv(simgrid.SMPIRUN_VARIABLE, raising=False)
    for tree in ("built", "other"):  # a replayer on PATH from another SimGrid must not be taken
        for path in (tmp_path / tree / "bin" / "smpirun", tmp_path / tree / layout / "smpireplaymain"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
    found = {"smpirun": tmp_path / "built" / "bin" / "smpirun",
             "smpireplaymain": tmp_path / "other" / layout / "smpireplaymain"}
    monkeypatch.setattr(simgrid.shutil, "which", lambda name: str(found[name]))
    assert simgrid.replayer() == str(tmp_path / "built" / layout / "smpireplaymain")
    assert simgrid.missing() is None


def test_simgrid_before_3_34_is_slow():
    assert simgrid.slow_version("3.32") and simgrid.slow_version("3.33.1")
    assert not simgrid.slow_version("3.34") and not simgrid.slow_version("4.1") and not simgrid.slow_version("?")


def test_platforms_carry_their_shape():
    link = platforms.Link.parse("10Gbps,1us")
    xml = lambda spec, **nodes: platforms.platform_xml(fabric.parse(spec, **nodes), link, 1e10)  # noqa: E731
    assert 'topology="TORUS" topo_parameters="4,4,4"' in xml("torus:4x4x4")
    assert 'topo_parameters="2;8,4;1,1;1,2"' in xml("fattree:4x8,oversub=4")
    assert 'topo_parameters="2,1;3,1;2,1;4"' in xml("dragonfly:2x3x2x4")
    assert 'bb_bw=' in xml("switch", nodes=8)


def simulate(tmp_path, capsys, *args: str) -> tuple[int, str, str]:
    return bench_here(capsys, "simulate", "--copy-bandwidth", "5e9", "--output", str(tmp_path / "sim"), *args)


def rows(directory) -> list[dict[str, str]]:
    with open(directory / "results.csv") as handle:
        return list(csv.DictReader(handle))


def simulated(tmp_path, capsys, *args: str) -> tuple[list[dict[str, str]], str]:
    """A simulation that must succeed: its results rows and what it printed."""
    code, out, err = simulate(tmp_path, capsys, *args)
    assert code == 0, err
    record = rows(tmp_path / "sim")
    assert all(r["valid"] == "true" for r in record), [r["note"] for r in record]
    return record, out


@needs_simgrid
@pytest.mark.parametrize("platform", ["switch", "ring", "torus:2x2x2", "fattree:2x4,oversub=2", "dragonfly:2x1x2x2"])
def test_every_topology_replays(tmp_path, capsys, platform):
    record, _ = simulated(tmp_path, capsys, "--platform", platform, "--nprocs", "8", "--sizes", "1K",
                          "--algorithms", "pairwise")
    assert float(record[0]["t_p50_us"]) > 7 * 1  # 7 steps, each at least the 1 us link latency


@needs_simgrid
def test_simulate_switch_record_and_physics(tmp_path, capsys):
    record, _ = simulated(tmp_path, capsys, "--platform", "switch", "--link", "1Gbps,50us", "--nprocs", "4",
                          "--sizes", "8,64K", "--algorithms", "linear,pairwise,native:selector=mpich")
    assert len(record) == 6 and {r["timing"] for r in record} == {"simulated"}
    assert {r["platform"] for r in record} == {"switch"}
    by = {(r["algorithm"], r["bytes_per_peer"]): float(r["t_p50_us"]) for r in record}
    # linear at 64 KiB: 3 messages leave each node over its own 125 MB/s link, at once
    floor = 3 * 65536 / 125e6 * 1e6
    assert floor < by[("linear", "65536")] < 3 * floor
    # pairwise waits for each of its 3 steps: at least 3 latencies more than linear at 8 B
    assert by[("pairwise", "8")] > by[("linear", "8")] + 2 * 50
    meta = json.loads((tmp_path / "sim" / "meta.json").read_text())
    assert meta["simgrid"] == simgrid.version() and meta["status"] == "complete" and meta["link"] == "1Gbps,50us"
    assert 0 < meta["replay_cpu_seconds"] and 0 < meta["replay_wall_seconds"]  # six replays of 4 ranks each
    code, out, _ = bench_here(capsys, "show", str(tmp_path / "sim"))
    assert code == 0 and "native:selector=mpich" in out


@needs_simgrid
def test_equal_traces_are_replayed_once(tmp_path, capsys):
    """hierarchical and multileader at one rank per node send the same messages: multileader takes hierarchical's
    replay, on each platform; linear's traces differ, so it is replayed."""
    for platform in ("switch", "ring"):
        record, _ = simulated(tmp_path / platform, capsys, "--platform", platform, "--nprocs", "4", "--sizes", "8,1K",
                              "--algorithms", "hierarchical,multileader,linear")
        by = {(r["algorithm"], r["bytes_per_peer"]): r for r in record}
        for size in ("8", "1024"):
            assert by[("multileader", size)]["t_p50_us"] == by[("hierarchical", size)]["t_p50_us"]
            assert by[("multileader", size)]["note"].startswith("replayed once with hierarchical")
            assert by[("linear", size)]["note"] == by[("hierarchical", size)]["note"] == ""
        meta = json.loads((tmp_path / platform / "sim" / "meta.json").read_text())
        assert meta["replays_shared"] == 2


COMPARED = {  # eager and rendezvous messages, sub-communicator collectives, local copies, message costs
    # (at 8 and 32 ranks: 64 cost five times 32's CPU; without the envelope or the receive cost, 16 and 8 of these 20
    # points differ, as checked on 7 Dec 2026)
    "costs": ("--platform", "fattree:4x8,oversub=2", "--ppn", "2", "--nprocs", "8,32", "--sizes", "8,128K",
              "--algorithms", "linear,bruck,hierarchical,pairwise,native:selector=mpich", "--message-cost", "0.5,0.7"),
    # windows of rendezvous messages that wait for each other: right only if the ranks post in SMPI's turns
    "turns": ("--platform", "fattree:8x8,oversub=2", "--ppn", "2", "--nprocs", "64", "--sizes", "64K",
              "--algorithms", "throttled"),
}


@needs_simgrid
@pytest.mark.parametrize("machine", COMPARED)
def test_the_s4u_replayer_gives_smpiruns_times(tmp_path, capsys, machine):
    """The same times to SMPI's printed resolution (1 ns); SMPI's own MPI_Alltoall goes to smpirun under either."""
    times = {}
    for replayer in simgrid.REPLAYERS:
        record, _ = simulated(tmp_path / replayer, capsys, *COMPARED[machine], "--replayer", replayer)
        times[replayer] = {(r["nprocs"], r["algorithm"], r["bytes_per_peer"]): float(r["t_p50_us"]) for r in record}
        meta = json.loads((tmp_path / replayer / "sim" / "meta.json").read_text())
        assert meta["replay"] == replayer and (meta["s4u_replayer"] is not None) == (replayer == "s4u")
    assert len(times["s4u"]) == {"costs": 20, "turns": 1}[machine] and times["s4u"].keys() == times["smpi"].keys()
    assert times["s4u"] == pytest.approx(times["smpi"], abs=1e-3)
    if machine == "costs":
        assert times["s4u"][("8", "linear", "8")] > 0.5 + 7 * 0.7  # the costs are charged


@needs_simgrid
def test_one_trace_scaled_by_the_replayer_gives_each_sizes_own_times(tmp_path, capsys, monkeypatch):
    """The S4U replayer replays one trace per variant at every size (--scale): eager and rendezvous messages,
    blocks of several peers (bruck), local copies (hierarchical) take the times of the traces each size writes
    itself (kept with --keep-traces); SMPI's own MPI_Alltoall is still written per size, for smpirun."""
    written = []
    unit_traces = traces.unit_traces

    def logged(*args):
        written.append(args[0].nprocs)
        return unit_traces(*args)

    monkeypatch.setattr(traces, "unit_traces", logged)
    args = ("--platform", "torus:2x2x2", "--nprocs", "8", "--sizes", "8,1K,64K,1M",
            "--algorithms", "linear,bruck,hierarchical,native:selector=mpich")
    scaled, _ = simulated(tmp_path / "scaled", capsys, *args)
    own, _ = simulated(tmp_path / "own", capsys, *args, "--keep-traces", str(tmp_path / "kept"))
    assert written == [8] * 4  # one per variant, not one per size
    assert len(list((tmp_path / "kept").iterdir())) == 16
    assert [(r["algorithm"], r["t_p50_us"]) for r in scaled] == [(r["algorithm"], r["t_p50_us"]) for r in own]


@needs_simgrid
def test_without_a_compiler_the_s4u_replayer_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    which, source = simgrid.shutil.which, tmp_path / "s4u_replay.cpp"
    source.write_text("// a source never built\n")
    monkeypatch.setattr(simgrid, "S4U_SOURCE", source)
    monkeypatch.setattr(simgrid.shutil, "which", lambda name: None if name == "c++" else which(name))
    code, _, err = simulate(tmp_path, capsys, "--nprocs", "4", "--sizes", "8", "--algorithms", "linear")
    assert code == 2 and err.count("C++ compiler") == 1 and "--replayer smpi" in err
    assert not (tmp_path / "sim").exists()


TWO_HOSTS = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1"><zone id="z" routing="Full">
  <host id="h0" speed="1Gf"/><host id="h1" speed="1Gf"/><link id="l" bandwidth="1GBps" latency="1us"/>
  <route src="h0" dst="h1"><link_ctn id="l"/></route>
</zone></platform>
"""


@pytest.mark.launches
@needs_simgrid
@pytest.mark.parametrize("line,error", [
    ("", None),
    ("0 isend 1 0 8abc", "cannot read '0 isend 1 0 8abc'"),
    ("0 isend 1 0 8 0 9", "cannot read '0 isend 1 0 8 0 9'"),
    ("0 wait 0 1", "cannot read '0 wait 0 1'"),
    ("0 compute 1e3x", "cannot read '0 compute 1e3x'"),
    ("0 isend 1 0 8 3", "datatype 3 is not replayed"),
    ("0 alltoall 8 8", "'alltoall' is not replayed here"),
    ("1 isend 1 0 8", "a line of rank 1 in the trace of rank 0"),
])
def test_the_s4u_replayer_names_the_trace_line_it_cannot_read(tmp_path, line, error):
    """A trace line the replayer cannot read stops it with the file and the line; blank lines are skipped."""
    (tmp_path / "platform.xml").write_text(TWO_HOSTS)
    (tmp_path / "hostfile").write_text("h0\nh1\n")
    (tmp_path / "rank0.txt").write_text(f"0 init\n{line}\n\n0 isend 1 0 1000000 0\n0 wait 0 1 0\n0 finalize\n")
    (tmp_path / "rank1.txt").write_text("1 init\n  \n1 irecv 0 0 8000000\n1 wait 0 1 0\n1 finalize")
    (tmp_path / "traces.txt").write_text("rank0.txt\nrank1.txt\n")
    done = subprocess.run([simgrid.s4u_replayer(), "platform.xml", "hostfile", "traces.txt", "--scale=2",
                           "--log=root.thres:warning"],
                          cwd=tmp_path, capture_output=True, text=True)
    if error is None:  # 16 MB (8 MB as MPI_DOUBLEs, scaled twice) at 1 GB/s, less SMPI's bandwidth factor (0.94)
        assert done.returncode == 0, done.stderr
        assert 16e-3 < float(done.stdout.split()[-1]) < 18e-3
    else:
        assert done.returncode == 2 and done.stderr.startswith("s4u_replay: rank0.txt: ") and error in done.stderr


@needs_simgrid
def test_ideal_network_is_latency_plus_bytes_over_rate(tmp_path, capsys):
    """Two ranks on a switch: the own block copied (1 us), then one 64 KiB message each way, 2 links of 50 us,
    125 MB/s (full duplex)."""
    record, _ = simulated(tmp_path, capsys, "--platform", "switch", "--link", "1Gbps,50us", "--nprocs", "2",
                          "--sizes", "64K", "--algorithms", "linear", "--network", "ideal",
                          "--copy-bandwidth", "65.536e9")
    expected = (1e-6 + 2 * 50e-6 + 65536 / 125e6) * 1e6
    assert float(record[0]["t_p50_us"]) == pytest.approx(expected, rel=0.02)


@needs_simgrid
def test_a_message_cost_is_charged_to_each_send_and_each_eager_receive(tmp_path, capsys):
    """Two ranks, ideal network: 2 us a send and 3 us a receive add 5 us at 8 B, and 2 us from 64 KiB (no
    eager receive there)."""
    args = ("--platform", "switch", "--link", "1Gbps,50us", "--nprocs", "2", "--sizes", "8,128K", "--algorithms",
            "linear", "--network", "ideal")
    plain, _ = simulated(tmp_path / "plain", capsys, *args)
    charged, out = simulated(tmp_path / "charged", capsys, *args, "--message-cost", "2,3")
    added = [float(c["t_p50_us"]) - float(p["t_p50_us"]) for p, c in zip(plain, charged)]
    assert added == [pytest.approx(5, abs=0.01), pytest.approx(2, abs=0.01)]
    assert "2 us a send, 3 us a receive" in out
    meta = json.loads((tmp_path / "charged" / "sim" / "meta.json").read_text())
    assert meta["message_cost"] == {"send_us": 2.0, "recv_us": 3.0, "source": "--message-cost 2,3"}


def measured_linear(directory, times: dict[int | tuple[int, int], float], size: int = 8):
    """A measured record with linear's p50 (us) per process count, or per (process count, bytes per peer)."""
    recorder = Recorder(directory)
    for key, us in times.items():
        nprocs, nbytes = key if isinstance(key, tuple) else (key, size)
        recorder.add(Row(nprocs, 1, nprocs, "linear", "", "float32", nbytes // 4, nbytes, iterations=10, warmup=1,
                         t_p50_us=us, valid=True))
    recorder.close()
    return directory


def test_calibration_takes_linears_growth_per_extra_peer(tmp_path):
    record = measured_linear(tmp_path / "run", {n: 3.0 + 1.7 * (n - 1) for n in (2, 4, 8, 16)})
    cost = message_cost(record)
    assert cost.send == pytest.approx(0.85e-6) and cost.recv == pytest.approx(0.85e-6)
    assert "linear at 2, 4, 8, 16 ranks grew by 1.7 us per extra peer" in cost.source
    with pytest.raises(BadConfig, match="calibration needs two or more"):
        message_cost(measured_linear(tmp_path / "one", {8: 15.0}))
    with pytest.raises(BadConfig, match="no per-message cost"):
        message_cost(measured_linear(tmp_path / "flat", {2: 5.0, 4: 4.0}))
    with pytest.raises(BadConfig, match="calibration needs two or more"):  # 64 KiB is no longer the latency regime
        message_cost(measured_linear(tmp_path / "large", {2: 5.0, 4: 9.0}, size=65536))


@needs_simgrid
def test_simulate_calibrated_from_a_measured_record(tmp_path, capsys):
    record = measured_linear(tmp_path / "run", {2: 4.0, 4: 7.4})
    charged, out = simulated(tmp_path, capsys, "--nprocs", "4", "--sizes", "8", "--algorithms", "linear",
                             "--calibrate", str(record))
    meta = json.loads((tmp_path / "sim" / "meta.json").read_text())
    assert meta["message_cost"]["send_us"] == pytest.approx(0.85) and str(record) in meta["message_cost"]["source"]
    assert meta["bandwidth_factor"]["factor"] == 0 and meta["bandwidth_factor"]["source"].startswith("none")
    code, _, err = simulate(tmp_path / "both", capsys, "--calibrate", str(record), "--message-cost", "1")
    assert code == 2 and "give one" in err


@needs_simgrid
def test_calibration_fits_the_bandwidth_to_linears_largest_size(tmp_path, capsys):
    """The fitted factor makes the simulated linear take its measured time at 1 MiB, on every later replay with the
    ranks per node it was measured with (both on one node); with only 2 ranks a node, the memory they share is never
    what holds them back."""
    args = ("--platform", "switch", "--ppn", "2", "--nprocs", "2", "--sizes", "8,1M", "--algorithms", "linear")
    record = measured_linear(tmp_path / "run", {2: 4.0, 4: 7.4, (2, 1 << 20): 1000.0})
    plain, _ = simulated(tmp_path / "plain", capsys, *args)
    charged, out = simulated(tmp_path / "fitted", capsys, *args, "--calibrate", str(record))
    assert float(plain[1]["t_p50_us"]) < 800 and float(charged[1]["t_p50_us"]) == pytest.approx(1000.0, rel=1e-3)
    meta = json.loads((tmp_path / "fitted" / "sim" / "meta.json").read_text())
    assert 0 < meta["bandwidth_factor"]["factor"] < 1 and "bandwidth factor" in out
    assert "linear at 2 ranks (1 node(s) of 2) and 1048576 B per peer" in meta["bandwidth_factor"]["source"]
    assert meta["node_memory"]["source"].startswith("unbounded") and "unbounded memory" in out
    assert Machine.of(meta).bandwidth.factor == meta["bandwidth_factor"]["factor"]  # --resume replays on it
    assert Machine.of(meta).memory == platforms.NodeMemory.of(meta["node_memory"])
    too_fast = measured_linear(tmp_path / "fast", {2: 4.0, 4: 7.4, (2, 1 << 20): 5.0})
    code, _, err = simulate(tmp_path / "fast", capsys, *args, "--calibrate", str(too_fast))
    assert code == 2 and "no bandwidth factor fits" in err


@needs_simgrid
def test_simulate_resumes_only_missing_points(tmp_path, capsys):
    args = ("--platform", "torus:2x2", "--nprocs", "4", "--sizes", "8,1K", "--algorithms", "bruck,throttled")
    assert simulate(tmp_path, capsys, *args)[0] == 0
    path = tmp_path / "sim" / "results.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:3]) + "\n")  # header and two points survive
    code, _, err = bench_here(capsys, "simulate", "--resume", str(tmp_path / "sim"))
    assert code == 0, err
    assert "2 points" in err
    resumed = path.read_text().splitlines()
    assert resumed[:3] == lines[:3] and sorted(resumed) == sorted(lines)


@needs_simgrid
def test_a_stored_schedule_replays_on_another_platform_as_captured(tmp_path, capsys):
    """The second simulation reads both schedules back, and they give the times a fresh capture gives."""
    cache = str(tmp_path / "schedules")
    common = ("--nprocs", "4", "--sizes", "8,64K", "--algorithms", "bruck,linear", "--schedule-cache")
    fresh = [simulated(tmp_path / name, capsys, "--platform", platform, *common, where)[0]
             for name, platform, where in [("a", "switch", cache), ("b", "torus:2x2", cache),
                                           ("c", "torus:2x2", "none")]]
    meta = [json.loads((tmp_path / name / "sim" / "meta.json").read_text()) for name in "abc"]
    assert [(m["schedules_captured"], m["schedules_from_cache"]) for m in meta] == [(2, 0), (0, 2), (2, 0)]
    assert len(list((tmp_path / "schedules").glob("*.npz"))) == 2
    times = [sorted((r["algorithm"], r["bytes_per_peer"], r["t_p50_us"]) for r in run) for run in fresh]
    assert times[1] == times[2] != times[0]


PROBE = """import a2a


@a2a.register("probe")
def probe(comm, sendbuf, recvbuf):
    \"\"\"MPI_Alltoall, CALLS times.\"\"\"
    def run():
        for _ in range(CALLS):
            comm.Alltoall(sendbuf, recvbuf)
    return run
"""


@pytest.mark.launches
@needs_simgrid
def test_an_edited_algorithm_is_captured_again(tmp_path):
    """The cache keys a schedule by its algorithm's source: an edit to the plan is simulated as edited."""
    plugin = tmp_path / "probe.py"

    def simulated_us(calls: int, name: str) -> tuple[float, int]:
        plugin.write_text(PROBE.replace("CALLS", str(calls)))
        done = python("-m", "bench", "simulate", "--plugin", str(plugin), "--algorithms", "probe", "--nprocs", "4",
                      "--sizes", "64K", "--copy-bandwidth", "5e9", "--quiet", "--output", str(tmp_path / name),
                      "--schedule-cache", str(tmp_path / "schedules"))
        assert done.returncode == 0, done.stderr
        meta = json.loads((tmp_path / name / "meta.json").read_text())
        return float(rows(tmp_path / name)[0]["t_p50_us"]), meta["schedules_from_cache"]

    once, stored = simulated_us(1, "a")
    assert stored == 0 and simulated_us(1, "b") == (once, 1)
    twice, stored = simulated_us(2, "c")
    assert stored == 0 and twice > 1.5 * once


@needs_simgrid
def test_simulate_groups_on_a_torus(tmp_path, capsys):
    record, out = simulated(tmp_path, capsys, "--platform", "torus:2x2x2", "--mesh", "2x2x2", "--groups", "z",
                            "--groups", "x,y,z", "--sizes", "1K", "--algorithms", "pairwise", "--format", "tpu")
    assert sorted((r["groups"], r["group_size"]) for r in record) == [("1x1x2", "2"), ("2x2x2", "8")]
    assert "1x1x2" in out


@needs_simgrid
@pytest.mark.parametrize("args,message", [
    (("--platform", "torus:0x2"), "torus"),
    (("--platform", "dragonfly:2x2x1x2"), "ROUTERS (1) must be at least GROUPS (2)"),
    (("--platform", "hypercube"), "accepted: switch"),
    (("--link", "fast"), "RATE,LATENCY"),
    (("--message-cost", "fast"), "microseconds per send and per receive"),
    (("--algorithms", "native:selector=intel"), "selector"),
    (("--algorithms", "nosuch"), "unknown algorithm"),
    (("--sizes", "6"), "multiples"),
    (("--platform", "torus:2x2", "--nprocs", "8", "--ppn", "1"), "need 8 nodes"),
])
def test_bad_input_is_refused_once(tmp_path, capsys, args, message):
    code, _, err = simulate(tmp_path, capsys, "--nprocs", "4", *args)
    assert code == 2
    assert message in err and err.count("error:") == 1
    assert not (tmp_path / "sim").exists()


@needs_simgrid
@pytest.mark.parametrize("replayer", simgrid.REPLAYERS)
def test_replay_over_its_time_is_stopped_and_recorded(tmp_path, capsys, replayer):
    """A replay longer than --replay-timeout is stopped; its point is kept with a note, the others go on; with no
    point simulated, the simulation ends with 1 and says why once.
    (64 ranks: each replay takes 0.1 s or more, the limit's timer may wait a few ms for the GIL.)"""
    code, _, err = simulate(tmp_path, capsys, "--platform", "switch", "--nprocs", "64", "--sizes", "8",
                            "--algorithms", "linear,pairwise", "--replay-timeout", "0.001", "--replayer", replayer)
    assert code == 1 and err.count("the replay took more than 0.001 s") == 1, err
    record = rows(tmp_path / "sim")
    assert [r["algorithm"] for r in record] == ["linear", "pairwise"]
    assert all("not simulated: the replay took more than 0.001 s" in r["note"] for r in record), record


CRASHING = """#!/bin/sh
case "$1" in --version|-version) echo "SimGrid version 4.1"; exit 0;; esac
echo "terminate called after throwing an instance of 'std::out_of_range'"
echo "Backtrace (displayed in actor maestro):"
echo "  ->  #0 simgrid::xbt::Backtrace::Backtrace()"
echo "  ->  #1 simgrid::smpi::utils::parse_factor(std::string const&)"
kill -ABRT $$
"""


@pytest.mark.simgrid
@pytest.mark.parametrize("replayer", simgrid.REPLAYERS)
def test_a_simulation_whose_every_replay_fails_ends_with_1_and_says_why_once(tmp_path, capsys, monkeypatch,
                                                                             replayer):
    """Replayers that abort with a backtrace (smpirun and smpireplaymain of a SimGrid that A2A_SMPIRUN names, or
    the S4U replayer): each note is one line, the backtraces are in the record's errors.log, the cause is said
    once, and the simulation ends with 1."""
    fake = tmp_path / "simgrid"
    for program in (fake / "bin" / "smpirun", fake / "lib" / "simgrid" / "smpireplaymain", fake / "s4u_replay"):
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_text(CRASHING)
        program.chmod(0o755)
    monkeypatch.setenv(simgrid.SMPIRUN_VARIABLE, str(fake / "bin" / "smpirun"))
    monkeypatch.setattr(simgrid, "s4u_replayer", lambda: str(fake / "s4u_replay"))
    code, _, err = simulate(tmp_path, capsys, "--nprocs", "4", "--sizes", "8,1K", "--algorithms", "linear,pairwise",
                            "--replayer", replayer)
    failed = f"{'s4u_replay' if replayer == 's4u' else 'smpirun'} failed (exit -6, SIGABRT)"
    assert code == 1 and err.count(failed) == 1 and err.count("no point was simulated") == 1, err
    record = rows(tmp_path / "sim")
    assert len(record) == 4 and {r["note"] for r in record} == {f"not simulated: {failed}"}
    meta = json.loads((tmp_path / "sim" / "meta.json").read_text())
    assert meta["errors_log"] == "errors.log" and meta["smpirun"] == str(fake / "bin" / "smpirun")
    log = (tmp_path / "sim" / "errors.log").read_text()
    assert log.count("parse_factor(std::string const&)") == 4 and log.count(failed) >= 4


class LoggedReplay:
    """A stand-in for replay.ReplayJob that logs when each replay starts, is waited for and stops."""

    def __init__(self, log: list[str], interrupt: str = "", signum: int = signal.SIGINT, memory: int = 0):
        self.log, self.interrupt, self.signum, self.bytes = log, interrupt, signum, memory
        self.name = ""  # the variant, set by the call that stands for starting its replay

    def __call__(self, schedule, *args, **kwargs) -> "LoggedReplay":
        job = LoggedReplay(self.log, self.interrupt, self.signum, self.bytes)
        job.name = next(e for e in reversed(self.log) if e.startswith("capture")).split()[-1]  # one size a variant
        return job

    def identity(self, config) -> str:
        return self.name  # no two variants here send the same messages

    def memory(self) -> int:
        return self.bytes

    def start(self, config, timeout):
        self.log.append(f"start {self.name}")
        self.config = config
        return self

    def result(self) -> replay.Replay:
        if self.name == self.interrupt:
            os.kill(os.getpid(), self.signum)
        self.log.append(f"result {self.name}")
        return replay.Replay(1e-3, 0.0, 0.0)

    def stop(self) -> None:
        self.log.append(f"stop {self.name}")


def logged_replays(monkeypatch, replays: LoggedReplay) -> None:
    """The sweep's captures log themselves in the stand-in's log, and its replays are the stand-in's."""
    from a2a.simulate import driver as command

    real = command.capture_unit

    def capture_unit(name, *args, **kwargs):
        replays.log.append(f"capture {name}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(command, "capture_unit", capture_unit)
    monkeypatch.setattr(replay, "ReplayJob", replays)
    monkeypatch.setattr(simgrid, "missing", lambda: None)
    monkeypatch.setattr(simgrid, "version", lambda: "4.1")
    monkeypatch.setattr(simgrid, "s4u_replayer", lambda: "s4u_replay")  # never run: the replays are stand-ins


ORDER = {"1": ["capture linear", "start linear", "capture pairwise", "result linear", "start pairwise",
               "result pairwise"],
         "2": ["capture linear", "start linear", "capture pairwise", "start pairwise", "result linear",
               "result pairwise"]}


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("stop", ["", "SIGINT", "SIGTERM"])
def test_replays_run_while_the_next_variant_is_captured(tmp_path, capsys, monkeypatch, stop, jobs):
    """One job: each replay overlaps the next capture; two: the second starts before the first is waited for.
    Ctrl-C or SIGTERM while pairwise replays stops that replay and closes the record with linear's row."""
    log: list[str] = []
    interrupt = "pairwise" if stop else ""
    logged_replays(monkeypatch, LoggedReplay(log, interrupt, getattr(signal, stop or "SIGINT")))
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGUSR1)}
    code, _, err = simulate(tmp_path, capsys, "--nprocs", "4", "--sizes", "8", "--algorithms", "linear,pairwise",
                            "--jobs", jobs, "--schedule-cache", "none")
    if not interrupt:
        assert code == 0, err
        assert log == ORDER[jobs]
    else:
        assert code == 143 and log[-1] == "stop pairwise" and "start pairwise" in log
        assert [r["algorithm"] for r in rows(tmp_path / "sim")] == ["linear"]
        assert json.loads((tmp_path / "sim" / "meta.json").read_text())["status"] == f"terminated by {stop}"
    assert {signum: signal.getsignal(signum) for signum in handlers} == handlers  # given back


@pytest.mark.parametrize("memory, waits", [("6G", 0), ("5G", 1)])
def test_replays_that_do_not_fit_in_memory_together_run_one_at_a_time(tmp_path, capsys, monkeypatch, memory, waits):
    """Two replays of 3 GiB each: under --memory 6G both run at once (--jobs 2); under 5G pairwise's starts only
    once linear's is done, and the record counts the wait."""
    log: list[str] = []
    logged_replays(monkeypatch, LoggedReplay(log, memory=3 << 30))
    code, _, err = simulate(tmp_path, capsys, "--nprocs", "4", "--sizes", "8", "--algorithms", "linear,pairwise",
                            "--jobs", "2", "--memory", memory, "--schedule-cache", "none")
    assert code == 0, err
    assert log == ORDER["2" if not waits else "1"]
    assert json.loads((tmp_path / "sim" / "meta.json").read_text()).get("replays_waited_for_memory", 0) == waits


@pytest.mark.parametrize("memory, outcome", [(None, "beside"), ("100G", "beside"), ("22G", "after"),
                                             ("18G", "refused")])
def test_under_a_memory_bound_a_capture_runs_in_what_the_replays_leave(tmp_path, capsys, monkeypatch, memory,
                                                                      outcome):
    """linear_sync's schedule with a window of 2 is captured by running its plans, whose memory is not known
    before: beside linear's replay (3 GiB) its two captures may hold what that leaves of --memory. Under 22G that
    is 9.5 GiB each, less than the 10 GiB they take here, so they stop and run again once linear's replay is done
    (linear's schedule is read from its batches: no capture). Under 18G even the whole bound (9 GiB each) is too
    little: it is refused, not captured past the bound."""
    monkeypatch.setattr(world, "CHECK_SECONDS", 0.0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})  # two captures, each in a process of its own
    held = world.resident_bytes  # this process at the capture's start; the capture, as it runs, 10 GiB more
    monkeypatch.setattr(capture_module, "resident_bytes", held)
    monkeypatch.setattr(world, "resident_bytes", lambda: held() + (10 << 30))
    log: list[str] = []
    logged_replays(monkeypatch, LoggedReplay(log, memory=3 << 30))
    code, _, err = simulate(tmp_path, capsys, "--nprocs", "4", "--sizes", "8", "--algorithms",
                            "linear,linear_sync:window=2", "--jobs", "2", "--schedule-cache", "none",
                            *(["--memory", memory] if memory else []))
    assert code == 0, err
    windowed = "linear_sync"
    first = ["capture linear", "start linear", f"capture {windowed}"]
    after = [*first, "result linear", f"capture {windowed}"]
    assert log == {"beside": [*first, f"start {windowed}", "result linear", f"result {windowed}"],
                   "after": [*after, f"start {windowed}", f"result {windowed}"], "refused": after}[outcome]
    waited = json.loads((tmp_path / "sim" / "meta.json").read_text()).get("captures_waited_for_replays", 0)
    assert waited == (0 if outcome == "beside" else 1)
    record = rows(tmp_path / "sim")
    assert [r["valid"] for r in record] == ["true", "true" if outcome != "refused" else "false"]
    if outcome == "refused":
        assert record[1]["note"].startswith("refused:") and "above its limit of 9." in record[1]["note"]


@pytest.mark.simgrid
@pytest.mark.parametrize("memory", ["0", "4X"])
def test_a_bad_memory_is_refused_once_before_anything_runs(tmp_path, capsys, memory):
    code, _, err = simulate(tmp_path, capsys, "--nprocs", "4", "--sizes", "8", "--algorithms", "linear",
                            "--memory", memory)
    assert code == 2 and err.count("--memory") == 1 and "accepted" in err, err
    assert not (tmp_path / "sim" / "results.csv").exists()


def test_a_traces_memory_counts_the_requests_each_rank_has_in_flight(tmp_path):
    """linear posts its 7 receives and 7 sends at once on each of 8 ranks; pairwise one of each at a time; SMPI's
    own MPI_Alltoall (one trace line) is taken to post all 8 x 7 messages at once, each as a send and a receive."""
    written = {}
    for name, pending in (("linear", 8 * 14), ("pairwise", 8 * 2)):
        steps = stepped(name, {}, 8)
        assert steps is not None, name
        made = written[name] = traces.write_traces(steps, tmp_path / name, 1e10)
        assert made.pending == pending
        assert made.lines == sum(len(Path(f).read_text().splitlines()) for f in made.listing.read_text().split())
    assert written["linear"].memory() > written["pairwise"].memory()
    native = traces.write_traces(capture("native", {}, 8, 1), tmp_path / "native", 1e10)
    assert native.collective and native.pending == 0
    assert native.memory() - traces.REPLAY_LINE_BYTES * native.lines - traces.REPLAY_BASE_BYTES == \
        traces.REPLAY_REQUEST_BYTES * 8 * 14
    assert traces.most_pending("0 init\n0 isend 1 0 8\n0 wait 0 1 0\n0 irecv 1 0 8\n0 isend 1 1 8\n"
                                "0 wait 1 0 0\n0 wait 0 1 1\n0 finalize\n") == 2
