#!/usr/bin/env python3
"""Every field of a public aggregate has a default member initializer.

cucore's options and descriptions are aggregates filled with designated
initializers naming only what the caller sets (`{.count = 16}`); GCC's
-Wmissing-field-initializers (part of -Wextra) warns on each omitted field
that has no default member initializer, so user code built with
-Wall -Wextra -Werror would not compile. This scans the `struct X { ... };`
bodies under include/cucore (structs with no constructor and no private
part: aggregates) and reports each data member declared without `=` or `{}`,
naming the file and line. A member whose type has no default (a
cucore::system::Device) says so in its comment, "no default: why" (such a
struct is one cucore gives, never one the caller fills). dlpack.hpp is left out: its structs are DLPack's
C ABI, spelled as dlpack.h spells them and never built by designation.

    tools/check_aggregates.py ROOT     exit 1 and the list when one lacks it
"""
import pathlib
import re
import sys

EXEMPT = {"dlpack.hpp"}
STRUCT = re.compile(r"^\s*struct\s+(\w+)\s*(?:final\s*)?(?::\s*[^{]*)?\{\s*(?://.*)?$")
# A data member without an initializer: `Type name;` or `Type name[N];`.
MEMBER = re.compile(
    r"^\s+(?!return\b|using\b|friend\b|static\b|typedef\b|template\b|explicit\b|virtual\b|constexpr\b|inline\b|"
    r"enum\b|struct\b|class\b|public:|private:|protected:)[\w:<>,\s\*&\[\]]+?\s+(\w+)(?:\[\w*\])?\s*;\s*(?://.*)?$")


# A declarator list: the type (no top-level comma), then `a, b{}, c = 1`.
LIST = re.compile(r"^\s+((?:[\w:]+(?:<[^;]*?>)?[\s\*&]+)+?)(\w+(?:\s*(?:\{[^}]*\}|=\s*[^,;]+))?(?:\s*,\s*\w+(?:\s*(?:\{[^}]*\}|=\s*[^,;]+))?)+)\s*;\s*(?://.*)?$")


def split_top(decls):
    """`a, b{}, c = f(1, 2)` -> its declarators (commas inside brackets kept)."""
    out, depth, cur = [], 0, ""
    for ch in decls:
        if ch in "({<[":
            depth += 1
        elif ch in ")}>]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + [cur]


def missing(root):
    found = []
    for path in sorted((root / "include" / "cucore").rglob("*.hpp")):
        if path.name in EXEMPT:
            continue
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            m = STRUCT.match(line)
            if not m:
                continue
            name, depth, body = m.group(1), 1, []
            for j in range(i + 1, len(lines)):
                depth += lines[j].count("{") - lines[j].count("}")
                if depth <= 0:
                    break
                if depth == 1:
                    body.append((j, lines[j]))
            if any(re.match(rf"^\s*(explicit\s+)?{name}\s*\(", l) or re.match(r"^\s*private:", l) for _, l in body):
                continue  # not an aggregate
            for j, l in body:
                code = l.split("//", 1)[0]  # a comment may hold parentheses; the code of a function does
                mm = MEMBER.match(l)
                if mm and "(" not in code and "operator" not in code and "no default:" not in l:
                    found.append(f"{path.relative_to(root)}:{j + 1}: {name}::{mm.group(1)} has no default member initializer")
                    continue
                # `T a, b{}, c = 1;`: each declarator of a list needs its own.
                ml = LIST.match(l)
                if ml and "(" not in code and "no default:" not in l:
                    for d in split_top(ml.group(2)):
                        if not re.search(r"(\{.*\}|=)", d):
                            found.append(f"{path.relative_to(root)}:{j + 1}: {name}::{d.strip()} has no default member "
                                         "initializer")
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    found = missing(root)
    if found:
        print("\n".join(found))
        print(f"check_aggregates: {len(found)} public aggregate field(s) without a default (add `{{}}` or `= value`)")
        return 1
    print("check_aggregates: every public aggregate field has a default")
    return 0


if __name__ == "__main__":
    sys.exit(main())
