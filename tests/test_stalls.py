"""Stalls explained in words under the tables: the points, the TCP counters, the 200 ms minimum RTO, the remedy."""
from __future__ import annotations

import pytest
from support import python

from a2a.netstat import stall_counters, tcp_ext
from a2a.record.report import explained_table
from a2a.record.results import Recorder, Row, read_rows
from a2a.record.stalls import explain


def row(algorithm, size, stalls, timeouts, probes, options=""):
    return Row(8, 4, 2, algorithm, options, "float32", size // 4, size, iterations=24, stalls=stalls,
               tcp_timeouts=timeouts, tcp_loss_probes=probes, valid=True)


def test_tcp_ext_reads_the_counters_of_a_netstat_text(tmp_path):
    text = ("TcpExt: SyncookiesSent TCPTimeouts TCPLossProbes\nTcpExt: 0 7 3\n"
            "IpExt: InNoRoutes\nIpExt: 0\n")
    assert tcp_ext(text) == {"SyncookiesSent": 0, "TCPTimeouts": 7, "TCPLossProbes": 3}
    (tmp_path / "netstat").write_text(text)
    assert stall_counters(tmp_path / "netstat") == [7, 3]
    (tmp_path / "old").write_text("TcpExt: TCPTimeouts\nTcpExt: 7\n")
    assert stall_counters(tmp_path / "old") is None and stall_counters(tmp_path / "missing") is None


def test_nothing_to_say_without_stalls():
    assert explain([row("native", 8, 0, 3, 1), row("native", 64, 0, None, None)]) == []


def test_stalled_points_with_tcp_counts_are_named_with_cause_and_remedy():
    lines = explain([row("native", 16384, 2, 3, 1), row("bruck", 65536, 1, 0, 2, "radix=2"),
                     row("pairwise", 16384, 0, 5, 0), row("linear", 8, 1, 0, 0)])
    text = " ".join(lines)
    assert lines[0] == ("Stalls with TCP losses behind them: 2 points, 3 retransmission timeouts and 3 tail "
                        "loss probes counted while they ran:")
    assert lines[1] == "  native at 16K per peer on 8 ranks: 2 of 24 iterations stalled; 3 timeouts, 1 loss probes"
    assert lines[2] == ("  bruck:radix=2 at 64K per peer on 8 ranks: 1 of 24 iterations stalled; 0 timeouts, "
                        "2 loss probes")
    assert "pairwise" not in text  # TCP trouble without a stall is not a stall
    assert "minimum RTO, 200 ms" in text and "rto_min" in text and "1 of 18 sizes instead of 4-6 of 18" in text
    assert "did not remove them" in text
    assert text.endswith("TCP cannot be ruled out.") and "counted: linear at 8 per peer on 8 ranks." in text


def test_points_are_named_as_the_table_names_them():
    stalled = [row("pairwise", 16384, 1, 2, 0, "schedule=shift"), row("bruck", 8, 1, None, None, "radix=4")]
    text = explained_table(stalled, {"pairwise": {"schedule": "shift"}, "bruck": {"radix": "2"}})
    table, _, words = text.partition("Stalls with TCP losses")
    assert " pairwise  " in table and " bruck:radix=4  " in table and "schedule=" not in text
    assert "  pairwise at 16K per peer on 8 ranks: 1 of 24" in words and "counted: bruck:radix=4 at 8 per" in words


def test_invalid_points_say_why_under_the_table():
    few = "0 of 20 iterations valid within the time budget: too few to summarise (fewer than 5)"
    rows = [row("native", 8, 0, None, None), row("linear", 8, 0, None, None), row("bruck", 8, 0, None, None)]
    for r in rows[:2]:
        r.valid, r.note = False, few
    rows[2].note = "2 iterations excluded"  # a valid point's note is not a reason
    lines = explained_table(rows).splitlines()
    assert lines[-1] == f"INVALID (2 points): {few}" and sum("INVALID" in line for line in lines) == 3


def test_stalls_without_counters_point_elsewhere():
    lines = explain([row("native", 8, 1, None, None)])
    assert lines[0].startswith("Stalled with no TCP timeout or loss probe counted: native at 8 per peer on 8 ranks.")
    assert not any("rto_min" in line for line in lines)


@pytest.mark.launches
def test_bench_show_explains_a_recorded_stall(tmp_path):
    out = tmp_path / "run"
    recorder = Recorder(out)
    recorder.add(row("native", 16384, 2, 3, 1), [0.001] * 22 + [0.21, 0.22])
    recorder.add(row("native", 8, 0, 0, 0), [0.0001] * 24)
    recorder.close()
    shown = python("-m", "bench", "show", str(out))
    assert shown.returncode == 0, shown.stderr
    table, _, words = shown.stdout.partition("Stalls with TCP losses behind them: 1 point, 3 retransmission")
    assert "tcp timeouts    loss probes" in table and "native at 16K per peer on 8 ranks: 2 of 24" in words


@pytest.mark.launches
def test_a_sweep_counts_loss_probes_beside_timeouts(small_sweep):
    header = (small_sweep / "results.csv").read_text().splitlines()[0].split(",")
    assert "tcp_loss_probes" in header
    found = read_rows(small_sweep)[0]
    readable = stall_counters() is not None
    assert (found.tcp_loss_probes is not None) == readable and (found.tcp_timeouts is not None) == readable
