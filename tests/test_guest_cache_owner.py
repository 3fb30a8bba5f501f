"""The guest cache under sudo: the invoking user's cache, and what root made there handed to that
user, so that a lab run with sudo and a later ``labkit guest shell`` without it share one
download. No guest boots."""

from __future__ import annotations

import os
import pwd

import pytest

from labkit import guest


@pytest.fixture
def a_user():
    """A user other than root that the system knows (nobody on Debian)."""
    for name in ("nobody", "daemon"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    pytest.skip("no unprivileged user in the password database")


def _env(monkeypatch, **kv):
    for k in ("PCB_GUEST_CACHE", "XDG_CACHE_HOME", "SUDO_USER"):
        monkeypatch.delenv(k, raising=False)
    for k, v in kv.items():
        monkeypatch.setenv(k, v)


def test_sudo_uses_the_invoking_users_cache(monkeypatch, a_user):
    _env(monkeypatch, SUDO_USER=a_user.pw_name, HOME="/root")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert str(guest.cache_dir()) == os.path.join(a_user.pw_dir, ".cache", "perf-casebook", "guest")


def test_without_sudo_or_as_root_itself_home_decides(monkeypatch, a_user, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    _env(monkeypatch, HOME=str(tmp_path))
    assert str(guest.cache_dir()) == str(tmp_path / ".cache" / "perf-casebook" / "guest")
    _env(monkeypatch, HOME=str(tmp_path), SUDO_USER="root")
    assert str(guest.cache_dir()) == str(tmp_path / ".cache" / "perf-casebook" / "guest")
    # Not root: SUDO_USER is left over from an outer shell, not ours to follow.
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    _env(monkeypatch, HOME=str(tmp_path), SUDO_USER=a_user.pw_name)
    assert str(guest.cache_dir()) == str(tmp_path / ".cache" / "perf-casebook" / "guest")


def test_explicit_cache_settings_win(monkeypatch, a_user, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    _env(monkeypatch, SUDO_USER=a_user.pw_name, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert str(guest.cache_dir()) == str(tmp_path / "xdg" / "perf-casebook" / "guest")
    _env(monkeypatch, SUDO_USER=a_user.pw_name, PCB_GUEST_CACHE=str(tmp_path / "c"))
    assert str(guest.cache_dir()) == str(tmp_path / "c")


@pytest.mark.skipif(os.geteuid() != 0, reason="handing files to another user needs root")
def test_what_root_made_goes_to_the_invoking_user(monkeypatch, tmp_path):
    home = tmp_path / "home"
    cache = home / ".cache" / "perf-casebook" / "guest"
    (cache / "kernels" / "arm64").mkdir(parents=True)
    (cache / "index.json").write_text("{}\n")
    (cache / "kernels" / "arm64" / "vmlinuz").write_text("x")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    owner = (str(home), 12345, 23456)
    monkeypatch.setattr(guest, "sudo_owner", lambda: owner)
    guest.give_back(cache)
    for p in (home / ".cache", cache, cache / "index.json", cache / "kernels" / "arm64" / "vmlinuz"):
        st = os.lstat(p)
        assert (st.st_uid, st.st_gid) == (12345, 23456), p
    assert os.lstat(home).st_uid == 0 and os.lstat(outside).st_uid == 0
    # A cache outside that user's home is left alone.
    other = tmp_path / "other-cache"
    other.mkdir()
    (other / "f").write_text("x")
    guest.give_back(other)
    assert os.lstat(other / "f").st_uid == 0
