"""The record of a run: results (rows, samples, meta.json: docs/record.md), meta, stats, stalls (stalls in words),
report and mail_table (text tables), overlap (the published overlap figures), and decision (the decision-table
document). Imports: the ground only.
"""
