"""The run side: the process that runs a lab and what it reads and writes about the host.

``supervisor`` (``python -m labkit.run.supervisor``, exec'd by labs/lib/lab.sh's ``lab_main``):
options, lock, journal, signals, the undo, ``--recover`` and ``--guest``. ``journal`` reads what
a run changed and has not undone; ``auditctx`` keeps a run's processes off the audit path;
``probe`` reads the host (a result's ``host``); ``tools`` the versions of the tools a run used;
``events`` the kinds of its progress lines; ``progress`` (``python -m labkit.run.progress``,
called by lab.sh) the time left and the figures between groups; ``verdict_text`` the verdict
lines ``labkit record`` prints at the end of a run (and ``labkit show``). A lab's own code calls
none of them by name: lab.sh does.
"""
