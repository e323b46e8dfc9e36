"""`helm test`'s check of a vLLM release: the OpenAI-compatible endpoint lists the model and
answers a completion.

tpu-launcher serving-check --url http://<release>-vllm:8000 --model <served model name>
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request

PROMPT = "The capital of France is"


def _call(url: str, body: dict | None = None, timeout: float = 60) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)


def completion(url: str, model: str, max_tokens: int = 8) -> str:
    """The text the server generated for PROMPT (greedy, so the same model answers the same)."""
    body = {"model": model, "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0}
    answer = _call(f"{url.rstrip('/')}/v1/completions", body)
    return answer["choices"][0]["text"]


def check(url: str, model: str, timeout: float = 300) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            served = [m["id"] for m in _call(f"{url.rstrip('/')}/v1/models")["data"]]
            break
        except (urllib.error.URLError, OSError) as e:
            if time.monotonic() > deadline:
                print(
                    f"serving-check: {url} did not answer in {timeout:.0f}s ({e}); the model "
                    "may still be loading (kubectl get pods: is it Ready?) or the pod is not "
                    "scheduled (kubectl describe pod: TPU nodes of the slice's type?)",
                    file=sys.stderr,
                )
                return 1
            time.sleep(max(0.0, min(5.0, deadline - time.monotonic())))
    if model not in served:
        print(
            f"serving-check: {url} serves {served}, not {model!r}; requests must name a served "
            "model (vllm.servedModelName)",
            file=sys.stderr,
        )
        return 1
    try:
        text = completion(url, model)
    except (urllib.error.URLError, OSError, KeyError, IndexError, ValueError) as e:
        print(f"serving-check: POST {url}/v1/completions failed: {e}", file=sys.stderr)
        return 1
    if not text:
        print(f"serving-check: {model} answered an empty completion", file=sys.stderr)
        return 1
    print(f"serving-check: {model} at {url} completed {PROMPT!r} with {text!r}")
    return 0
