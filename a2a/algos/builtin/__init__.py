"""The built-in algorithms: one module per registered name, named as it is selected.

The registry loads every module of this folder the way it loads a plug-in, so adding an
algorithm is adding its file (docs/adding-an-algorithm.md); nothing here imports them.
"""
