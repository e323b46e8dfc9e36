"""`import hf://ORG/NAME[@REVISION]`: the job's driver downloads the model from the Hugging Face
Hub into the bucket (hf/ORG/NAME) and the import reads it from there like any directory.

The download is network, not memory: it runs in the driver, streaming each file to the bucket's
mount. Only what the import reads is fetched (config.json, the safetensors and their index, the
tokenizer): Llama repos also carry the same weights as `original/*.pth`, as large again. A
download cut short resumes where it stopped (huggingface_hub keeps its progress in the directory,
`.cache/huggingface/`). The token is huggingface_hub's own HF_TOKEN, which the chart sets on every
host from a Kubernetes Secret (`ray.hfToken`); without it only public models come.
"""

from __future__ import annotations

import os
from pathlib import Path

from launcher.core.errors import UsageError
from launcher.core.maxtext.model_imports import HUB_PREFIX, HubModel

TOKEN_ENV = "HF_TOKEN"  # huggingface_hub's own
WANTED = ("config.json", "*.safetensors", "model.safetensors.index.json", "tokenizer*",
          "special_tokens_map.json", "generation_config.json", "chat_template.jinja")  # fmt: skip
_TOKEN_FIX = (
    "give the cluster a token that can read it: accept the model's license on huggingface.co, "
    "then `kubectl create secret generic hf-token --from-literal=token=hf_...` and "
    "`helm upgrade ... --set ray.hfToken.secretName=hf-token`"
)


def download(model: HubModel, target: Path) -> str:
    """Downloads the model's files into `target`; the commit it got. Raises UsageError."""
    import httpx2  # huggingface_hub's HTTP client: its transport errors are no OSError
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"{HUB_PREFIX}{model.repo}@{model.revision}"
    has_token = bool(os.environ.get(TOKEN_ENV))
    try:
        # One call first, for its commit and its errors: snapshot_download hides a refusal
        # behind "not in the local cache".
        commit = HfApi().repo_info(model.repo, revision=model.revision).sha
        assert commit, "the Hub gave no commit"
        print(f"launcher: downloading {where} (commit {commit[:12]}) to {target}", flush=True)
        snapshot_download(
            model.repo, revision=commit, local_dir=target, allow_patterns=list(WANTED)
        )
    except GatedRepoError:
        raise UsageError(
            "SOURCE",
            f"{model.repo} is gated on the Hub (read with a token whose account accepted its "
            "license), and "
            + (
                "the token the cluster has was refused"
                if has_token
                else f"the cluster has no token ({TOKEN_ENV})"
            ),
            _TOKEN_FIX,
        ) from None
    except RevisionNotFoundError:
        raise UsageError(
            "SOURCE",
            f"{model.repo} has no revision {model.revision!r} on the Hub",
            f"name a branch, tag or commit of it ({HUB_PREFIX}{model.repo}@main), or none",
        ) from None
    except RepositoryNotFoundError:
        raise UsageError(
            "SOURCE",
            f"no model {model.repo} on the Hub"
            + ("" if has_token else " (or it is private, and the cluster has no token)"),
            "check the name on huggingface.co; for a private model, " + _TOKEN_FIX,
        ) from None
    except (HfHubHTTPError, LocalEntryNotFoundError, httpx2.HTTPError, OSError) as e:
        raise UsageError(
            "SOURCE",
            f"the cluster could not download {where} from {_endpoint()}: {_first_line(e)}",
            "let the head reach the Hub (egress to huggingface.co and its CDN), or download it "
            f"where you can: `hf download {model.repo} --local-dir NAME`, `gcloud storage cp -r "
            "NAME gs://BUCKET/hf/`, and import hf/NAME",
        ) from None
    return commit


def _endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
