"""labkit/run/journal.py, the one reader of lab journals, on journal files laid out in tmp_path in
the format its docstring gives (the format labkit.run.supervisor writes; tests/test_lab_contract.py
reads real ones, written by the fake lab). File layouts and process ids, no measurements."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labkit.run import journal


def run_line(out: Path, scratch_parent: Path | None = None, lab: str = "demo", pid: int = 4321, start: str = "777",
             script: str | None = "/labs/demo/run.sh") -> str:
    fields = ["run", lab, str(pid), start, f"{lab}.{pid}.{start}", str(out)]
    if scratch_parent is not None or script is not None:
        fields.append(str(scratch_parent) if scratch_parent is not None else "")
    if script is not None:
        fields.append(script)
    return "\t".join(fields)


def write(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_read_keeps_the_run_and_the_pending_actions_in_order(tmp_path):
    out, sp = tmp_path / "out", tmp_path / "scr"
    j = journal.read(write(out / ".demo.journal", run_line(out, sp),
                           "do\t3\tput back knob\tlab_restore_knob a b", "do\t1\tunmount\tlab_umount /m",
                           "do\t2\tdetach loop\tlab_loop_detach /dev/loop0", "done\t2", "fail\t3\tEBUSY", ""))
    assert (j.lab, j.pid, j.start, j.tag, j.out) == ("demo", 4321, "777", "demo.4321.777", out)
    assert (j.scratch_parent, j.script) == (sp, Path("/labs/demo/run.sh"))
    assert j.pending == [(1, "unmount"), (3, "put back knob")]      # by id; a failed action stays pending
    assert j.failed == {3: "EBUSY"}
    assert j.path == out / ".demo.journal"


def test_read_without_the_optional_fields(tmp_path):
    out = tmp_path / "out"
    j = journal.read(write(tmp_path / "j", run_line(out, None, script=None)))
    assert j.scratch_parent is None and j.script is None and j.pending == [] and j.failed == {}
    j = journal.read(write(tmp_path / "k", run_line(out, None, script="/s/run.sh")))
    assert j.scratch_parent is None and j.script == Path("/s/run.sh")
    j = journal.read(write(tmp_path / "l", run_line(out, tmp_path / "scr", script=None)))    # seven fields
    assert j.scratch_parent == tmp_path / "scr" and j.script is None
    bare = journal.Journal(tmp_path / "x", "demo", 1, "2", "demo.1.2", out)
    assert (bare.scratch_parent, bare.script, bare.pending, bare.failed) == (None, None, [], {})


@pytest.mark.parametrize("lines,message", [
    ([], "not a lab journal (no run line first)"),
    (["do\t1\tx\ty"], "not a lab journal (no run line first)"),
    (["run\tdemo\t12\t7\ttag"], "malformed run line"),
    (["run\tdemo\tpid\t7\ttag\t/out"], "malformed run line"),
    (["RUN_LINE", "undo\t1"], ":2: unknown line 'undo\\t1'"),
    (["RUN_LINE", "do\tone\tx\ty"], ":2: bad action id in 'do\\tone\\tx\\ty'"),
    (["RUN_LINE", "done\tx"], ":2: bad action id"),
    (["RUN_LINE", "", "fail\tx\tmsg"], ":3: bad action id"),
])
def test_a_file_that_is_not_a_journal_is_refused_with_its_line(tmp_path, lines, message):
    path = write(tmp_path / "j", *[run_line(tmp_path) if l == "RUN_LINE" else l for l in lines])
    with pytest.raises(journal.JournalError) as exc:
        journal.read(path)
    assert str(exc.value).startswith(str(path)) and message in str(exc.value)


def test_short_action_lines_are_unknown_lines(tmp_path):
    for line in ("do\t1\tonly description", "done", "fail\t1"):
        with pytest.raises(journal.JournalError, match="unknown line"):
            journal.read(write(tmp_path / "j", run_line(tmp_path), line))


def test_commands_are_the_do_lines_shell_words(tmp_path):
    path = write(tmp_path / "j", run_line(tmp_path), "do\t1\tknob\tlab_restore_knob\t/sys/x\t7", "do\tx\tbad\tcmd",
                 "do\t2\tshort", "done\t1", "do\t3\tumount\tlab_umount /m")
    assert journal.commands(path) == {1: "lab_restore_knob\t/sys/x\t7", 3: "lab_umount /m"}


def test_primary_of_a_copy_is_the_out_journal_while_it_is_the_same_run(tmp_path):
    out, sp = tmp_path / "out", tmp_path / "scr"
    head = run_line(out, sp)
    main = write(out / ".demo.journal", head, "do\t1\tx\ty")
    copy = write(sp / "pcb-demo.abc" / ".pcb-journal", head, "do\t1\tx\ty")
    assert journal.primary(copy) == main.resolve()
    main.write_text(run_line(out, sp, pid=999) + "\n")               # another run's journal there now
    assert journal.primary(copy) == copy.resolve()
    main.unlink()                                                     # the out directory's is gone
    assert journal.primary(copy) == copy.resolve()
    short = write(sp / "pcb-demo.s" / ".pcb-journal", "run\tdemo\t1\t2\ttag")   # no out field: the copy
    assert journal.primary(short) == short.resolve()


def test_primary_is_none_for_what_is_not_a_journal_copy(tmp_path):
    """A scratch file that does not start with a run line (a path, an empty file) names no journal."""
    target = write(tmp_path / "out" / ".demo.journal", run_line(tmp_path / "out"))
    other = tmp_path / "scr" / "pcb-demo.x" / ".pcb-journal"
    other.parent.mkdir(parents=True)
    other.write_text(f"{target}\n")
    assert journal.primary(other) is None
    other.write_text("\n")
    assert journal.primary(other) is None
    assert journal.primary(tmp_path / "missing") is None


def test_copies_are_the_same_runs_other_files(tmp_path):
    out, sp = tmp_path / "out", tmp_path / "scr"
    head = run_line(out, sp)
    main = write(out / ".demo.journal", head)
    copy = write(sp / "pcb-demo.abc" / ".pcb-journal", head, "do\t1\tx\ty")
    write(sp / "pcb-demo.old" / ".pcb-journal", run_line(out, sp, pid=5))    # another run
    write(sp / "pcb-other.abc" / ".pcb-journal", head)                       # another lab's folder
    assert journal.copies(main) == [copy]
    assert journal.copies(copy) == [out / ".demo.journal"]
    no_scratch = write(tmp_path / "o2" / ".demo.journal", run_line(tmp_path / "o2", None))
    assert journal.copies(no_scratch) == []
    assert journal.copies(write(tmp_path / "bad", "not a journal")) == []
    assert journal.copies(tmp_path / "missing") == []


def test_proc_stat_and_running_read_this_process(tmp_path):
    fields = journal.proc_stat(os.getpid())
    raw = Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(") ", 1)[1].split()
    stable = (0, 1, 2, 3, 19)   # state, ppid, pgrp, session, starttime: fault counts and times move between reads
    assert len(fields) == len(raw) and [fields[i] for i in stable] == [raw[i] for i in stable]
    assert fields[1] == str(os.getppid())
    again = journal.proc_stat(str(os.getpid()))   # a pid given as text
    assert [again[i] for i in stable] == [fields[i] for i in stable]
    assert journal.proc_stat(2 ** 22 + 1) is None                    # above pid_max: no such process
    me = journal.Journal(tmp_path, "demo", os.getpid(), fields[19], "t", tmp_path)
    assert journal.running(me)
    assert not journal.running(journal.Journal(tmp_path, "demo", os.getpid(), str(int(fields[19]) + 1), "t", tmp_path))
    assert not journal.running(journal.Journal(tmp_path, "demo", 2 ** 22 + 1, fields[19], "t", tmp_path))


def test_find_journals_in_out_dirs_host_folders_and_scratch(tmp_path):
    out, hosts, sp = tmp_path / "out", tmp_path / "results", tmp_path / "scr"
    a = write(out / ".demo.journal", run_line(out, sp))
    b = write(hosts / "h1" / ".other.journal", run_line(hosts / "h1", sp, lab="other"))
    gone_out = tmp_path / "gone"
    c = write(sp / "pcb-demo.k1" / ".pcb-journal", run_line(gone_out, sp))           # out directory removed
    d = write(sp / "pcb-demo-guest.k2" / ".pcb-journal", run_line(gone_out, sp, pid=8))
    write(sp / "pcb-demo.k3" / ".pcb-journal", "\n")                                  # not a journal: skipped
    copy_of_a = write(sp / "pcb-demo.k4" / ".pcb-journal", run_line(out, sp))          # found as a itself
    write(out / "not-a-journal.txt", "x")
    everything = journal.find([out, hosts], [sp])
    assert everything == sorted({a.resolve(), b.resolve(), c.resolve(), d.resolve()})
    assert copy_of_a.resolve() not in everything
    assert journal.find([out, hosts], [sp], lab="demo") == sorted({a.resolve(), c.resolve(), d.resolve()})
    assert journal.find([out, hosts], [], lab="other") == [b.resolve()]
    assert journal.find([], [sp], lab="other") == []


def test_primary_reads_a_copy_with_undecodable_bytes_and_a_six_field_run_line(tmp_path):
    """A description in another encoding does not stop the reader (errors="replace"); with no
    scratch or script field the run line still ends at its newline."""
    out = tmp_path / "out"
    head = run_line(out, None, script=None)                            # six fields
    body = (head + "\ndo\t1\tput back caf\xe9\tlab_restore x\n").encode("latin-1")
    main = out / ".demo.journal"
    main.parent.mkdir(parents=True)
    main.write_bytes(body)
    copy = tmp_path / "scr" / "pcb-demo.q" / ".pcb-journal"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(body)
    assert journal.primary(copy) == main.resolve()
    assert journal.read(copy).pending == [(1, "put back caf\ufffd")]
    assert journal.commands(copy) == {1: "lab_restore x"}
    sp, out2 = tmp_path / "scr2", tmp_path / "out2"
    body2 = (run_line(out2, sp) + "\ndo\t1\tput back caf\xe9\tlab_restore x\n").encode("latin-1")
    main2, copy2 = out2 / ".demo.journal", sp / "pcb-demo.r" / ".pcb-journal"
    for f in (main2, copy2):
        f.parent.mkdir(parents=True)
        f.write_bytes(body2)
    assert journal.copies(main2) == [copy2] and journal.copies(copy2) == [main2]
