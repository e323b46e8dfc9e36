"""`tpu-launcher submit` and friends: argument handling and early, clear failures (no cluster
needed)."""

from __future__ import annotations

import argparse
import os

import pytest

from launcher import cli
from launcher.client.jobs import ray_api as ray_jobs_api
from launcher.client.jobs import submit as ray_jobs
from tests.support.launcher_cli import tpu_launcher_here

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        ("http://a:1", {"RAY_ADDRESS": "b:2"}, "http://a:1"),
        (None, {"RAY_API_SERVER_ADDRESS": "c:3", "RAY_ADDRESS": "b:2"}, "http://c:3"),
        (None, {"RAY_ADDRESS": "b:2"}, "http://b:2"),
        (None, {}, ray_jobs_api.default_address()),
    ],
)
def test_address_comes_from_flag_then_env_then_local(flag, env, expected, monkeypatch):
    for key in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert ray_jobs.resolve_dashboard(flag).address == expected


def test_submission_id_is_named_after_the_run():
    assert ray_jobs.submission_id_for("rayjob-8b_4096/tp4").startswith("rayjob-8b-4096-tp4-")


def test_dry_run_shows_the_exact_ray_command(capsys):
    code, out, err = tpu_launcher_here(
        capsys,
        "submit",
        "--dry-run",
        "--submission-id",
        "j1",
        "--",
        "--accelerator_type=v6e",
        "--topology=4x4",
        "base.yml",
        "run_name=r",
        "ici_fsdp_parallelism=4",
        "ici_tensor_parallelism=4",
    )
    assert code == 0, err
    assert (
        f"ray job submit --address {ray_jobs_api.default_address()} --submission-id j1 "
        "--metadata-json "
        '\'{"run_name": "r"}\' --no-wait -- python -m launcher.runtime train '
        "--accelerator_type=v6e --topology=4x4 base.yml run_name=r ici_fsdp_parallelism=4 "
        "ici_tensor_parallelism=4"
    ) in out
    assert "ships with the job" not in out  # base.yml is MaxText's own: in the image


def test_release_is_preflighted_then_port_forwarded_with_its_token(capsys):
    code, out, err = tpu_launcher_here(
        capsys, "submit", "--dry-run", "--release", "tpu", "--namespace", "ml", "--", "run_name=r"
    )
    assert code == 0, err
    assert out.index("preflight: the job on the slice of release tpu") < out.index("port-forward")
    # One read of the release, its token, the port-forward (tests/cluster/test_release_reads.py).
    assert "kubectl -n ml get raycluster,rayjob -l app.kubernetes.io/instance=tpu -o json" in out
    assert "kubectl -n ml get secret '<cluster>' -o 'jsonpath={.data.auth_token}'" in out
    assert out.count(": kubectl -n ml ") == 3, out
    assert "port-forward 'service/<cluster>-head-svc' :8265" in out


def test_a_kubectl_that_cannot_reach_the_cluster_is_shown_as_it_is(capsys, tmp_path, monkeypatch):
    """An expired login, another context, a missing auth plugin: kubectl's own error, not "no
    RayCluster of release tpu" and advice to install it again. (A FAKE kubectl: it answers as
    kubectl does when the API server refuses the login.)"""
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(
        # The kubeconfig names a cluster (its one context, current); the server refuses.
        '#!/bin/sh\n[ "$1" = config ] && { echo staging; exit 0; }\n'
        "echo 'error: You must be logged in to the server (Unauthorized)' >&2\nexit 1\n"
    )
    kubectl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CLUSTER_NAME", raising=False)
    for command in (["list"], ["status"], ["logs"]):
        code, _, err = tpu_launcher_here(capsys, *command, "--release", "tpu")
        assert code == 1, err
        assert err.startswith("cluster: staging (kubectl's current context)\n"), err
        assert "You must be logged in to the server (Unauthorized)" in err
        assert "no RayCluster" not in err and "install" not in err


def test_a_kubectl_with_no_cluster_says_to_get_its_credentials(capsys, tmp_path, monkeypatch):
    """Before `get-credentials` kubectl falls back to localhost:8080: the error says so once,
    with the command that fixes it. (A FAKE kubectl, answering as kubectl does then.)"""
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(
        '#!/bin/sh\n[ "$1" = config ] && { echo staging; exit 0; }\n'
        "echo 'The connection to the server localhost:8080 was refused - did you "
        "specify the right host or port?' >&2\nexit 1\n"
    )
    kubectl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    code, _, err = tpu_launcher_here(capsys, "list", "--release", "tpu")
    assert code == 1, err
    assert "fix: kubectl reaches no cluster" in err
    assert "gcloud container clusters get-credentials" in err
    # With no current context at all (kubectl's `config` fails too), refused before any call.
    kubectl.write_text("#!/bin/sh\necho 'error: current-context is not set' >&2\nexit 1\n")
    monkeypatch.delenv("CLUSTER_NAME", raising=False)
    code, _, err = tpu_launcher_here(capsys, "list", "--release", "tpu")
    assert code == 2, err
    assert "kubectl has no current context" in err and "get-credentials CLUSTER" in err


