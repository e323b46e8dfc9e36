"""A job's `--data`, checked against the release's own bucket before anything starts: `submit
--release` and `install` of a RayJob read the dataset's manifest from gs://BUCKET/datasets/NAME
(the bucket the release mounts on its hosts), so a misspelt name or a dataset of another
tokenizer costs a second on the workstation, not a RayJob's TPU start-up.

Where this machine cannot read the bucket (no google-cloud-storage, no credentials, no access),
it says so and the job's head checks the data as before."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.core.data.datasets import DATASETS_SUBDIR, MANIFEST, SHARD_SUFFIX, check_dataset_name
from launcher.core.errors import UsageError
from launcher.core.release_facts import BucketMount

if TYPE_CHECKING:  # the plan (MaxText's config rules) is not imported to read a mount
    from launcher.core.job.plan import Job

# The Cloud Storage FUSE CSI driver's name (GKE: "Access Cloud Storage buckets with the Cloud
# Storage FUSE CSI driver"), as the chart's volumes name it.
GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
MAX_READ_BYTES = 50 * 2**20  # a tokenizer's files are a few MB; anything larger is listed


def bucket_of_pod(pod: dict[str, Any]) -> BucketMount | None:
    """The bucket a pod spec's gcsfuse volume mounts, and where its container sees it (a
    serving pod's: a Ray release's own is in its facts, launcher.core.release_facts)."""
    for volume in pod.get("volumes") or []:
        csi = volume.get("csi") or {}
        bucket = (csi.get("volumeAttributes") or {}).get("bucketName")
        if csi.get("driver") != GCSFUSE_DRIVER or not bucket:
            continue
        for container in pod.get("containers") or []:
            for mount in container.get("volumeMounts") or []:
                if mount.get("name") == volume.get("name"):
                    return BucketMount(str(bucket), str(mount["mountPath"]))
    return None


def _datasets_in(client: Any, bucket: str) -> list[str]:
    from launcher.core.gcs import child_prefixes

    return [
        p.rstrip("/").rsplit("/", 1)[-1]
        for p in child_prefixes(client, bucket, f"{DATASETS_SUBDIR}/")
    ]


@contextlib.contextmanager
def data_seen_here(job: Job, where: BucketMount | None) -> Iterator[tuple[str, str] | None]:
    """For plan_job: (a directory holding the manifest of the job's --data as read from the
    bucket, the hosts' view of the bucket); None where there is nothing to read or it cannot be
    read here (said). A dataset the bucket does not hold is refused, naming those it holds."""
    name = job.options.data
    if not name or where is None:
        yield None
        return
    check_dataset_name(name, "--data")
    url = f"gs://{where.bucket}/{DATASETS_SUBDIR}/{name}/{MANIFEST}"
    try:
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc

        from launcher.core.gcs import storage_client
    except ImportError:
        from launcher.core.package_version import pip_install

        print(
            f"note: --data={name} is checked on the job's head, not here (reading {url} needs "
            f"google-cloud-storage: {pip_install('gcs')})",
            flush=True,
        )
        yield None
        return
    try:
        client = storage_client()
        blob = client.bucket(where.bucket).blob(f"{DATASETS_SUBDIR}/{name}/{MANIFEST}")
        text = blob.download_as_text()
    except gexc.NotFound:
        held = _datasets_in(client, where.bucket)
        raise UsageError(
            "--data",
            f"the release's bucket holds no prepared dataset {name!r} (no {url})",
            (f"one it holds: {', '.join(held)}; or " if held else "")
            + f"prepare it: tpu-launcher data prepare SOURCE --name {name} "
            f"--output-dir gs://{where.bucket}",
        ) from None
    except (gexc.GoogleAPIError, auth_exc.GoogleAuthError, OSError) as e:
        print(
            f"note: --data={name} is checked on the job's head, not here (could not read {url}: "
            f"{str(e).splitlines()[0] if str(e) else type(e).__name__})",
            flush=True,
        )
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="tpu-launcher-data-") as seen:
        _mirror(client, where.bucket, name, text, Path(seen))
        print(f"launcher: --data={name}: its manifest read from {url}", flush=True)
        yield seen, where.mount


def _mirror(client: Any, bucket: str, name: str, manifest: str, into: Path) -> None:
    """The dataset as the plan reads it: its manifest and its small files (the tokenizer) read,
    its shards listed (empty files of their names: the plan checks that they exist, not what
    they hold)."""
    prefix = f"{DATASETS_SUBDIR}/{name}/"
    for blob in client.list_blobs(bucket, prefix=prefix):
        path = into / blob.name
        path.parent.mkdir(parents=True, exist_ok=True)
        if blob.name.endswith(SHARD_SUFFIX) or (blob.size or 0) > MAX_READ_BYTES:
            path.touch()
        elif blob.name != prefix + MANIFEST:
            blob.download_to_filename(str(path))
    written = into / prefix / MANIFEST
    written.parent.mkdir(parents=True, exist_ok=True)
    written.write_text(manifest)
