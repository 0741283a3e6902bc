"""The record of a run: rows, samples and meta.json (docs/record.md), their statistics and text tables,
and the decision-table document. Imports: the ground only.
"""
