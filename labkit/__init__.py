"""labkit: the Perf Casebook's result model, host probe, tool-output parsers, claims,
page macros and command line (DESIGN.md)."""

__version__ = "0.1.0"
