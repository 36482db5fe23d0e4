"""Outside text the CLI prints (a model file's name, a merged entry's fields, a policy's
description) is shown escaped: one line stays one line, and no escape sequence acts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import unicodedata
from pathlib import Path

import pytest
from _cache_cli import one_error
from test_cli import run_cli

from chunktune._cli import main
from chunktune._shown import unprinted

pytestmark = pytest.mark.mujoco

# a plane and one falling box: a tiny model, measured in well under a second
_XML = """
<mujoco><worldbody><geom type="plane" size="2 2 .1"/>
<body pos="0 0 1"><freejoint/><geom type="box" size=".1 .1 .1"/></body></worldbody></mujoco>
"""
_NAME = "arm\n\x1b[31mred\u202eevil.xml"  # a newline, an escape sequence, a bidi override
_SHOWN = r'"arm\n\u001B[31mred\u202Eevil.xml"'
_SMALL = ["--num-envs", "16", "--nthread", "2", "--nstep", "2", "--policy", "quick"]

# a cache file from another machine, written by hand: no checksums, as older files have none
_MERGED = r"""{"schema": 1, "entries": {"abababababababababababababababab.5b6bc0d37e2a": {
  "chunk_size": 4, "native_chunk": 3, "num_envs": 64, "nthread": 2, "created": 1796600000.0,
  "policy": "quick\nfake row", "policy_hash": "5b6bc0d37e2a", "host": "node7\u001b[2J.example",
  "device": {"cpu": "Xeon\u001b]0;pwned\u0007", "machine": "x86_64\u202e", "usable_cpus": "2\n"},
  "reason": "chose 4\n\u001b[31mred", "timings_ms": {"native": 10.0, "4": 9.0},
  "signature": {"kind": "custom", "model_label": "lab\u001b[5mel"},
  "chunktune_version": "0.1\u001b[0m"}}}
"""


def _chunktune(*args: str, code: int = 0) -> tuple[str, str]:
    """``python -m chunktune ARGS``'s stdout and stderr; it must exit with ``code``."""
    done = run_cli(*args, timeout=120)
    assert done.returncode == code, done.stderr
    return done.stdout, done.stderr