def test_submit_with_a_values_file_runs_preflight_unless_skipped(capsys):
    args = ["--", "--accelerator_type=v6e", "--topology=4x4", "base.yml", "run_name=r"]
    _, out, _ = tpu_launcher_here(
        capsys, "submit", "--dry-run", "--values", "values/v6e-16.yaml", *args
    )
    assert "[dry-run] preflight: the job on the slice of values/v6e-16.yaml" in out
    _, out, _ = tpu_launcher_here(
        capsys, "submit", "--dry-run", "--values", "values/v6e-16.yaml", "--skip-preflight", *args
    )
    assert "preflight" not in out


def test_the_slice_preflight_approved_is_the_slice_the_job_is_submitted_with(capsys):
    """A job without a slice of its own, aimed at a values file's slice, goes bound to it: the
    head then refuses a cluster of another shape instead of running on whatever it has."""
    args = ["--", "tiny-llama.yml", "run_name=r"]
    code, out, err = tpu_launcher_here(
        capsys, "submit", "--dry-run", "--values", "values/tpu7x-16.yaml", *args
    )
    assert code == 0, err
    assert "-- python -m launcher.runtime train --tpu=tpu7x-16 --num_slices=1 tiny-llama.yml" in out
    assert "bound to tpu7x-16" in out
    # A job naming another slice than its target is refused before anything runs.
    code, _, err = tpu_launcher_here(
        capsys,
        "submit",
        "--dry-run",
        "--values",
        "values/tpu7x-16.yaml",
        "--",
        "--tpu=v6e-16",
        *args[1:],
    )
    assert code == 2 and "its target is tpu7x-16" in err, err


@pytest.mark.parametrize(
    ("accelerator", "topology", "chips", "slices"),
    [("v6e", "4x4", 4, 2), ("v6e", "2x4", 4, 1), ("v6e", "2x4", 8, 1), ("tpu7x", "2x2x2", 4, 1)],
)
def test_a_bound_job_reads_back_as_the_same_slices(accelerator, topology, chips, slices):
    """Whatever shape the target has (v6e-8 as two hosts of 4 included), the bound arguments
    name exactly it."""
    from launcher.client.jobs.slice_target import bind_job_to
    from launcher.core.job.plan import parse_job_args
    from launcher.core.tpu.slices import TpuSlices
    from launcher.core.tpu.table import slice_shape

    target = TpuSlices(slice_shape(accelerator, topology, chips), slices)
    job = parse_job_args(bind_job_to(["tiny-llama.yml", "run_name=r"], target))
    options, maxtext = job.options, list(job.maxtext_argv)
    assert options.slice_request() == target and maxtext == ["tiny-llama.yml", "run_name=r"]


def test_the_head_refuses_a_bound_job_on_a_cluster_of_another_shape():
    """What the binding buys, on the head: plan_job holds --tpu to the Ray cluster's nodes."""
    from launcher.core.errors import UsageError
    from launcher.core.job.plan import parse_job_args, plan_job
    from tests.support.ray_nodes import ray_nodes

    nodes = ray_nodes("v5p", "2x2x2")  # a v5p-16 cluster's nodes, as the local cluster starts
    job = parse_job_args(["--tpu=tpu7x-16", "tiny-llama.yml", "run_name=r"])
    options, maxtext = job.options, list(job.maxtext_argv)
    with pytest.raises(UsageError, match="offers v5p-16"):
        plan_job(options, maxtext, nodes=nodes)
    job = parse_job_args(["--tpu=v5p-16", "tiny-llama.yml", "run_name=r"])
    options, maxtext = job.options, list(job.maxtext_argv)
    assert plan_job(options, maxtext, nodes=nodes).slices.shape.name == "v5p-16"


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    listed = {
        line.split()[0] for line in out.splitlines() if line.startswith("    ") and line.strip()
    }
    assert listed >= {"submit", "logs", "status", "stop", "local", "up", "down", "preflight"}
    assert "train" not in listed and "cluster-check" not in listed  # the cluster's own door


@pytest.mark.parametrize("command", ["train", "train-torch", "cluster-check"])
def test_the_clusters_commands_are_refused_here_with_their_door(capsys, command):
    """`tpu-launcher train` was the cluster's entrypoint once: on a workstation it is refused,
    naming what runs it and where, not "no command"."""
    with pytest.raises(SystemExit) as exited:
        cli.main([command, "--run_name=r"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"`python -m launcher.runtime {command}` in the launcher image" in err, err
    assert "tpu-launcher submit" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["gke", "plan", "--valuez", "v.yaml"], "tpu-launcher gke plan: error: unrecognized "
         "argument --valuez: did you mean --values?"),
        (["status", "--wiat"], "tpu-launcher status: error: unrecognized argument --wiat: "
         "did you mean --wait?"),
        (["list", "extra"], "tpu-launcher list: error: unrecognized argument extra: "
         "`tpu-launcher list --help` lists what it takes"),
    ],
)  # fmt: skip
def test_an_unknown_option_is_answered_by_its_subcommand(capsys, argv, says):
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert says in capsys.readouterr().err


