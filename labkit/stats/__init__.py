"""Statistics: how a claim is decided on a result, and how often that decision is wrong.

``claims`` loads a chapter's ``claims.toml`` and ``exercises.toml`` (their formats are the JSON
Schemas beside the top-level modules, ``labkit/claims.schema.json`` and
``labkit/exercises.schema.json``) and evaluates each claim on a result: the sides, the effect
and its 95 % interval, the verdict. ``calibration`` simulates that interval
(``labkit calibrate``) and counts its false decisions. Read by ``labkit record`` (the verdicts
a result stores), the command line and the pages.
"""
