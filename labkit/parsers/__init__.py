"""Parsers of tool outputs: each takes the text a tool printed and returns plain data.

Every parser is tested on real captured output in ``tests/fixtures/`` (with the
command that made it). Flame graphs are made by inferno, never by our own code.
"""
