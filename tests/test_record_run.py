"""labkit.record.Run's case selection and sample accumulation, which the labs' collectors use
instead of accumulators of their own."""

from __future__ import annotations

from labkit import record


def _run(tmp_path, steps: list[dict]) -> record.Run:
    """A Run of an empty run directory (no lab.toml: no case keys) holding ``steps``."""
    (tmp_path / "host.json").write_text("{}")
    (tmp_path / "steps.tsv").write_text("")
    run = record.Run("x", tmp_path, quick=False, lab_dir=tmp_path)
    run.steps = steps
    return run


STEPS = [
    {"name": "b2", "status": "ok", "case": {"experiment": "x", "side": "b", "rep": 2}},
    {"name": "a1", "status": "ok", "case": {"experiment": "x", "side": "a", "rep": 1}},
    {"name": "b1", "status": "ok", "case": {"experiment": "x", "side": "b", "rep": 1}},
    {"name": "s", "status": "skipped", "case": {"experiment": "x", "side": "b", "rep": 3}},
    {"name": "y", "status": "ok", "case": {"experiment": "y"}},
    {"name": "none", "status": "ok"},
]


def test_steps_where_selects_by_case_and_status(tmp_path):
    run = _run(tmp_path, STEPS)
    assert [s["name"] for s in run.steps_where(experiment="x", side="b")] == ["b2", "b1"]
    assert [s["name"] for s in run.steps_where(experiment="x", side="b", by_rep=True)] == ["b1", "b2"]
    assert [s["name"] for s in run.steps_where(status=None, side="b", by_rep=True)] == ["b1", "b2", "s"]
    assert [s["name"] for s in run.steps_where(status="skipped")] == ["s"]
    assert [s["name"] for s in run.steps_where()] == ["b2", "a1", "b1", "y", "none"]
    assert run.steps_where(experiment="z") == []


def test_add_sample_gathers_one_measurement_per_case_in_first_seen_order(tmp_path):
    run = _run(tmp_path, STEPS)
    run.add_sample("iops", "IOPS", {"side": "b"}, 2.0, "b1")
    run.add_sample("iops", "IOPS", {"side": "a"}, 1.0, "a1")
    run.add_sample("iops", "IOPS", {"side": "b"}, 3.0, "b2")
    run.add_sample("clat", "us", {"side": "b"}, 5.0, "b1")
    assert run.measurements == []
    run.flush_samples()
    got = [(m["metric"], m["case"], m["samples"], m["step"]) for m in run.measurements]
    assert got == [("iops", {"side": "b"}, [2.0, 3.0], "b1"), ("iops", {"side": "a"}, [1.0], "a1"),
                   ("clat", {"side": "b"}, [5.0], "b1")]
    run.flush_samples()
    assert len(run.measurements) == 3


def test_read_steps_reads_every_column_and_the_raw_files(tmp_path):
    """steps.tsv rows → step records: a skipped step that never ran has 0 s and no exit code, no
    command and no stdout; a run step has its command, exit code, expectation and stdout size."""
    (tmp_path / "raw").mkdir()
    (tmp_path / "steps.tsv").write_text("probe\tsetup\tskipped\t\t\t\tno root\n"
                                        "dd.1\tcopy\tok\t0\t1.5\tfailure\t\n")
    (tmp_path / "raw" / "dd.1.cmd").write_text("dd if=/dev/zero of=x\n")
    (tmp_path / "raw" / "dd.1.out").write_text("12345")
    (tmp_path / "raw" / "dd.1.case").write_text("rep=1\n")
    skipped, ran = record.read_steps(tmp_path, {"rep": "int"})
    assert skipped == {"name": "probe", "group": "setup", "status": "skipped", "reason": "no root", "seconds": 0.0,
                       "command": None, "exit_code": None, "expect": "success", "stdout_bytes": None}
    assert ran == {"name": "dd.1", "group": "copy", "status": "ok", "reason": None, "seconds": 1.5,
                   "command": "dd if=/dev/zero of=x", "exit_code": 0, "expect": "failure", "stdout_bytes": 5,
                   "case": {"rep": 1}}


def test_a_lab_without_a_collector_is_named(tmp_path):
    import pytest
    with pytest.raises(FileNotFoundError, match="record.py"):
        record.load_lab_collector(tmp_path)


def test_left_out_groups_come_from_the_supervisors_file(tmp_path):
    import json
    import pytest
    assert record.left_out(tmp_path) == {}
    (tmp_path / "left_out.json").write_text(json.dumps({"guest": "six boots"}))
    assert record.left_out(tmp_path) == {"guest": "six boots"}
    (tmp_path / "left_out.json").write_text(json.dumps(["guest"]))
    with pytest.raises(ValueError, match="not a JSON object"):
        record.left_out(tmp_path)
