"""`cache list`'s table off a terminal: laid out without rich, exactly as rich draws it."""

from __future__ import annotations

import io
import re
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from _cache_cli import entry

from chunktune import DecisionCache
from chunktune._cli import main
from chunktune._cli._common import table_console
from chunktune._cli._list_cmd import _rich_table
from chunktune._cli._plain_table import Column, plain_table

_COLUMNS: list[Column] = [
    ("key", "left", 10),
    ("model", "left", 0),
    ("N", "right", 0),
    ("host", "left", 0),
]


# rich before 15 draws a column with a min_width one cell wider than its widest cell; the
# plain table lays out what rich 15 draws (the floor's rich differs by that space only)
_SAME_AS_RICH = pytest.mark.skipif(
    int(version("rich").split(".")[0]) < 15, reason="rich < 15 pads a min_width column by one"
)


def _drawn_by_rich(columns: list[Column], rows: list[list[str]]) -> str:
    """What rich prints for the table on a pipe, as `cache list` printed it before."""
    out = io.StringIO()
    real, sys.stdout = sys.stdout, out
    try:
        table = _rich_table(columns, rows)
        table_console(table).print(table)
    finally:
        sys.stdout = real
    return out.getvalue()


@pytest.mark.parametrize(
    "rows",
    [
        pytest.param([["a", "m", "64", "node1"]], id="one-row"),
        pytest.param([["abc", "中文模型", "1", "n"], ["abcdefghijkl", "x", "1024", "h"]], id="cjk"),
        pytest.param([["k", "", "?", "a" * 40], ["kk", "\"q\" 'x'", "7", ""]], id="empty-cells"),
        pytest.param([["k", "e\u0301t\u00e9", "3", "nöde…"]], id="combining"),
    ],
)
@_SAME_AS_RICH
def test_the_plain_table_is_what_rich_draws_on_a_pipe(rows: list[list[str]]) -> None:
    """Header, rule and rows (wide, combining characters) match rich's output byte for byte."""
    plain = "".join(f"{line}\n" for line in plain_table(_COLUMNS, rows))
    assert plain == _drawn_by_rich(_COLUMNS, rows)


def test_the_plain_table_pads_by_terminal_cells_and_rules_its_header() -> None:
    """Columns as wide as their widest cell in terminal cells, three spaces apart, a ─ rule."""
    rows = [["abc", "中文", "1", "n"], ["k", "e\u0301t", "1024", "host"]]
    assert list(plain_table(_COLUMNS, rows)) == [
        "key          model      N   host",
        "─" * 32,
        "abc          中文       1   n   ",
        "k            e\u0301t      1024   host",
    ]


