"""Where a run reports as it goes, for people and for collectors: the progress of long work and the log lines.

``progress`` is the stage-by-stage and object-by-object report (a no-op until
the command line turns it on), ``logs`` sets up log lines as text or JSON
(formatters in ``logformat``). The pipeline, the engine and the loop report
into them; the command line and the loop configure them. The face imports
nothing, so reporting costs no start-up.
"""
