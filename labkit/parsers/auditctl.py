"""``auditctl -s`` (kernel audit status) and ``auditctl -l`` (rule list), auditctl(8).

``auditctl -s`` prints one ``key value`` pair per line::

    enabled 0
    failure 1
    pid 0
    rate_limit 0
    backlog_limit 64
    lost 0
    backlog 0
    backlog_wait_time 15000
    backlog_wait_time_actual 0
    loginuid_immutable 0 unlocked

``enabled`` is 0 (off), 1 (on) or 2 (on and locked until reboot); ``pid`` is the PID of
the audit daemon the kernel sends records to (0: none). ``auditctl -l`` prints one rule
per line in the form ``auditctl -a`` takes, or ``No rules``.
"""

from __future__ import annotations

from .jsonline import ParseError

# Counters that change while the system runs: not part of the configuration.
COUNTERS = ("lost", "backlog", "backlog_wait_time_actual")


def audit_status(text: str) -> dict[str, int | str]:
    """Parse ``auditctl -s``: key → int where the value is a number, else the text
    (``loginuid_immutable`` → ``"0 unlocked"``).

    Raises:
        ParseError: no ``enabled`` line (auditctl failed, or the kernel has no audit).
    """
    status: dict[str, int | str] = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) != 2:
            continue
        key, value = parts[0], parts[1].strip()
        status[key] = int(value) if value.lstrip("-").isdigit() else value
    if "enabled" not in status:
        raise ParseError("no 'enabled' line in auditctl -s output")
    return status


def audit_config(status: dict) -> dict:
    """The configuration part of an ``audit_status`` dict: every key except the counters
    that change on their own (``lost``, ``backlog``, ``backlog_wait_time_actual``)."""
    return {k: v for k, v in status.items() if k not in COUNTERS}


def audit_rules(text: str) -> list[str]:
    """Parse ``auditctl -l``: the rules, one string each, in kernel order; ``[]`` for
    ``No rules``."""
    rules = [line.strip() for line in text.splitlines() if line.strip()]
    return [] if rules == ["No rules"] else rules
