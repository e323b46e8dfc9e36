"""What one compiled step moves, per device, read from its optimized HLO text: bytes over the
interconnect (collectives) and bytes to and from HBM.

XLA's cost analysis counts a while loop's body once, and MaxText scans its layers in one: what
runs inside runs once per layer. This walks the call graph (fusions, calls, while bodies),
multiplies each while body by its trip count (the largest integer constant its condition compares
against, which is how a counted loop of lax.scan / fori_loop reads), and sums.
HBM bytes: each instruction outside fusion bodies reads its operands and writes its result (a
fusion's inside stays on chip), the same rule XLA's cost analysis applies, except that buffers
the compiler placed in on-chip memory (layout memory space S(1)) are not HBM traffic.
Collective bytes:
  all-gather, all-to-all: result bytes x (n-1)/n;  reduce-scatter: operand ~ result x (n-1);
  all-reduce: 2 x bytes x (n-1)/n (ring);  collective-permute: result bytes;
n being the size of the op's replica group.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from math import prod

_DTYPE_BYTES = {
    "pred": 1,
    "s8": 1,
    "u8": 1,
    "f8e4m3fn": 1,
    "f8e5m2": 1,
    "s16": 2,
    "u16": 2,
    "bf16": 2,
    "f16": 2,
    "s32": 4,
    "u32": 4,
    "f32": 4,
    "s64": 8,
    "u64": 8,
    "f64": 8,
}
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([\w\-]+)\((.*)$")
_SHAPE = re.compile(r"\b([a-z]\w*)\[([\d,]*)\](\{[^}]*\})?")
_CALLEE = re.compile(r"\b(calls|to_apply|body|condition)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_CONSTANT = re.compile(r"constant\((\d+)\)")
_GROUPS_LIST = re.compile(r"replica_groups=\{\{([\d,]*)\}")
_GROUPS_IOTA = re.compile(r"replica_groups=\[([\d,]+)\]<=")
_GROUPS_MESH = re.compile(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}")
COLLECTIVES = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")


# Instructions that move no data of their own.
_NO_TRAFFIC = {
    "parameter",
    "constant",
    "tuple",
    "get-tuple-element",
    "bitcast",
    "while",
    "call",
    "conditional",
    "after-all",
    "partition-id",
    "replica-id",
    "iota",
    "collective-permute-done",
    "all-gather-done",
    "all-reduce-done",
    "copy-done",
    "opt-barrier",
}
_OPERAND = re.compile(r"%([\w.\-]+)")


@dataclass
class StepTraffic:
    hbm_bytes: float = 0.0  # per device, loop bodies counted per iteration
    hbm_bytes_unrolled_once: float = 0.0  # the same count with every loop body once (as XLA's)
    bytes_per_device: float = 0.0  # over the interconnect
    ops: int = 0  # executions per step (loop bodies counted per iteration)
    by_kind: dict[str, float] = field(default_factory=dict)
    loop_trip_counts: list[int] = field(default_factory=list)


def _array_bytes(dtype: str, dims: str) -> int:
    return _DTYPE_BYTES.get(dtype, 0) * prod(int(d) for d in dims.split(",") if d)


def _shape_bytes(text: str) -> int:
    """Bytes of the first array shape in `text` (a tuple's first element for *-start ops)."""
    m = _SHAPE.search(text)
    return _array_bytes(m[1], m[2]) if m else 0


def _on_chip(layout: str | None) -> bool:
    """A layout in memory space 1 (`S(1)`): the TPU's on-chip memory, not HBM."""
    return layout is not None and "S(1)" in layout


def _all_bytes(text: str, per_layer: int = 1) -> float:
    """Bytes of every array in a (tuple) shape. In a loop body of `per_layer` trips, an array
    whose leading dimension is the trip count is the layers' stack: one trip touches one slice."""
    total = 0.0
    for dtype, dims, layout in _SHAPE.findall(text):
        if _on_chip(layout):
            continue
        nbytes = _array_bytes(dtype, dims)
        total += (
            nbytes / per_layer if per_layer > 1 and dims.split(",")[0] == str(per_layer) else nbytes
        )
    return total


def _group_size(attrs: str, default: int) -> int:
    if m := _GROUPS_LIST.search(attrs):
        return len([d for d in m[1].split(",") if d]) or default
    if m := _GROUPS_IOTA.search(attrs):
        return int(m[1].split(",")[-1])
    if m := _GROUPS_MESH.search(attrs):
        sizes = dict(re.findall(r"'(\w+)'=(\d+)", m[1]))
        return prod(int(sizes[a]) for a in re.findall(r"'(\w+)'", m[2]) if a in sizes) or default
    return default


def _moved(kind: str, nbytes: int, n: int) -> float:
    if n <= 1 and kind != "collective-permute":
        return 0.0
    if kind == "all-reduce":
        return 2 * nbytes * (n - 1) / n
    if kind == "reduce-scatter":
        return nbytes * (n - 1)
    if kind == "collective-permute":
        return nbytes
    return nbytes * (n - 1) / n


def _callees(rest: str) -> list[tuple[str, str]]:
    """(role, computation) pairs an instruction calls: calls, to_apply, body, condition, branch."""
    pairs = _CALLEE.findall(rest)
    for branches in _BRANCHES.findall(rest):
        pairs += [("branch", c) for c in re.findall(r"%?([\w.\-]+)", branches)]
    return pairs


def step_traffic(hlo: str, num_devices: int) -> StepTraffic:
    # computation -> [(name, shape, opcode, operands and attributes)]
    computations: dict[str, list[tuple[str, str, str, str]]] = {}
    entry, current = None, None
    for line in hlo.splitlines():
        if m := _COMPUTATION.match(line):
            current = m[1]
            computations[current] = []
            if line.startswith("ENTRY"):
                entry = current
        elif current and (m := _INSTRUCTION.match(line)):
            computations[current].append((m[1], m[2], m[3], m[4]))
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")

    def trip_count(condition: str) -> int:
        consts = [
            int(c)
            for _, _, op, rest in computations.get(condition, [])
            if op == "constant"
            for c in _CONSTANT.findall(f"constant({rest}")
        ]
        return max(consts, default=1)

    traffic = StepTraffic()
    # Multiplicity of each computation: how often one step runs it (the call graph is a DAG).
    order, seen = [], set()

    def visit(name: str) -> None:
        if name in seen or name not in computations:
            return
        seen.add(name)
        for _, _, _, rest in computations[name]:
            for _, callee in _callees(rest):
                visit(callee)
        order.append(name)

    visit(entry)
    times = dict.fromkeys(computations, 0)
    body_trips: dict[str, int] = {}
    times[entry] = 1
    for name in reversed(order):  # callers before callees
        for _, _, op, rest in computations[name]:
            calls = _callees(rest)
            callees = dict(calls)
            loop = 1
            if op == "while" and "condition" in callees:
                loop = trip_count(callees["condition"])
                traffic.loop_trip_counts.append(loop)
            if op == "while" and "body" in callees:
                body_trips[callees["body"]] = loop
            for role, callee in calls:
                if callee in times:
                    times[callee] += times[name] * (loop if role in ("body", "condition") else 1)
    fused = {
        callee
        for instrs in computations.values()
        for _, _, op, rest in instrs
        if op == "fusion"
        for role, callee in _CALLEE.findall(rest)
        if role == "calls"
    }
    for name, instructions in computations.items():
        if not times[name]:
            continue
        shapes = {iname: shape for iname, shape, _, _ in instructions}
        trips = body_trips.get(name, 1)
        for _, shape, op, rest in instructions:
            if name not in fused and op not in _NO_TRAFFIC:
                args = rest.split("), ", 1)[0]
                nbytes = _all_bytes(shape, trips) + sum(
                    _all_bytes(shapes.get(o, ""), trips) for o in _OPERAND.findall(args)
                )
                traffic.hbm_bytes += nbytes * times[name]
                traffic.hbm_bytes_unrolled_once += nbytes
            kind = op.removesuffix("-start")
            if kind not in COLLECTIVES:
                continue
            moved = _moved(kind, _shape_bytes(shape), _group_size(rest, num_devices))
            traffic.bytes_per_device += moved * times[name]
            traffic.ops += times[name]
            traffic.by_kind[kind] = traffic.by_kind.get(kind, 0.0) + moved * times[name]
    return traffic
