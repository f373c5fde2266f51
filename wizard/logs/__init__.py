"""Logs: a training log read in bounded memory, and what it shows.

The reading loop (:mod:`~oom_wizard.logs.scan`: ``scan_log``, ``scan_text``, ``LiveScan``) and
its reading side (:mod:`~oom_wizard.logs.read`: a chunk's cheap test, progress, cancelling);
the words (:mod:`~oom_wizard.logs.signals`: phases and signals) and the marker table that maps
AI Toolkit's lines to them (:mod:`~oom_wizard.logs.markers`); one run's state while it is read
(:mod:`~oom_wizard.logs.run`); tqdm's bars (:mod:`~oom_wizard.logs.bars`), PyTorch's allocator
message (:mod:`~oom_wizard.logs.allocator`) and a segment as text
(:mod:`~oom_wizard.logs.lines`); and the answer, one immutable
:class:`~oom_wizard.logs.result.LogScan` (:mod:`~oom_wizard.logs.result`).

It imports the formats (a preset file's reader) and the shared values, never a rule.
"""
