"""The one place that renders what commands print: table | json | yaml | tsv.

A command hands over plain data -- a list of row mappings, or one mapping for a single object -- and
never formats by itself. JSON and YAML keys are the data's snake_case keys; times are ISO-8601 UTC;
the shapes are docs/json-output.md.

Tables are for people, and one mechanism draws every one of them:
- A `View` names a kind of row's columns, the most telling first: a list's default columns, and for
  one object (a `show`) the views of the lists of rows it holds (a task's datasets, a job's files).
  `--columns a,b,c` picks columns by name, `--wide` shows every column the rows have.
- On a terminal (stdout a tty, or `TTY_COMPATIBLE=1`) the table is drawn with rich at the terminal's
  width (`COLUMNS`): columns are dropped from the end of the default set until the rest fits, long
  cells are cut with "…" rather than broken over lines (with `--wide`, folded instead); cell widths
  count wide characters (East Asian, emoji) as two.
- Piped, the table is plain text (or with `TTY_COMPATIBLE=0`): every default column, nothing cut or
  wrapped, no escape sequences; columns still aligned by display width.
- Mappings (options, resources, attributes) are `key: value` lines in a show and `key: value, ...`
  in a list's cell; lists of scalars are comma-separated.
"""

from __future__ import annotations

import io
import json
import os
import sys
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any, Iterable, Mapping, Sequence, TextIO

Row = Mapping[str, Any]

#: On a terminal, a column wider than this may be cut to it ("…") before other columns are dropped.
SQUEEZED_WIDTH = 30
#: Characters between two columns on a terminal (as in the plain tables).
GAP = 2
#: Columns at most this wide (ids, statuses, numbers, ISO times) are never cut or wrapped on a terminal.
RIGID_WIDTH = 20


@dataclass(frozen=True)
class View:
    """How one kind of row is shown in a table.

    `columns`: the default columns, the most telling first; on a narrow terminal the last ones are
    dropped until the table fits, but never the first `keep`. Empty: every key of the rows.
    `tables`: for one object, the views of its lists of rows, by key (`task show`'s datasets)."""

    columns: tuple[str, ...] = ()
    keep: int = 1
    tables: Mapping[str, "View"] = field(default_factory=dict)


@dataclass(frozen=True)
class Choice:
    """What the user asked for: `--columns` (names, in order) and `--wide` (every column)."""

    columns: tuple[str, ...] | None = None
    wide: bool = False


def parse_columns(text: str | None) -> tuple[str, ...] | None:
    """`--columns a,b,c` as names (None when not given)."""
    if text is None:
        return None
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        from jedictl.errors import BadInput

        raise BadInput("name at least one column (a,b,c)", "--columns")
    return names


_PLAIN = (str, int, float, bool, type(None))


