"""The typed decision document: what `bench decide` writes reads back field for field, a /1 document reads, and a
malformed one is refused in one line naming the field."""
import json
from dataclasses import replace

import pytest
from decide_fixtures import LIBRARY_TABLE, minimal_table, record

from a2a.analysis.decide import decide
from a2a.analysis.revert import revert_slower
from a2a.errors import BadInput
from a2a.record import decision
from a2a.record.verdict import Comparison


@pytest.fixture(scope="module")
def decided(tmp_path_factory) -> decision.Decision:
    return decide([record(tmp_path_factory.mktemp("decision") / "run", LIBRARY_TABLE, rounds=10)])


def test_a_decision_reads_back_equal_and_writes_the_same_bytes(decided, tmp_path):
    path = tmp_path / "decision.json"
    decision.write_decision(decided, path)
    again = decision.read_decision(path)
    assert again == decided and again.to_json() == path.read_text()
    assert json.loads(path.read_text()) == json.loads(again.to_json())


def test_every_field_of_a_cell_is_read_from_its_own_key(decided):
    cell = decided.tables[0].ranges[0].cells[0]
    raw = json.loads(decided.to_json())["tables"][0]["ranges"][0]["cells"][0]
    read = decision.from_json(json.loads(decided.to_json())).tables[0].ranges[0].cells[0]
    assert cell.judged and read.rounds == raw["rounds"] == 10 and read.launches == raw["launches"]
    assert (read.value_us, read.runner_up_us, read.margin) == (raw["value_us"], raw["runner_up_us"], raw["margin"])
    assert (read.speedup_vs_native, read.native_p, read.samples) == (raw["speedup_vs_native"], raw["native_p"],
                                                                     raw["samples"])
    assert read.tied_with == tuple(raw["tied_with"]) and read.tie is raw["tie"]
    for entry, said in zip(read.candidates, raw["candidates"]):
        assert (entry.algorithm, entry.options, entry.value_us) == (said["algorithm"], said["options"],
                                                                    said["value_us"])
        assert (entry.vs_native and entry.vs_native.as_dict()) == said["vs_native"]
        assert (entry.vs_best and entry.vs_best.as_dict()) == said["vs_best"]


def test_a_cell_given_back_keeps_what_it_had_chosen_through_the_file(decided, tmp_path):
    table = decided.tables[-1]
    cell = next(c for c in table.cells if c.algorithm != "native")
    row = {**table.columns, "bytes_per_peer": cell.bytes_per_peer, "ratio": 1.5, "verdict": "slower"}
    reverted, said = revert_slower(decided, [row], 0.05)
    back = decision.from_json(json.loads(reverted.to_json()))
    found = next(c for c in back.tables[-1].cells if c.bytes_per_peer == cell.bytes_per_peer)
    assert len(said) == 1 and (found.algorithm, found.library_ratio, found.vs_native) == ("native", 1.5, None)
    assert found.reverted_from == found.runner_up != "native" and found.rounds == cell.rounds


def test_a_version_1_document_reads_and_writes_back_without_verdicts():
    found = minimal_table(4, [(0, "native", ""), (100, "linear", "")])
    found["tables"][0]["ranges"][1]["cells"] = [{
        "bytes_per_peer": 128, "algorithm": "linear", "options": "", "value_us": 3.0, "samples": 20, "tie": False,
        "tied_with": [], "runner_up": "native", "runner_up_us": 6.0, "margin": 1.0, "speedup_vs_native": 2.0,
        "candidates": [{"algorithm": "linear", "options": "", "value_us": 3.0}]}]
    document = decision.from_json(found)
    assert document.schema == "a2a-decision/1" and document.margin is None and document.statistic is None
    cell = document.tables[0].ranges[1].cells[0]
    assert not cell.judged and cell.vs_native is None and cell.candidates[0].vs_native is None
    served = decision.lookup(document, 4, 1000)
    assert served and served[1].algorithm == "linear"
    written = json.loads(document.to_json())["tables"][0]["ranges"][1]["cells"][0]
    assert "vs_native" not in written and "rounds" not in written and "vs_native" not in written["candidates"][0]


@pytest.mark.parametrize(("spoil", "named"), [
    (lambda d: d["tables"][0].pop("nprocs"), "tables[0].nprocs is missing"),
    (lambda d: d["tables"][0]["ranges"][0].update(bytes_max="50"), "tables[0].ranges[0].bytes_max is \"50\""),
    (lambda d: d["tables"][0]["ranges"][0]["cells"][0].update(value_us="fast"),
     "tables[0].ranges[0].cells[0].value_us is \"fast\", not int or float"),
    (lambda d: d["tables"][0]["ranges"][0]["cells"][0]["candidates"][0]["vs_native"].update(verdict="better"),
     "tables[0].ranges[0].cells[0].candidates[0].vs_native.verdict is \"better\""),
    (lambda d: d["tables"][0]["ranges"][0]["cells"][0].update(tie=1), "tables[0].ranges[0].cells[0].tie is 1"),
    (lambda d: d.update(schema="a2a-decision/9"), "no \"schema\""),
])
def test_a_malformed_document_is_refused_in_one_line_naming_the_field(decided, tmp_path, spoil, named):
    found = json.loads(decided.to_json())
    spoil(found)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(found))
    with pytest.raises(BadInput) as refused:
        decision.read_decision(path)
    assert named in str(refused.value) and "\n" not in str(refused.value)


def test_a_fresh_decision_keeps_its_comparisons_as_the_file_does():
    said = Comparison(1 / 3, 0.30000001234, 0.36, 0.0123456789, "faster", 10, 1)
    kept = decision.comparison_kept(said)
    assert kept.ratio == 0.333333 and kept.p == 0.0123457 and replace(kept, p=said.p).rounds == 10
