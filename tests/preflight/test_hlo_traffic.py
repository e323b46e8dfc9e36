"""hlo_traffic on real compiled programs: JAX compiles a psum inside a fori_loop for 4 CPU
devices, and the counts must follow the loop's trip count (XLA's cost analysis sees one)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from launcher.preflight.hlo_traffic import step_traffic

pytestmark = pytest.mark.preflight

PROGRAM = """
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
trips, n = int(sys.argv[1]), int(sys.argv[2])
mesh = jax.make_mesh((4,), ("x",))
def per_shard(x):
    body = lambda i, c: jnp.sin(c) + jax.lax.psum(c, "x")
    return jax.lax.psum(jax.lax.fori_loop(0, trips, body, x), "x")
f = jax.jit(jax.shard_map(per_shard, mesh=mesh, in_specs=P("x"), out_specs=P()))
x = jax.device_put(jnp.ones((4 * n,), jnp.float32), NamedSharding(mesh, P("x")))
print(f.lower(x).compile().as_text())
"""


def compiled_hlo(trips: int, n: int) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(trips), str(n)],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


@pytest.mark.parametrize(("trips", "n"), [(7, 1024), (3, 4096)])
def test_collectives_in_a_loop_count_once_per_trip(trips, n):
    traffic = step_traffic(compiled_hlo(trips, n), num_devices=4)
    assert traffic.loop_trip_counts == [trips]
    assert traffic.ops == trips + 1  # the loop's psums and the last one
    # ring all-reduce of n float32 over 4 devices: 2 x bytes x 3/4 each
    assert traffic.bytes_per_device == (trips + 1) * 2 * (4 * n) * 3 / 4
    assert traffic.by_kind == {"all-reduce": traffic.bytes_per_device}
    # HBM traffic grows with the trips too (the loop body's reads and writes)
    assert traffic.hbm_bytes > traffic.hbm_bytes_unrolled_once


def test_no_entry_computation_is_an_error():
    with pytest.raises(ValueError, match="ENTRY"):
        step_traffic("HloModule empty\n", num_devices=4)


SLICES_PROGRAM = """
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
n = int(sys.argv[1])
# Two slices of two devices, the slice axis outermost as in MaxText's hybrid mesh.
mesh = jax.make_mesh((2, 2), ("slices", "chips"))
def per_shard(x, y):
    return jax.lax.psum(x, "slices"), jax.lax.psum(y * 2, "chips")
f = jax.jit(jax.shard_map(per_shard, mesh=mesh, in_specs=(P("slices"), P("chips")),
                          out_specs=(P(), P())))
x = jax.device_put(jnp.ones((2 * n,), jnp.float32), NamedSharding(mesh, P("slices")))
y = jax.device_put(jnp.ones((2 * 2 * n,), jnp.float32), NamedSharding(mesh, P("chips")))
print(f.lower(x, y).compile().as_text())
"""


def test_on_several_slices_a_collective_across_them_is_dcn_traffic_the_others_ici():
    n = 4096
    hlo = subprocess.run(
        [sys.executable, "-c", SLICES_PROGRAM, str(n)], capture_output=True, text=True, check=True
    ).stdout
    traffic = step_traffic(hlo, num_devices=4, devices_per_slice=2)
    # each psum is a ring all-reduce over 2 devices: 2 x bytes x 1/2
    assert traffic.dcn_bytes == 4 * n  # n float32 across the slices
    assert traffic.bytes_per_device == 2 * 4 * n  # 2n float32 within each slice
    one_slice = step_traffic(hlo, num_devices=4)
    assert one_slice.dcn_bytes == 0 and one_slice.bytes_per_device == 3 * 4 * n


@pytest.mark.parametrize(
    ("groups", "across"),
    [
        ("replica_groups={{0,2},{1,3}}", True),
        ("replica_groups={{0,1},{2,3}}", False),
        ("replica_groups=[2,2]<=[2,2]T(1,0)", True),  # [[0,2],[1,3]]
        ("replica_groups=[2,2]<=[4]", False),  # [[0,1],[2,3]]
        ("source_target_pairs={{0,1},{1,0},{2,3},{3,2}}", False),
        ("source_target_pairs={{0,2},{2,0}}", True),
    ],
)
def test_each_way_xla_writes_groups_is_read_for_the_slices_it_spans(groups, across):
    op = "collective-permute" if "pairs" in groups else "all-reduce"
    hlo = (
        "HloModule m\nENTRY %main (p: f32[1024]) -> f32[1024] {\n"
        "  %p = f32[1024]{0} parameter(0)\n"
        f"  ROOT %c = f32[1024]{{0}} {op}(%p), channel_id=1, {groups}, to_apply=%add\n}}\n"
    )
    traffic = step_traffic(hlo, num_devices=4, devices_per_slice=2)
    assert (traffic.dcn_bytes > 0, traffic.bytes_per_device > 0) == (across, not across)


def test_a_megascale_send_between_slices_is_dcn_traffic():
    """A multi-slice compile is one slice's program: what crosses to the other slices leaves
    through the host (XLA's Megascale runtime), a `send` per transfer, as libtpu writes it."""
    attrs = (
        'is_host_transfer=true, frontend_attributes={_xla_host_transfer_handler_name="xla_'
        'megascale_runtime",_xla_megascale_reduce_operation="SUM",_xla_megascale_target='
        '"{1,2}x{0:7}",_xla_megascale_transfer_type="ALL_REDUCE"}'
    )
    hlo = (
        "HloModule m\nENTRY %main (p: bf16[1024]) -> bf16[1024] {\n"
        "  %p = bf16[1024]{0} parameter(0)\n  %t = token[] after-all()\n"
        f"  %send = (bf16[1024]{{0}}, u32[], token[]) send(%p, %t), channel_id=3, {attrs}\n"
        "  ROOT %c = bf16[1024]{0} copy(%p)\n}\n"
    )
    traffic = step_traffic(hlo, num_devices=8)
    assert traffic.dcn_bytes == 2 * 2048 * 1 / 2  # ring all-reduce of 2 KiB over 2 slices
    assert traffic.bytes_per_device == 0
