#!/usr/bin/env python3
"""Compiles every ```cpp block of a Markdown page, each on its own.

    doc_snippets.py CXX PAGE.md INCLUDE_DIR [SYSTEM_INCLUDE_DIR...]

Each block is a whole translation unit (its includes its own), compiled with
-std=c++20 -fsyntax-only -Wall -Wextra -Wpedantic -Werror; exit 1 naming the
block's first line in the page and the compiler's output when one fails, or
when the page has no block (a test that checks nothing would pass).
"""
import pathlib
import re
import subprocess
import sys
import tempfile


def main():
    cxx, page, include, *system = sys.argv[1:]
    text = pathlib.Path(page).read_text()
    blocks = [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in re.finditer(r"^```cpp\n(.*?)^```", text, re.S | re.M)]
    if not blocks:
        sys.exit(f"{page}: no ```cpp block")
    flags = ["-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Wpedantic", "-Werror", f"-I{include}"]
    for d in system:
        flags += ["-isystem", d]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for line, code in blocks:
            src = pathlib.Path(tmp) / f"snippet_{line}.cpp"
            src.write_text(code)
            r = subprocess.run([cxx, *flags, str(src)], capture_output=True, text=True)
            if r.returncode != 0:
                failed += 1
                print(f"{page}:{line}: the block does not compile:\n{r.stdout}{r.stderr}")
            else:
                print(f"{page}:{line}: compiles")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
