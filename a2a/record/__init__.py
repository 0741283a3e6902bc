"""The record of a run: results (rows, samples, meta.json: docs/record.md), meta, stats, stalls (stalls in words),
report and mail_table (text tables), overlap (the published overlap figures), decision (the decision-table
document), verdict (the one statistics every "faster" rests on), and outputs (every output path checked before
anything is measured, refused in one line). Imports: the ground only.
"""
