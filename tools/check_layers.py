#!/usr/bin/env python3
"""Checks that every #include goes down a floor, as docs/architecture.md draws them.

The floors are read from the table under "## Floors" in docs/architecture.md
(one row a floor, lowest first: the floor's number, its folders under src/,
and the public headers of include/cucore/ that belong to it), so the document
and the check cannot drift apart. A file may include:

- a file of its own folder, or of a folder on a lower floor;
- a public header of its own floor or a lower one (public headers are the
  API: a folder includes the headers of the floors it stands on);
- never a folder or header of another folder on the same floor (siblings are
  independent), nor one on a higher floor.

Public headers (include/cucore/) are checked the same way by the floor their
row names. python/src, tools/ and bench/ stand above every floor; bench/ and
tools/ may not include test files (tests/): a benchmark's shared helpers are
bench/'s own.

    tools/check_layers.py [ROOT]       exit 1 with one line per violation
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]')
SOURCES = {".cpp", ".hpp", ".h", ".inc", ".cu"}
TOP = 1_000_000  # python/src, tools/, bench/


def read_floors():
    """{folder: floor}, {public header: (floor, folder)} from docs/architecture.md's Floors table."""
    text = (ROOT / "docs/architecture.md").read_text()
    m = re.search(r"^## Floors\n(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        sys.exit("check_layers: docs/architecture.md has no '## Floors' section")
    folders, headers = {}, {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        floor = int(cells[0])
        names = re.findall(r"`([a-z_]+)/`", cells[1])  # one folder a row, or none (the umbrella)
        folder = names[0] if names else None
        if folder:
            folders[folder] = floor
        for h in re.findall(r"`([a-z_/]+\.hpp)`", cells[2]):
            headers[h] = (floor, folder)
    if not folders:
        sys.exit("check_layers: the Floors table lists no folder")
    return folders, headers


def main():
    folders, headers = read_floors()
    problems = []

    def where(path):
        """(floor, folder) of a file, or None when it is not checked."""
        rel = path.relative_to(ROOT).parts
        if rel[0] == "src":
            folder = rel[1] if len(rel) > 2 else None
            if folder not in folders:
                problems.append(f"{path.relative_to(ROOT)}: folder src/{folder}/ is on no floor of docs/architecture.md")
                return None
            return folders[folder], folder
        if rel[0] == "include":
            h = "/".join(rel[2:])
            if h not in headers:
                problems.append(f"{path.relative_to(ROOT)}: public header {h} is on no floor of docs/architecture.md")
                return None
            return headers[h]
        return TOP, rel[0]

    files = []
    for top in ("src", "include/cucore", "python/src", "tools", "bench"):
        files += [p for p in sorted((ROOT / top).rglob("*")) if p.suffix in SOURCES and p.is_file()]
    for path in files:
        me = where(path)
        if me is None:
            continue
        floor, folder = me
        for no, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            kind, name = m.groups()
            target = None
            if kind == "<" and name.startswith("cucore/"):
                h = name[len("cucore/"):]
                if h not in headers:
                    problems.append(f"{path.relative_to(ROOT)}:{no}: includes <{name}>, which is on no floor")
                    continue
                target = (*headers[h], f"<{name}>")
            elif kind == '"':
                if "tests/" in name and folder in ("bench", "tools"):
                    problems.append(f"{path.relative_to(ROOT)}:{no}: includes test file \"{name}\"; "
                                    f"{folder}/ keeps its own helpers")
                    continue
                first = name.split("/")[0]
                if "/" in name and first in folders:
                    target = (folders[first], first, f'"{name}"')
            if target is None or floor == TOP:
                continue
            t_floor, t_folder, shown = target
            if t_floor > floor:
                problems.append(f"{path.relative_to(ROOT)}:{no}: {folder} (floor {floor}) includes {shown} "
                                f"of floor {t_floor}: up a floor")
            elif t_floor == floor and t_folder is not None and folder is not None and t_folder != folder:
                problems.append(f"{path.relative_to(ROOT)}:{no}: {folder} includes {shown} of {t_folder}, "
                                f"a sibling on floor {floor}")
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} include(s) break the floors of docs/architecture.md")
        return 1
    print(f"check_layers: {len(files)} files, every include goes down a floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
