"""Logs: a training log read in bounded memory, and what it shows.

:mod:`~oom_wizard.logs.scan` turns a log (any trainer's, tqdm redraws and all) into one
immutable ``LogScan``; :mod:`~oom_wizard.logs.read` is its reading side (a chunk's cheap test,
progress, cancelling). It imports the formats and the shared values, never a rule.
"""
