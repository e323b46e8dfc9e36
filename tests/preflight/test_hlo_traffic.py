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
