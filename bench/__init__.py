"""`python -m bench`: the command line of the a2a testbed."""
