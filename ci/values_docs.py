#!/usr/bin/env python3
"""Generates the values reference (a Markdown table) from the `# --` comments in values.yaml.

ci/values_docs.py charts/tpu-stack/values.yaml            # print the table
ci/values_docs.py charts/tpu-stack/values.yaml --check F  # exit 1 if F's table differs
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

BEGIN, END = "<!-- values-table:begin -->", "<!-- values-table:end -->"


def rows(values_path: Path) -> list[tuple[str, str, str]]:
    lines = values_path.read_text().splitlines()
    data = yaml.safe_load("\n".join(lines))
    out, stack, comment = [], [], None
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("# --"):
            comment = stripped[4:].strip()
            continue
        m = re.match(r"^(\s*)([A-Za-z0-9_-]+):", line)
        if not m:
            continue
        depth = len(m[1]) // 2
        stack = [*stack[:depth], m[2]]
        if comment is not None:
            node = data
            for key in stack:
                node = node[key]
            out.append((".".join(stack), json.dumps(node), comment))
            comment = None
    return out


def table(values_path: Path) -> str:
    body = [f"| `{k}` | `{v}` | {d} |" for k, v, d in rows(values_path)]
    return "\n".join(["| Key | Default | Description |", "| --- | --- | --- |", *body])


def main(argv: list[str]) -> int:
    text = table(Path(argv[0]))
    if len(argv) == 3 and argv[1] == "--check":
        doc = Path(argv[2]).read_text()
        current = doc.split(BEGIN, 1)[1].split(END, 1)[0].strip() if BEGIN in doc else ""
        if current != text:
            print(f"{argv[2]}: the values table is stale; run `make docs`", file=sys.stderr)
            return 1
        return 0
    if len(argv) == 3 and argv[1] == "--write":
        path = Path(argv[2])
        doc = path.read_text()
        head, rest = doc.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        path.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")
        return 0
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