@_SAME_AS_RICH
def test_cache_list_into_a_pipe_prints_what_rich_drew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache list` (several hosts and CPUs) prints what it printed when rich drew the table."""
    from chunktune._cli import _list_cmd

    path = tmp_path / "c.json"
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(path))
    DecisionCache(path).update(
        {
            f"{i:032x}.p": entry(
                i % 5 or None,
                age_s=3600.0 * (i + 1) + 30,
                host=f"node{i % 3}.example",
                device={"logical_cpus": 2 + i % 2, "usable_cpus": 2},
                signature={"name": f"model-{i}"},
            )
            for i in range(12)
        }
    )
    assert main(["cache", "list"]) == 0
    plain = capsys.readouterr().out

    def by_rich(columns: list[Column], rows: list[list[str]]) -> list[str]:
        return _drawn_by_rich(columns, rows).splitlines()

    monkeypatch.setattr(_list_cmd, "plain_table", by_rich)
    assert main(["cache", "list"]) == 0
    drawn = capsys.readouterr().out
    assert "cpus" in drawn and "host" in drawn and len(drawn.splitlines()) == 2 + 12 + 1
    assert plain == drawn


class _AsciiPipe(io.StringIO):
    """A pipe whose encoding holds ASCII only (``LANG=C`` on an older system, or
    ``PYTHONIOENCODING=ascii``): rich draws the table there, in its ASCII box."""

    encoding = "ascii"


def test_cache_list_into_an_ascii_pipe_cuts_no_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ASCII pipe gets rich's ASCII table as wide as it needs: a 200-character cell whole."""
    path = tmp_path / "c.json"
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(path))
    policy = "p" * 200  # a user policy's name: past the 160 columns a pipe's console has
    DecisionCache(path).update({f"{0:032x}.p": entry(4, policy=policy)})
    out = _AsciiPipe()
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["cache", "list"]) == 0
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("---") and "+" in lines[1]  # rich's ASCII box, not ─
    assert len(lines) == 3 + 1 and policy in lines[2]


def _two_hosts_two_slots(path: Path) -> None:
    """Two entries of other hosts, CPUs and counts: `cache list` shows every column."""
    DecisionCache(path).update(
        {
            f"{c * 32}.p": entry(
                4,
                age_s=3630,
                num_envs=n,
                host=f"node{i}.example",
                device={"logical_cpus": 2 + i, "usable_cpus": 2},
                signature={"name": "model-" + "m" * 30},
            )
            for i, (c, n) in enumerate([("a", 64), ("b", 1024)])
        }
    )


def _cell(header: str, line: str, name: str, justify: str) -> str:
    """The cell of ``line`` under the column headed ``name``, by the header's edge."""
    start = header.index(f" {name} " if name == "N" else name) + (name == "N")
    if justify == "right":
        return re.split(r" {3,}", line[: start + len(name)])[-1].strip()
    return re.split(r" {3,}", line[start:])[0].strip()


def test_cache_list_puts_each_cell_under_its_header_justified_as_declared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Into a pipe, N and cpus end where their headers end, host starts where its header starts."""
    path = tmp_path / "c.json"
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(path))
    _two_hosts_two_slots(path)
    assert main(["cache", "list"]) == 0
    header, _, *rows = capsys.readouterr().out.splitlines()
    cells = [
        [
            _cell(header, row, *column)
            for column in [("N", "right"), ("cpus", "right"), ("host", "left")]
        ]
        for row in rows[:2]
    ]
    assert cells == [["1024", "2 of 3", "node1"], ["64", "2 of 2", "node0"]]


class _Terminal(io.StringIO):
    """A stdout that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("columns", [20, 50])
def test_cache_list_on_a_terminal_is_fitted_to_its_width_and_keeps_each_key_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    """On a terminal rich fits the table to the window; a key, what `cache show` takes, is whole."""
    path = tmp_path / "c.json"
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(path))
    monkeypatch.setenv("COLUMNS", str(columns))
    _two_hosts_two_slots(path)
    out = _Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["cache", "list"]) == 0
    lines = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()).splitlines()
    assert max(map(len, lines)) <= columns
    assert {"a" * 12, "b" * 12} <= {line.split(" ")[0] for line in lines}


def test_cache_list_on_an_ascii_stdout_draws_rich_ascii_box(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ASCII-only stdout gets rich's table of |, - and +: nothing it cannot encode."""
    path = tmp_path / "c.json"
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(path))
    _two_hosts_two_slots(path)
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="ascii")
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["cache", "list"]) == 0
    out.flush()
    text = raw.getvalue().decode("ascii")
    assert "-+-" in text and "node1" in text


def test_cache_list_into_a_pipe_lays_the_table_out_without_rich(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Off a terminal (UTF-8) the table is plain arithmetic: rich builds no Table for it."""
    from chunktune._cli import _list_cmd

    def refused(*args: object) -> object:
        raise AssertionError("rich's table drawn into a pipe")

    path = tmp_path / "c.json"
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(path))
    _two_hosts_two_slots(path)
    monkeypatch.setattr(_list_cmd, "_rich_table", refused)
    assert main(["cache", "list"]) == 0
    assert "node1" in capsys.readouterr().out


def _cut_and_foreign(path: Path) -> None:
    """Two entries whose cells an ASCII stream cannot write as they are: a model summary and
    a host cut with …, a model file's name in Chinese."""
    DecisionCache(path).update(
        {
            f"{'a' * 32}.p": entry(
                4, age_s=3630, host="a" * 20, signature={"name": "model-" + "m" * 30}
            ),
            f"{'b' * 32}.p": entry(None, age_s=7230, host="node7", model_file="/m/模型.xml"),
        }
    )


# every line 91 characters: the header's and the host column's trailing spaces are rich's
_ASCII_TABLE = [
    "key          | model               |  N | T |       chunk | age | policy   | host          ",
    "-------------+---------------------+----+---+-------------+-----+----------+---------------",
    "aaaaaaaaaaaa | name=model-mmmmm... | 64 | 2 |           4 |  1h | balanced | aaaaaaaaaaa...",
    "bbbbbbbbbbbb | ? \\u6a21\\u578b.xml  | 64 | 2 | native (=3) |  2h | balanced | node7         ",
]


def _ascii_pipe_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The lines `cache list` writes of the cut and foreign entries into an ASCII pipe."""
    path = tmp_path / "c.json"
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(path))
    _cut_and_foreign(path)
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="ascii")
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["cache", "list"]) == 0
    out.flush()
    return raw.getvalue().decode("ascii").splitlines()


@_SAME_AS_RICH
def test_cache_list_into_an_ascii_pipe_lays_out_what_it_writes_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ASCII pipe: … written as ..., a Chinese name as escapes, each row as wide as its rule."""
    assert _ascii_pipe_lines(tmp_path, monkeypatch)[:4] == _ASCII_TABLE


def test_cache_list_into_an_ascii_pipe_writes_every_row_as_wide_as_its_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ASCII pipe, on any rich the floors allow: header, rule and rows of one width."""
    table = _ascii_pipe_lines(tmp_path, monkeypatch)[:4]
    assert len({len(line) for line in table}) == 1
    assert "..." in table[2] and "\\u6a21\\u578b.xml" in table[3]


@pytest.mark.parametrize("columns", [40, 60])
def test_cache_list_on_a_narrow_ascii_terminal_keeps_every_line_within_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    """On an ASCII terminal narrower than the table, a cut cell never runs past the window."""
    path = tmp_path / "c.json"
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(path))
    monkeypatch.setenv("COLUMNS", str(columns))
    _cut_and_foreign(path)
    raw = io.BytesIO()
    out = _AsciiTerminal(raw, encoding="ascii")
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["cache", "list"]) == 0
    out.flush()
    lines = re.sub(r"\x1b\[[0-9;]*m", "", raw.getvalue().decode("ascii")).splitlines()
    table = [line for line in lines if "entries in" not in line]
    assert max(map(len, table)) <= columns
    assert {"a" * 12, "b" * 12} <= {line.split(" ")[0] for line in table}


class _AsciiTerminal(io.TextIOWrapper):
    """A terminal whose encoding holds ASCII only (``LANG=C``): what it cannot encode raises."""

    def isatty(self) -> bool:
        return True


def test_cache_list_into_an_ascii_pipe_escapes_a_key_it_cannot_hold_as_wide_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ASCII pipe, an imported entry's key in Cyrillic: its cell escaped, every row one width."""
    path = tmp_path / "c.json"
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(path))
    DecisionCache(path).update({"ключ" * 8 + ".p": entry(4), f"{'b' * 32}.p": entry(None)})
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))
    assert main(["cache", "list"]) == 0
    sys.stdout.flush()
    table = raw.getvalue().decode("ascii").splitlines()[:4]
    assert len({len(line) for line in table}) == 1, table
    assert any(line.startswith("\\u043a\\u043b\\u044e\\u0447") for line in table)
