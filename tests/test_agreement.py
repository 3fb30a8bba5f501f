"""tests/agreement.py, the agreement of two runs of a lab (issue 39's measure): what counts as
decided, agreeing and flipping, a committed result against itself, and bad usage."""

from __future__ import annotations

from pathlib import Path

import pytest

import agreement
import refhost

ROOT = Path(__file__).resolve().parent.parent


def v(cid: str, verdict: str) -> dict:
    return {"id": cid, "verdict": verdict}


def test_decided_in_either_run_counts_and_a_flip_is_named():
    a = [v("same", "holds"), v("lost", "holds"), v("won", "inconclusive"), v("flip", "fails"),
         v("never", "inconclusive"), v("untested", "untested"), v("gone", "fails")]
    b = [v("same", "holds"), v("lost", "inconclusive"), v("won", "fails"), v("flip", "holds"),
         v("never", "not applicable"), v("untested", "untested"), v("new", "holds")]
    c = agreement.compare(a, b)
    assert c["decided"] == 6                  # same, lost, won, flip, gone, new
    assert c["agree"] == 1
    assert c["flips"] == ["flip"]
    assert c["disagree"] == [("flip", "fails", "holds"), ("gone", "fails", "absent"), ("lost", "holds", "inconclusive"),
                             ("new", "absent", "holds"), ("won", "inconclusive", "fails")]


def test_nothing_decided_is_nothing_to_agree_on():
    assert agreement.compare([v("x", "inconclusive")], [v("x", "untested")]) == \
        {"decided": 0, "agree": 0, "flips": [], "disagree": []}


def test_a_committed_result_agrees_with_itself(capsys):
    f = refhost.RESULTS / "lat_tcp.json"
    assert agreement.main([str(f), str(f)]) == 0
    out = capsys.readouterr().out
    decided = [x for x in agreement.verdicts(agreement.model.load(f)) if x["verdict"] in agreement.DECIDED]
    assert decided, "the reference decides some of lat_tcp's claims"
    assert f"| lat_tcp | {refhost.HOST}/lat_tcp.json / {refhost.HOST}/lat_tcp.json | {len(decided)} of {len(decided)} (100 %) | 0 | - |" in out


def test_a_flip_is_exit_status_1(monkeypatch, capsys):
    f = refhost.RESULTS / "lat_tcp.json"
    calls = iter([[v("c", "holds")], [v("c", "fails")]])
    monkeypatch.setattr(agreement, "verdicts", lambda r: next(calls))
    assert agreement.main([str(f), str(f)]) == 1
    assert "| 0 of 1 (0 %) | 1 | `c` holds / fails, needs ? |" in capsys.readouterr().out


@pytest.mark.parametrize("args,says", [
    ([f"results/{refhost.HOST}/lat_tcp.json"], "1 files: give them in pairs"),
    ([f"results/{refhost.HOST}/lat_tcp.json", str(refhost.result("fstime").relative_to(ROOT))], "a pair is two runs of one lab"),
    (["README.md", "README.md"], "README.md"),
])
def test_bad_usage_is_one_line_and_exit_2(args, says, capsys):
    with pytest.raises(SystemExit) as e:
        agreement.main([str(ROOT / a) for a in args])
    assert e.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("agreement.py: ") and says in err[0], err
