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
n being the size of the op's replica group. On several slices, bytes between slices go over the
data-center network (DCN): XLA compiles one slice's program and sends them through the host
(`send` ops of the Megascale runtime, `_xla_megascale_transfer_type` ALL_REDUCE etc., the slices
in `_xla_megascale_target`), counted by the same rules with n the number of slices. In a program
that spans slices itself, a collective whose group (or a permute whose pairs) spans slices is DCN
traffic too: a device's slice is its partition id // devices per slice (MaxText's hybrid mesh
puts the DCN axes outermost, so a slice's devices are one block of the flattened mesh).
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
# [groups,size]<=[iota dims], transposed by T(...) before the reshape into groups.
_GROUPS_IOTA = re.compile(r"replica_groups=\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?")
_GROUPS_MESH = re.compile(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}")
_MEGASCALE = re.compile(r'_xla_megascale_transfer_type="(\w+)"')
_MEGASCALE_TARGET = re.compile(r'_xla_megascale_target="\{([\d,:]*)\}')
_MEGASCALE_KINDS = {"ALL_REDUCE": "all-reduce", "ALL_GATHER": "all-gather",
                    "REDUCE_SCATTER": "reduce-scatter", "ALL_TO_ALL": "all-to-all"}  # fmt: skip
_PAIRS = re.compile(r"source_target_pairs=\{(\{[\d,{}]*\})\}")
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
    bytes_per_device: float = 0.0  # over the interconnect (ICI)
    dcn_bytes: float = 0.0  # over the data-center network between slices
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


def _first_group(attrs: str) -> list[int]:
    """The members of an op's first replica group; [] if unread (a permute's pairs are read by
    _crosses_slices itself)."""
    if m := _GROUPS_LIST.search(attrs):
        return [int(d) for d in m[1].split(",") if d]
    if m := _GROUPS_IOTA.search(attrs):
        import numpy as np

        groups = [int(d) for d in m[1].split(",")]
        dims = [int(d) for d in m[2].split(",")]
        ids = np.arange(prod(dims)).reshape(dims)
        if m[3]:
            ids = ids.transpose([int(d) for d in m[3].split(",")])
        return [int(i) for i in ids.reshape(groups[0], -1)[0]]
    if m := _GROUPS_MESH.search(attrs):  # mesh['a'=2,'b'=4] {'a'}: a group varies 'a'
        import numpy as np

        sizes = [(a, int(n)) for a, n in re.findall(r"'(\w+)'=(\d+)", m[1])]
        varied = set(re.findall(r"'(\w+)'", m[2]))
        ids = np.arange(prod(n for _, n in sizes)).reshape([n for _, n in sizes])
        first = tuple(slice(None) if a in varied else 0 for a, _ in sizes)
        return [int(i) for i in ids[first].ravel()]
    return []


def _crosses_slices(attrs: str, devices_per_slice: int | None) -> bool:
    if not devices_per_slice:
        return False
    if m := _PAIRS.search(attrs):  # any pair between two slices
        ids = [int(d) for d in re.findall(r"\d+", m[1])]
        pairs = zip(ids[::2], ids[1::2], strict=False)
        return any(a // devices_per_slice != b // devices_per_slice for a, b in pairs)
    return len({d // devices_per_slice for d in _first_group(attrs)}) > 1


def _megascale_slices(attrs: str) -> int:
    """The slices a Megascale transfer spans: the first set of its target ({1,2} or {0:3})."""
    m = _MEGASCALE_TARGET.search(attrs)
    if not m:
        return 2
    count = 0
    for part in m[1].split(","):
        lo, _, hi = part.partition(":")
        count += int(hi) - int(lo) + 1 if hi else 1
    return max(count, 2)


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


def step_traffic(hlo: str, num_devices: int, devices_per_slice: int | None = None) -> StepTraffic:
    """`devices_per_slice`: where the job spans several slices (None: one)."""
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
            if op == "send" and (m := _MEGASCALE.search(rest)):
                kind = _MEGASCALE_KINDS.get(m[1], "collective-permute")
                n = _megascale_slices(rest)
                traffic.dcn_bytes += _moved(kind, _shape_bytes(shape), n) * times[name]
                continue
            kind = op.removesuffix("-start")
            if kind not in COLLECTIVES:
                continue
            moved = _moved(kind, _shape_bytes(shape), _group_size(rest, num_devices))
            if _crosses_slices(rest, devices_per_slice):
                traffic.dcn_bytes += moved * times[name]
            else:
                traffic.bytes_per_device += moved * times[name]
            traffic.ops += times[name]
            traffic.by_kind[kind] = traffic.by_kind.get(kind, 0.0) + moved * times[name]
    return traffic
