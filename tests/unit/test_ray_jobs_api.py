"""The launcher's own client of Ray's job API: the working directory it uploads is one Ray's
own unpacking (ray._private.runtime_env.packaging, Ray 2.60) lays out as the user's directory,
and its name changes with the content and only with it. (Submit, logs, status, list and stop
against a real dashboard: tests/e2e.)"""

from __future__ import annotations

import os

import pytest

from launcher.client.jobs.ray_api import PACKAGE_PREFIX, JobInfo, package_zip

pytestmark = pytest.mark.unit


def _tree(root, files: dict[str, str]):
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_ray_unpacks_the_package_as_the_directory(tmp_path):
    from ray._private.runtime_env.packaging import unzip_package

    src = _tree(
        tmp_path / "src",
        {"job.yml": "steps: 3\n", "data/a.jsonl": "{}\n", "__pycache__/x.pyc": "skip"},
    )
    name, data = package_zip(src, {"__pycache__"})
    assert name.startswith(PACKAGE_PREFIX) and name.endswith(".zip")
    (tmp_path / name).write_bytes(data)
    out = tmp_path / "unpacked"
    unzip_package(tmp_path / name, out, remove_top_level_directory=False, unlink_zip=True)
    found = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert found == {"job.yml", "data/a.jsonl"}
    assert (out / "data" / "a.jsonl").read_text() == "{}\n"


def test_the_package_name_is_its_content(tmp_path):
    a = _tree(tmp_path / "a", {"x.yml": "1"})
    b = _tree(tmp_path / "b", {"x.yml": "1"})
    assert package_zip(a)[0] == package_zip(b)[0]
    (b / "x.yml").write_text("2")
    assert package_zip(a)[0] != package_zip(b)[0]
    (b / "x.yml").write_text("1")
    (b / "y.yml").write_text("1")
    assert package_zip(a)[0] != package_zip(b)[0]


def test_job_details_read_from_the_dashboards_json():
    job = JobInfo.from_json({"submission_id": "s", "status": "FAILED", "message": "boom"})
    assert (job.submission_id, job.status, job.message, job.metadata) == ("s", "FAILED", "boom", {})


NASTY = ["run_name=a;b", "x=$(touch pwned)", "y=`id`", "z='q\"t'", "w=two words", "n=l1\nl2"]


def test_every_word_of_the_entrypoint_arrives_as_one_argument(tmp_path):
    """What submit POSTs (to a stand-in dashboard on 127.0.0.1) is run as Ray's job supervisor
    runs an entrypoint, through a shell (`bash -c`): each word arrives whole, `;`, `$(...)`,
    backticks, quotes, spaces and newlines included, and nothing is executed."""
    import json
    import subprocess
    import sys
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from launcher.client.jobs import ray_api

    posted: list[dict] = []

    class Dashboard(BaseHTTPRequestHandler):
        def do_POST(self):
            posted.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            body = json.dumps({"submission_id": posted[-1]["submission_id"]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Dashboard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        printer = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]
        address = f"http://127.0.0.1:{server.server_address[1]}"
        jobs = ray_api.RayJobs(ray_api.Dashboard(address))
        assert jobs.submit([*printer, *NASTY], "j1", {"run_name": "r"}) == "j1"
    finally:
        server.shutdown()
    ran = subprocess.run(
        ["bash", "-c", posted[0]["entrypoint"]], capture_output=True, text=True, cwd=tmp_path
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == NASTY
    assert not (tmp_path / "pwned").exists()  # $(...) was a word, not a command


def test_a_releases_token_goes_to_its_forwarded_address_only(monkeypatch, tmp_path):
    """`--release` reads the release's token and sends it to the head it forwarded, with that
    dashboard alone: never through this process's environment or a registry of the module
    (where every later client would send it anywhere), and never in a printed dashboard."""
    from launcher.client.jobs import ray_api

    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "none"))
    release = ray_api.Dashboard("http://127.0.0.1:4321/", "s3cret")
    assert release.address == "http://127.0.0.1:4321"
    assert release.headers() == {"Authorization": "Bearer s3cret"}
    assert "s3cret" not in f"{release} {release!r}"
    assert ray_api.Dashboard("http://127.0.0.1:4321").headers() == {}  # same address, no token
    assert ray_api.RayJobs(release).dashboard.headers() == release.headers()
    assert "RAY_AUTH_TOKEN" not in os.environ
    monkeypatch.setenv("RAY_AUTH_TOKEN", "mine")  # Ray's own search, elsewhere
    assert ray_api.Dashboard("http://127.0.0.1:8265").headers() == {"Authorization": "Bearer mine"}


def test_the_end_states_are_rays_own():
    """`status --wait` ends on these and exits with their codes: the pinned Ray's terminal
    states, each with a code of its own (0 the success alone)."""
    from ray.job_submission import JobStatus

    from launcher.client.jobs import ray_api

    assert set(ray_api.ENDED) == {s.value for s in JobStatus if s.is_terminal()}
    assert ray_api.ENDED["SUCCEEDED"] == 0 and len(set(ray_api.ENDED.values())) == 3