def _printable(text: str) -> bool:
    """Whether every character of ``text`` but its newlines prints as written."""
    return not [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf")]


@pytest.mark.parametrize("envs", ["16", "2"], ids=["measured", "trivial"])
def test_tune_s_header_shows_a_model_file_s_name_escaped(isolated: Path, envs: str) -> None:
    """tune's header quotes a model file name's newline, escape and bidi override."""
    # the name went out raw: a line broken in two, the rest of it red and reversed
    (isolated / _NAME).write_text(_XML)
    out, err = _chunktune("tune", _NAME, "-q", *_SMALL[:1], envs, *_SMALL[2:])
    assert _printable(out) and _printable(err), out
    assert out.splitlines()[0].startswith(f"{_SHOWN}: {envs} envs, 2 threads")


def test_a_missing_model_file_s_name_is_escaped(isolated: Path) -> None:
    """A model file not found is named escaped, in the one error line."""
    _, err = _chunktune("tune", _NAME, *_SMALL, code=2)
    assert err == f"chunktune: error: model file not found: {_SHOWN}\n"


@pytest.mark.parametrize(
    ("name", "content", "shown"),
    [
        pytest.param(_NAME, "<mujoco><bogus/></mujoco>", _SHOWN, id="unparsed"),
        pytest.param(b"arm\n\xff.xml", _XML, r'"arm\n\\udcff.xml"', id="not-utf-8"),
    ],
)
def test_a_model_file_that_fails_to_load_is_named_escaped(
    isolated: Path, name: str | bytes, content: str, shown: str
) -> None:
    """A model MuJoCo cannot load (its XML, a name not UTF-8) is named escaped, on one line."""
    # "cannot load model file" wrote the name raw: the line split, the rest of it red
    file = os.fsdecode(name)
    (isolated / file).write_text(content)
    _, err = _chunktune("tune", file, *_SMALL, code=2)
    assert _printable(err) and err.count("\n") == 1, err
    assert err.startswith(f"chunktune: error: cannot load model file {shown}: "), err


def test_check_names_the_model_escaped_and_a_command_that_pastes_back(isolated: Path) -> None:
    """check's "nothing cached" names the file escaped, and its tune command in bash's $'...'."""
    (isolated / _NAME).write_text(_XML)
    _, err = _chunktune("check", _NAME, *_SMALL, code=1)
    assert _printable(err) and err.count("\n") == 1, err
    assert err.startswith(f"chunktune: error: nothing cached for {_SHOWN}: 16 envs")
    word = r"$'arm\x0a\x1b[31mred\xe2\x80\xaeevil.xml'"
    assert f"`chunktune tune {word} --num-envs 16" in err
    pasted = subprocess.run(
        ["bash", "-c", f"printf %s {word}"], capture_output=True, text=True, check=True
    )
    assert pasted.stdout == _NAME


# bash's stand-in for chunktune: the model and --config that the pasted line parses to,
# as the bytes the shell handed it
_PARSED = """chunktune() {
  python3 -c 'import os, sys; from chunktune._cli import build_parser
a = build_parser().parse_args(sys.argv[1:])
print(os.fsencode(a.model).hex(), os.fsencode(a.config).hex())' "$@"
}
"""


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_check_s_tune_command_pastes_back_every_awkward_name(isolated: Path, locale: str) -> None:
    """A leading dash, quotes, a backslash, a bidi override, a non-UTF-8 byte paste back as is."""
    # "-x.xml" pasted back as an option, a non-UTF-8 byte as the text "\udce9", and a C
    # locale's bash read \U0000202e as text
    model = "-it's\u202e\x1b[1m.xml"  # MuJoCo opens no name with a backslash, nor non-UTF-8
    config = os.fsdecode(b"-my\"conf\\\xe9'.toml")  # no space: argparse takes "-a b" for a value
    (isolated / model).write_text(_XML)
    (isolated / config).write_text('policy = "quick"\n')
    _, err = _chunktune("check", f"--config={config}", *_SMALL[:6], "--", model, code=1)
    assert _printable(err) and err.count("\n") == 1, err
    (line,) = re.findall(r"`(chunktune tune .*)` tunes it", err)
    pasted = subprocess.run(
        ["bash", "-c", _PARSED + line],
        capture_output=True,
        env={
            **os.environ,
            "LC_ALL": locale,
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        },
        check=True,
    )
    assert pasted.stdout.split() == [
        os.fsencode(model).hex().encode(),
        os.fsencode(config).hex().encode(),
    ]


@pytest.mark.parametrize("verb", ["list", "show"])
def test_an_imported_entry_s_own_text_is_shown_escaped(isolated: Path, verb: str) -> None:
    """cache list/show quote a merged entry's policy, host, machine, versions and reason."""
    # list split the row at the policy's newline; show printed host, policy and reason raw
    merged = isolated / "other\n\x1b[1mmachine.json"
    merged.write_text(_MERGED)
    out, _ = _chunktune("cache", "import", merged.name)
    assert _printable(out) and r'"other\n\u001B[1mmachine.json"' in out, out
    out, _ = _chunktune("cache", *(["list"] if verb == "list" else ["show", "abab"]))
    assert _printable(out), out
    if verb == "list":
        (row,) = [ln for ln in out.splitlines() if ln.startswith("abababababab")]
        assert row.split() == ["abababababab", "custom", r'"lab\u001B[5mel"', "64", "2", "4",
                               row.split()[6], r'"quick\nfake', 'row"']  # fmt: skip
        return
    for line in [
        r'policy          "quick\nfake row" (5b6bc0d37e2a)',
        r'host            "node7\u001B[2J.example"',
        r'machine         cpu="Xeon\u001B]0;pwned\u0007", machine="x86_64\u202E", '
        r'usable_cpus="2\n"',
        r'versions        chunktune "0.1\u001B[0m", mujoco ?',
        r'"chose 4\n\u001B[31mred"',
    ]:
        assert f"\n{line}\n" in out, out


def test_a_merged_host_is_shown_escaped_in_list_s_host_column(isolated: Path) -> None:
    """list's host column, shown once hosts differ, quotes a host name's escape sequence."""
    merged = isolated / "merged.json"
    doc = json.loads(_MERGED)
    (table,) = doc["entries"].values()
    doc["entries"]["cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd.5b6bc0d37e2a"] = {**table, "host": "vm"}
    merged.write_text(json.dumps(doc))
    _chunktune("cache", "import", str(merged))
    out, _ = _chunktune("cache", "list")
    assert _printable(out), out
    (row,) = [ln for ln in out.splitlines() if ln.startswith("abababababab")]
    assert row.endswith(r'"node7\u001B[2J"')


_POLICY = """
policy = "mine"
[policies.mine]
extends = "quick"
description = "my policy\\n\\u001b[31mred\\u202e text"
"""


def test_policy_list_and_show_escape_a_description(isolated: Path) -> None:
    """policy list quotes a description's controls; show's TOML escapes them and reads back."""
    # list split the row and coloured it; show left the bidi override raw (TOML allows it)
    (isolated / "chunktune.toml").write_text(_POLICY)
    out, _ = _chunktune("policy", "list")
    assert _printable(out), out
    (row,) = [ln for ln in out.splitlines() if ln.startswith("mine")]
    assert r'"my policy\n\u001B[31mred\u202E text"' in row
    out, _ = _chunktune("policy", "show", "mine")
    assert _printable(out), out
    assert tomllib.loads(out)["description"] == "my policy\n\x1b[31mred\u202e text"


_ODD_FILE = "a\nb\x1b[31m"  # a newline and an escape sequence in a file's name
_SHOWN_START = r"a\nb\u001B[31m"


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["record", "-o", f"{_ODD_FILE}.txt"], id="record-suffix"),
        pytest.param(["tune", "--plot", f"{_ODD_FILE}.png"], id="plot-onto-the-cache"),
    ],
)
def test_a_trace_or_plot_error_names_an_odd_file_escaped(
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    """record -o and tune --plot errors quote a file name's newline and escape: one line, exit 2."""
    # the cache named so too: a plot must not replace it
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(isolated / f"{_ODD_FILE}.png"))
    assert main([*argv, "--num-envs", "16", "--nthread", "2", "-q"]) == 2
    err = capsys.readouterr().err
    assert unprinted(err.rstrip("\n")) is None, err
    assert _SHOWN_START in one_error(err)