def _options_without_help(parser, name="tpu-launcher"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, subparser in action.choices.items():
                yield from _options_without_help(subparser, f"{name} {sub}")
        elif not action.help and not isinstance(
            action, (argparse._HelpAction, argparse._VersionAction)
        ):
            yield f"{name} {'/'.join(action.option_strings) or action.dest}"


def test_every_option_of_every_command_says_what_it_is():
    from launcher.runtime.commands import parser as clusters_door

    assert list(_options_without_help(cli._parser())) == []
    assert list(_options_without_help(clusters_door())) == []


def test_the_tpu_table_has_a_header_and_a_row_a_slice(capsys):
    from launcher.core.tpu.table import GENERATIONS

    assert cli.main(["tpu-table"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["NAME", "GEN", "TOPOLOGY"]
    assert len(rows) == sum(len(g.topologies) for g in GENERATIONS.values())
    (v6e_16,) = [r.split() for r in rows if r.split()[0] == "v6e-16"]
    assert v6e_16[1:7] == ["v6e", "4x4", "16", "16", "4", "4"]


def test_values_files_are_given_as_helm_takes_them():
    parse = cli._parser().parse_args
    assert parse(["gke", "plan", "-f", "a.yaml", "--values", "b.yaml"]).values == [
        "a.yaml",
        "b.yaml",
    ]
    assert parse(["install", "-f", "a.yaml"]).values == ["a.yaml"]
    for command in ("submit", "preflight"):  # every command reads a list, in order
        ns = parse([command, "-f", "a.yaml", "--values", "b.yaml", "--", "run_name=r"])
        assert ns.values == ["a.yaml", "b.yaml"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--", "run_nam=x"], "run_nam: unknown MaxText config key 'run_nam'"),
        (["--", "steps=3"], "run_name: is required"),
        (["--", "--topolgy=4x4", "run_name=x"], "Unknown command line flag 'topolgy'"),
        (
            ["--", "--accelerator_type=v9", "--topology=4x4", "run_name=x"],
            "unknown TPU accelerator type 'v9'",
        ),
        (
            [
                "--",
                "--accelerator_type=v6e",
                "--topology=4x4",
                "run_name=x",
                "ici_fsdp_parallelism=8",
                "ici_tensor_parallelism=4",
            ],
            "= 32 does not match the 16 devices per slice",
        ),
        (
            ["--address", "http://127.0.0.1:9", "--", "run_name=x"],
            "no Ray dashboard answers at http://127.0.0.1:9",
        ),
    ],
)
def test_user_errors_exit_2_with_the_fix_and_no_traceback(args, says, capsys):
    code, _, err = tpu_launcher_here(capsys, "submit", *args)
    assert code == 2
    assert says in err and "fix:" in err
    assert "Traceback" not in err


def test_the_next_steps_name_the_cluster_the_job_went_to(capsys):
    """After a submission to an --address, the commands it prints ask that address, not the
    local cluster's."""
    code, out, err = tpu_launcher_here(
        capsys, "submit", "--dry-run", "--address", "http://10.0.0.5:8265", "--submission-id",
        "j1", "--", "base.yml", "run_name=r",
    )  # fmt: skip
    assert code == 0, err
    assert "tpu-launcher logs j1 --address http://10.0.0.5:8265 " in out
    assert "tpu-launcher status j1 --address http://10.0.0.5:8265 " in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["sumbit"], "no command 'sumbit': did you mean submit?"),
        (["slice-down", "0"], "no command 'slice-down': did you mean local slice-down"),
        (
            ["data", "prepare", "./c", "--nmae", "x"],
            "unrecognized argument --nmae: did you mean --name?",
        ),
        (
            ["gke", "plan", "--value", "v6e-16"],
            "unrecognized argument --value: did you mean --values?",
        ),
        (["gke", "plna"], "no command 'plna': did you mean plan?"),
    ],
)
def test_a_mistyped_command_or_option_is_named_as_typed_with_the_closest(capsys, argv, says):
    """What was typed, and what it most likely meant: never a required option reported missing
    in its place (`--nmae`), nor a prefix taken for an option (`--value`)."""
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert says in capsys.readouterr().err


def test_run_alone_it_shows_what_there_is(capsys):
    assert cli.main([]) == 0
    assert "submit" in capsys.readouterr().out
