"""The launcher's own client of Ray's job API: the working directory it uploads is one Ray's
own unpacking (ray._private.runtime_env.packaging, Ray 2.60) lays out as the user's directory,
and its name changes with the content and only with it. (Submit, logs, status, list and stop
against a real dashboard: tests/e2e.)"""

from __future__ import annotations

import pytest

from launcher.client.ray_jobs_api import PACKAGE_PREFIX, JobInfo, package_zip

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