def to_jsonable(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:  # the common case first: a report of 100,000 items is mostly these
        return value
    if kind is dict:
        for k, v in value.items():
            if type(k) is not str or type(v) not in _PLAIN:
                return {str(k): to_jsonable(v) for k, v in value.items()}
        return value  # already plain: not copied (a report's items would be held twice)
    if kind is list:
        return [to_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds") + ("Z" if value.tzinfo is None else "")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Decimal):  # PostgreSQL's SUM and AVG
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    return value


def render(
    data: Row | Sequence[Row],
    fmt: str,
    *,
    view: View | Sequence[str] | None = None,
    choice: Choice | None = None,
    stream: TextIO | None = None,
    title: str | None = None,
    columns: Sequence[str] | None = None,
) -> None:
    """Write `data` to `stream` (stdout) in `fmt`. `view` (or a plain list of `columns`) picks and
    orders table/tsv columns; `choice` is the user's `--columns` / `--wide`."""
    stream = stream or sys.stdout
    if not isinstance(view, View):
        view = View(tuple(view or columns or ()))
    choice = choice or Choice()
    plain = to_jsonable(data)
    if fmt == "json":
        for chunk in _json_chunks(plain, 0):
            stream.write(chunk)
        stream.write("\n")
    elif fmt == "yaml":
        import yaml

        stream.write(yaml.safe_dump(plain, sort_keys=False, allow_unicode=True, default_flow_style=False))
    elif fmt == "tsv":
        _write_tsv(plain, view, choice, stream)
    else:
        _Tables(stream, choice).write(plain, view, title)


#: Rows of a long list of objects encoded per piece of JSON output.
_ROWS_PER_CHUNK = 2000


def _json_chunks(value: Any, depth: int) -> Iterable[str]:
    """The text of `json.dumps(value, indent=2, ensure_ascii=False)` in large pieces -- never the whole
    text at once (a report of 100,000 items), and not the half-million small writes `json.dump` makes.

    A list of flat objects (every value a string, number, boolean or null: a report's items) goes
    through the C encoder a slice at a time, its separators set to the indented layout's; an encoded
    string never holds a raw newline, so the "},\n" between objects is structure, never content."""
    pad = "  " * depth
    kind = type(value)
    if kind is list and value and all(type(row) is dict and row and _flat(row) for row in value):
        inner, field_pad = pad + "  ", pad + "    "
        encoder = json.JSONEncoder(ensure_ascii=False, separators=(",\n" + field_pad, ": "))
        between = "},\n" + field_pad + "{"
        joined = "\n" + inner + "},\n" + inner + "{\n" + field_pad
        yield "[\n"
        for start in range(0, len(value), _ROWS_PER_CHUNK):
            text = encoder.encode(value[start:start + _ROWS_PER_CHUNK])  # [{"a": 1,\n<field_pad>"b": 2},\n<field_pad>{...}]
            yield ("" if start == 0 else ",\n") + inner + "{\n" + field_pad + text[2:-2].replace(between, joined) + "\n" + inner + "}"
        yield "\n" + pad + "]"
    elif kind is dict and value and all(type(key) is str for key in value) and any(type(v) is list for v in value.values()):
        first = True
        for key, item in value.items():
            yield ("{\n" if first else ",\n") + pad + "  " + json.dumps(key, ensure_ascii=False) + ": "
            yield from _json_chunks(item, depth + 1)
            first = False
        yield "\n" + pad + "}"
    else:
        text = json.dumps(value, indent=2, ensure_ascii=False)
        yield text.replace("\n", "\n" + pad) if depth else text


def _flat(row: dict) -> bool:
    for key, item in row.items():
        if type(key) is not str or type(item) not in _PLAIN:
            return False
    return True


def is_terminal(stream: TextIO) -> bool:
    """Tables are drawn for a terminal: stdout is a tty, or TTY_COMPATIBLE=1 says so (0 says not)."""
    forced = os.environ.get("TTY_COMPATIBLE", "")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        return stream.isatty()
    except ValueError:  # closed
        return False


def terminal_width(stream: TextIO) -> int:
    """The width tables fit: COLUMNS when set (also on a dumb terminal), else the terminal's, else 80."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return 80


# ------------------------------------------------------------------------------------------ cells

def _cell(value: Any, *, lines: bool = False) -> str:
    """A value as table text: mappings as `key: value` (one per line with `lines`, else on one line)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        if lines:
            return "\n".join(_mapping_lines(value))
        return ", ".join(f"{k}: {_inline(v)}" for k, v in value.items())
    if isinstance(value, list):
        if lines and any(isinstance(item, (dict, list)) for item in value):
            return "\n".join(_inline(item) for item in value)
        return ", ".join(_inline(item) for item in value)
    return str(value)


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        text = ", ".join(f"{k}: {_inline(v)}" for k, v in value.items())
        return "{" + text + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(item) for item in value) + "]"
    return _cell(value)


def _mapping_lines(value: dict, indent: str = "") -> list[str]:
    lines: list[str] = []
    for key, item in value.items():
        if isinstance(item, dict) and item:
            lines.append(f"{indent}{key}:")
            lines.extend(_mapping_lines(item, indent + "  "))
        else:
            lines.append(f"{indent}{key}: {_inline(item) if isinstance(item, (dict, list)) else _cell(item)}")
    return lines


def _is_rows(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def _keys_of(rows: Sequence[Row]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        for key in row:
            seen.setdefault(key, None)
    return list(seen)


def _chosen(rows: Sequence[Row], view: View, choice: Choice) -> list[str]:
    """The columns of a table before any fitting: --columns, --wide (every key), or the view's."""
    keys = _keys_of(rows)
    if choice.columns:
        known = list(dict.fromkeys([*view.columns, *keys]))
        unknown = [name for name in choice.columns if name not in known]
        if unknown and (rows or view.columns):
            from jedictl.errors import BadInput

            raise BadInput(f"no column {', '.join(unknown)}; choose from {', '.join(known)}", "--columns")
        return list(choice.columns)
    if choice.wide:
        return list(dict.fromkeys([*view.columns, *keys]))
    return list(view.columns) or keys


# -------------------------------------------------------------------------------------------- tsv

def _write_tsv(data: Any, view: View, choice: Choice, stream: TextIO) -> None:
    if isinstance(data, list):
        rows, names = data, _chosen(data, view, choice)
    else:
        rows, names = [{"key": k, "value": v} for k, v in data.items()], ["key", "value"]
    stream.write("\t".join(names) + "\n")
    for row in rows:
        stream.write("\t".join(_tsv_cell(row.get(name)) for name in names) + "\n")


def _tsv_cell(value: Any) -> str:
    if isinstance(value, (dict, list)):  # for scripts: JSON, which they can parse
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    else:
        text = _cell(value)
    return text.replace("\t", " ").replace("\n", " ")


# ----------------------------------------------------------------------------------------- tables

class _Tables:
    """Draws tables on one stream: rich at the terminal's width, or plain text when piped."""

    def __init__(self, stream: TextIO, choice: Choice):
        self.stream, self.choice = stream, choice
        self.terminal = is_terminal(stream)
        self.console = None
        if self.terminal:
            from rich.console import Console

            # Drawn into a buffer, then written with the padding rich leaves at the ends of lines removed.
            self.console = Console(file=io.StringIO(), force_terminal=True, highlight=False, no_color=bool(os.environ.get("NO_COLOR")),
                                   width=terminal_width(stream), height=25)

    @property
    def width(self) -> int:
        return self.console.width if self.console is not None else 0

    def write(self, data: Any, view: View, title: str | None) -> None:
        self._write(data, view, title)
        if self.console is not None:
            drawn = self.console.file.getvalue()  # type: ignore[attr-defined]
            self.stream.write("".join(line.rstrip() + "\n" for line in drawn.splitlines()))

    def _write(self, data: Any, view: View, title: str | None) -> None:
        if isinstance(data, list):
            self.rows(data, view, title, choice=self.choice)
            return
        # One object: its fields (mappings as key: value lines), then each list of rows as its own table.
        fields = [{"field": k, "value": _cell(v, lines=True)} for k, v in data.items() if not _is_rows(v)]
        self.fields(fields, title)
        nested = Choice(wide=self.choice.wide)  # --columns picks a list's columns; a show's tables follow --wide
        for key, value in data.items():
            if _is_rows(value):
                self._line("")
                self.rows(value, view.tables.get(key, View()), key.replace("_", " "), choice=nested)

    def rows(self, rows: list[Row], view: View, title: str | None, *, choice: Choice) -> None:
        names = _chosen(rows, view, choice)
        if not rows:
            if title:
                self._line(title)
            self._line("(none)")
            return
        if not choice.columns:  # a default column no row has (a file without guid) is left out of a table
            present = set(_keys_of(rows))
            names = [name for name in names if name in present] or names
        cells = [[_cell(row.get(name)) for name in names] for row in rows]
        if not self.terminal:
            self._plain(names, cells, title)
            return
        if not choice.columns and not choice.wide:
            names, cells = self._drop(names, cells, max(view.keep, 1))
        numeric = [all(isinstance(row.get(name), (int, float)) and not isinstance(row.get(name), bool) or row.get(name) is None
                       for row in rows) for name in names]
        widths = None if choice.wide else self._squeeze(names, cells)
        if widths is not None:
            cells = [[_cut(cell, width) for cell, width in zip(row, widths)] for row in cells]
        self._rich(names, cells, title, numeric, widths)

    def fields(self, fields: list[dict[str, str]], title: str | None) -> None:
        cells = [[f["field"], f["value"]] for f in fields]
        if not self.terminal:
            self._plain(["field", "value"], cells, title, headers=False)
            return
        from rich import box
        from rich.table import Table

        self._title(title)
        table = Table(show_header=False, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
        table.add_column("field", no_wrap=True, style=_style("bold"))
        table.add_column("value", overflow="fold")
        for line in cells:
            table.add_row(*(_text(cell) for cell in line))
        self.console.print(table)

    def _drop(self, names: list[str], cells: list[list[str]], keep: int) -> tuple[list[str], list[list[str]]]:
        """Drop columns from the end (never the first `keep`) until the table fits the terminal, counting
        a long column at SQUEEZED_WIDTH: it is cut to fit rather than pushing the others out."""
        widths = [min(_natural(names, cells, i), max(SQUEEZED_WIDTH, _width(names[i]))) for i in range(len(names))]
        chosen = list(range(len(names)))
        while len(chosen) > keep and sum(widths[i] for i in chosen) + GAP * (len(chosen) - 1) > self.width:
            chosen.pop()
        return [names[i] for i in chosen], [[row[i] for i in chosen] for row in cells]

    def _squeeze(self, names: list[str], cells: list[list[str]]) -> list[int] | None:
        """Column widths that fit the terminal: the widest long columns give way first, down to their
        header; ids, statuses, numbers and times (at most RIGID_WIDTH) keep theirs. None: no need."""
        widths = [_natural(names, cells, i) for i in range(len(names))]
        floors = [max(_width(name), 6) if width > RIGID_WIDTH else width for name, width in zip(names, widths)]
        excess = sum(widths) + GAP * (len(names) - 1) - self.width
        if excess <= 0:
            return None
        while excess > 0:
            room = [i for i in range(len(widths)) if widths[i] > floors[i]]
            if not room:
                break
            widest = max(room, key=lambda i: widths[i])
            widths[widest] -= 1
            excess -= 1
        return widths

    def _rich(self, names: list[str], cells: list[list[str]], title: str | None, numeric: list[bool], widths: list[int] | None) -> None:
        """Cells already cut to `widths` (text with spaces wraps at words instead); with no widths
        (--wide) long cells fold onto more lines."""
        from rich import box
        from rich.table import Table

        self._title(title)
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0), header_style=_style("bold"))
        for index, (name, is_number) in enumerate(zip(names, numeric)):
            if widths is None:
                table.add_column(name, justify="right" if is_number else "left", overflow="fold",
                                 no_wrap=_natural(names, cells, index) <= RIGID_WIDTH)
            else:
                table.add_column(name, justify="right" if is_number else "left", overflow="fold", width=widths[index])
        for line in cells:
            table.add_row(*(_text(cell) for cell in line))
        self.console.print(table)

    def _line(self, text: str) -> None:
        if self.console is not None:
            self.console.file.write(text + "\n")  # type: ignore[attr-defined]
        else:
            self.stream.write(text + "\n")

    def _title(self, title: str | None) -> None:
        if title:
            from rich.text import Text

            self.console.print(Text(title, style=_style("bold")))

    def _plain(self, names: list[str], cells: list[list[str]], title: str | None, headers: bool = True) -> None:
        """A plain table, whole: columns aligned by display width, no escapes, nothing cut."""
        from rich.cells import cell_len

        if title:
            self.stream.write(f"{title}\n")
        split = [[cell.split("\n") for cell in row] for row in cells]
        # As tabulate's "simple" format drew them before (a header gets two spaces of room), so piped
        # output reads as it always has.
        widths = [max([cell_len(names[i]) + 2 if headers else 0] + [cell_len(line) for row in split for line in row[i]])
                  for i in range(len(names))]

        def line(parts: Sequence[str]) -> str:
            return "  ".join(part + " " * (width - cell_len(part)) for part, width in zip(parts, widths)).rstrip()

        out = []
        if headers:
            out += [line(names), line(["-" * width for width in widths])]
        for row in split:
            for n in range(max(len(part) for part in row)):
                out.append(line([part[n] if n < len(part) else "" for part in row]))
        self.stream.write("\n".join(out) + "\n")


def _width(text: str) -> int:
    from rich.cells import cell_len

    return cell_len(text)


def _natural(names: Sequence[str], cells: Sequence[Sequence[str]], index: int) -> int:
    """The display width column `index` needs to show every cell whole."""
    return max([_width(names[index])] + [_width(line) for row in cells for line in row[index].splitlines() or [""]])


def _cut(cell: str, width: int) -> str:
    """A cell that fits `width`: a line with no space that is too long loses its middle ("data24_…_v2.log/"),
    keeping both the prefix and the distinguishing end; a line of words is left to wrap."""
    lines = []
    for line in cell.split("\n"):
        if _width(line) > width and " " not in line.strip():
            line = _middle_cut(line, width)
        lines.append(line)
    return "\n".join(lines)


def _middle_cut(text: str, width: int) -> str:
    if width < 3:
        return text[:width]
    keep = width - 1
    head_width, tail_width = keep - keep // 2, keep // 2
    head, used = "", 0
    for char in text:
        if used + _width(char) > head_width:
            break
        head, used = head + char, used + _width(char)
    tail, used = "", 0
    for char in reversed(text):
        if used + _width(char) > tail_width:
            break
        tail, used = char + tail, used + _width(char)
    return f"{head}…{tail}"


def _style(style: str) -> str:
    """A style, or none at all under NO_COLOR (no-color.org: no escapes, bold included)."""
    return "" if os.environ.get("NO_COLOR") else style


def _text(cell: str) -> Any:
    """A cell for rich: plain text, never read as console markup (`[bold]` in a task name stays text)."""
    from rich.text import Text

    return Text(cell)


def iter_rows(rows: Iterable[Any]) -> list[dict[str, Any]]:
    """Database rows (SQLAlchemy `Row` or mappings) as plain dicts."""
    return [dict(getattr(row, "_mapping", row)) for row in rows]
