"""The option table (src/options/options_table.py) and its generator
(tools/gen_options.py): the checked-in files are what the table makes now,
a table changed without a rerun is caught (--check fails naming each stale
file), and one row added to the table reaches the C++ struct, the X-macro
tables and the Python dataclass in one rerun. CPU only; needs no cucore build."""
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
GEN = ROOT / "tools" / "gen_options.py"
OUTPUTS = ["src/options/option_fields.inc", "include/cucore/program.hpp", "include/cucore/linker.hpp",
           "python/cucore/_options.py"]


def _gen(*args):
    return subprocess.run([sys.executable, str(GEN), *args], capture_output=True, text=True)


def _copy_tree(tmp_path):
    for rel in OUTPUTS + ["src/options/options_table.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return tmp_path


def test_checked_in_outputs_are_what_the_table_makes():
    r = _gen("--check")
    assert r.returncode == 0, r.stderr


def test_a_table_changed_without_a_rerun_is_stale_and_one_row_reaches_every_output(tmp_path):
    root = _copy_tree(tmp_path)
    table = root / "src/options/options_table.py"
    text = table.read_text()
    anchor = "    P('numba_debug',"
    assert anchor in text
    table.write_text(text.replace(anchor, "    P('made_up_switch', 'bool?', 'toggle --made-up-switch', 'unsupported'),\n"
                                          + anchor, 1))
    r = _gen("--check", "--root", str(root))
    assert r.returncode == 1
    for rel in OUTPUTS:
        stale = rel != "include/cucore/linker.hpp"  # a program option leaves the linker alone
        assert (f"{rel} is stale" in r.stderr) == stale, (rel, r.stderr)

    r = _gen("--root", str(root))
    assert r.returncode == 0, r.stderr
    assert _gen("--check", "--root", str(root)).returncode == 0
    inc = (root / "src/options/option_fields.inc").read_text()
    assert 'X(made_up_switch, toggle, "--made-up-switch", unsupported, "")' in inc
    hpp = (root / "include/cucore/program.hpp").read_text()
    assert "  std::optional<bool> made_up_switch{};\n  std::optional<bool> numba_debug{};" in hpp
    py = (root / "python/cucore/_options.py").read_text()
    assert "    made_up_switch: Optional[bool] = None\n    numba_debug: Optional[bool] = None" in py
    assert "    made_up_switch : Optional[bool]\n        Passed as NVRTC ``--made-up-switch``." in py
    # Nothing else in the hand-written files moved.
    for rel in ("include/cucore/program.hpp", "python/cucore/_options.py"):
        before = (ROOT / rel).read_text().splitlines()
        after = (root / rel).read_text().splitlines()
        assert [l for l in after if "made_up_switch" not in l and "made-up-switch" not in l] == before, rel


def test_a_bad_row_is_refused_naming_it(tmp_path):
    root = _copy_tree(tmp_path)
    table = root / "src/options/options_table.py"
    table.write_text(table.read_text().replace("'toggle --device-debug'", "'toggel --device-debug'", 1))
    r = _gen("--check", "--root", str(root))
    assert r.returncode == 2
    assert "PROGRAM field 'debug': unknown kind 'toggel'" in r.stderr
