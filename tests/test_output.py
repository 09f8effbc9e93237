"""jedictl/output.py: the one table mechanism -- columns chosen per width on a terminal, whole and plain
when piped, --columns / --wide, mappings as key: value, wide characters aligned."""

from __future__ import annotations

import io

import pytest
from rich.cells import cell_len

from jedictl.errors import BadInput
from jedictl.output import Choice, View, render

NAME = "mc23_13p6TeV.700000.Sh_2214_ttbar_pTbins.simul.HITS.e9000_s4162_demo_tid00001234"
ROWS = [{"task_id": n, "name": f"{NAME}.{n}", "user": "ann", "status": "running", "priority": 900 + n, "work_queue": "evgensimul",
         "gshare": "Production default", "modified_at": "2026-11-25T02:32:17Z"} for n in range(1, 4)]
VIEW = View(("task_id", "name", "user", "status", "priority", "work_queue", "gshare", "modified_at"), keep=4)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def table(data, *, terminal: bool, width: int = 80, choice: Choice | None = None, view: View = VIEW, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    stream = Tty() if terminal else io.StringIO()
    render(data, "table", view=view, choice=choice, stream=stream)
    return stream.getvalue()


def test_at_80_columns_each_row_is_one_line_and_columns_are_dropped_from_the_end(monkeypatch):
    text = table(ROWS, terminal=True, monkeypatch=monkeypatch)
    lines = text.splitlines()
    assert len(lines) == 2 + len(ROWS)  # header, rule, one line per task: names are never broken over lines
    assert all(cell_len(line) <= 80 for line in lines)
    header = lines[0].split()
    assert header[:4] == ["task_id", "name", "user", "status"] and "modified_at" not in header
    # A name too long for its column loses its middle: both the scope and the distinguishing end stay.
    assert all("…" in line and line.split()[1].startswith("mc23_") and line.split()[1].endswith(f".{n}")
               for n, line in enumerate(lines[2:], 1))


def test_a_wide_terminal_shows_more_columns(monkeypatch):
    header = table(ROWS, terminal=True, width=200, monkeypatch=monkeypatch).splitlines()[0].split()
    assert header == list(VIEW.columns)


def test_piped_tables_are_whole_plain_and_unwrapped(monkeypatch):
    text = table(ROWS, terminal=False, width=40, monkeypatch=monkeypatch)
    lines = text.splitlines()
    assert lines[0].split() == list(VIEW.columns) and len(lines) == 2 + len(ROWS)
    assert all(f"{NAME}.{n}" in line for n, line in enumerate(lines[2:], 1))
    assert "\x1b" not in text and "…" not in text


def test_wide_shows_every_column_folded_and_columns_picks_them(monkeypatch):
    rows = [{**row, "secret_extra": "x"} for row in ROWS]
    wide = table(rows, terminal=True, choice=Choice(wide=True), width=300, monkeypatch=monkeypatch)
    assert wide.splitlines()[0].split() == [*VIEW.columns, "secret_extra"]
    folded = table(rows, terminal=True, choice=Choice(wide=True), monkeypatch=monkeypatch)
    assert "…" not in folded and all(cell_len(line) <= 80 for line in folded.splitlines())
    picked = table(rows, terminal=True, choice=Choice(columns=("status", "task_id")), monkeypatch=monkeypatch)
    assert picked.splitlines()[0].split() == ["status", "task_id"]
    piped = io.StringIO()
    render(rows, "tsv", view=VIEW, choice=Choice(columns=("task_id", "secret_extra")), stream=piped)
    assert piped.getvalue().splitlines()[:2] == ["task_id\tsecret_extra", "1\tx"]
    with pytest.raises(BadInput, match="--columns: no column nope; choose from task_id, name"):
        table(rows, terminal=False, choice=Choice(columns=("nope",)), monkeypatch=monkeypatch)


@pytest.mark.parametrize("terminal", [True, False])
def test_wide_characters_are_aligned(monkeypatch, terminal):
    rows = [{"id": 1, "user": "渡辺", "comment": "東京 site 🚀", "state": "ok"},
            {"id": 2, "user": "ann", "comment": "plain", "state": "ok"},
            {"id": 3, "user": "José", "comment": "😀😀", "state": "ok"}]
    monkeypatch.setenv("NO_COLOR", "1")
    lines = table(rows, terminal=terminal, view=View(), monkeypatch=monkeypatch).splitlines()
    data = [line for line in lines if line.split()[0].isdigit()]
    # "ok" starts at the same display column in every row, whatever the widths of the characters before it.
    starts = {cell_len(line[:line.rindex("ok")]) for line in data}
    assert len(data) == 3 and len(starts) == 1


def test_a_show_renders_mappings_as_key_value_lines_and_its_tables_with_their_views(monkeypatch):
    task = {"task_id": 7, "options": {"n_files_per_job": 2, "merge": {"size": 5}}, "tags": ["a", "b"],
            "datasets": [{"dataset_id": n, "name": f"{NAME}.{n}", "type": "input", "status": "ready", **{f"n_{k}": n for k in range(20)}}
                         for n in range(2)]}
    view = View(tables={"datasets": View(("dataset_id", "name", "type", "status", "n_1"), keep=2)})
    text = table(task, terminal=True, view=view, monkeypatch=monkeypatch)
    assert "options  n_files_per_job: 2\n" in text and "         merge:\n           size: 5\n" in text and "tags     a, b\n" in text
    datasets = text[text.index("datasets"):].splitlines()
    assert datasets[1].split() == ["dataset_id", "name", "type", "status", "n_1"]  # not 23 columns of two characters
    assert all(cell_len(line) <= 80 for line in text.splitlines())
    wide = table(task, terminal=False, view=view, choice=Choice(wide=True), monkeypatch=monkeypatch)
    assert "n_19" in wide and "n_19" not in table(task, terminal=False, view=view, monkeypatch=monkeypatch)
    listed = table([{"id": 1, "parameters": {"maxAttempt": 2, "steps": [2, 4]}}], terminal=False, view=View(), monkeypatch=monkeypatch)
    assert "maxAttempt: 2, steps: [2, 4]" in listed


def test_no_color_means_no_escape_at_all_on_a_terminal(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b" not in table(ROWS, terminal=True, monkeypatch=monkeypatch)
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "xterm-256color")
    assert "\x1b[1m" in table(ROWS, terminal=True, monkeypatch=monkeypatch)  # bold headers otherwise


def test_tty_compatible_decides_like_a_tty(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    for forced, terminal in (("1", True), ("0", False)):
        monkeypatch.setenv("TTY_COMPATIBLE", forced)
        stream = Tty() if not terminal else io.StringIO()
        render(ROWS, "table", view=VIEW, stream=stream)
        assert ("…" in stream.getvalue()) is terminal


@pytest.mark.parametrize("data", [
    {"pass": "report", "counts": {"applied": 2, "refused": 0}, "errors": 0, "duration_s": 0.5,
     "items": [{"line": 1, "job_id": 7, "outcome": "applied", "status": "finished", "reason": None, "retry": None},
               {"line": 2, "job_id": 8, "outcome": "refused", "status": None, "reason": 'a "quote", },\n        { and é\u2028',
                "retry": None}]},
    {"items": [], "nested": {"a": [1, {"b": None}], "c": {}}, "rows": [{"x": float("nan"), "y": True}, {}]},
    [{"a": 1.5, "b": 10**30}, {"a": -0.0, "b": False}],
    {"rows": [{"list": [1, 2]}, {"map": {"k": "v"}}]},
    [],
    "text",
])
def test_json_is_the_indented_encoding_in_large_pieces(data, monkeypatch) -> None:
    """-o json writes exactly what json.dumps(indent=2) would, whatever path the rows take."""
    import json

    import jedictl.output as output

    monkeypatch.setattr(output, "_ROWS_PER_CHUNK", 1)  # every slice boundary is exercised
    stream = io.StringIO()
    render(data, "json", stream=stream)
    assert stream.getvalue() == json.dumps(data, indent=2, ensure_ascii=False) + "\n"
