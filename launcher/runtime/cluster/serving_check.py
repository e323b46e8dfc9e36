"""`helm test`'s check of a vLLM release: the OpenAI-compatible endpoint refuses a request
without the API key, and with it lists the model and answers a completion.

VLLM_API_KEY=<key> python -m launcher.runtime serving-check \
    --url http://<release>-vllm:8000 --model <name>
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

PROMPT = "The capital of France is"
API_KEY_ENV = "VLLM_API_KEY"  # vLLM's own name for its --api-key; the chart sets it from a Secret


def _call(url: str, body: dict | None = None, timeout: float = 60, key: str | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=data, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)


def completion(url: str, model: str, max_tokens: int = 8, key: str | None = None) -> str:
    """The text the server generated for PROMPT (greedy, so the same model answers the same)."""
    body = {"model": model, "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0}
    answer = _call(f"{url.rstrip('/')}/v1/completions", body, key=key)
    return answer["choices"][0]["text"]


def _refuses_without_key(url: str) -> str | None:
    """None when the endpoint answers 401 to a request without the key, else what it did."""
    try:
        _call(f"{url.rstrip('/')}/v1/models")
    except urllib.error.HTTPError as e:
        return None if e.code == 401 else f"answered HTTP {e.code}, not 401"
    return "answered it"


def check(url: str, model: str, timeout: float = 300, key: str | None = None) -> int:
    key = key if key is not None else os.environ.get(API_KEY_ENV)
    if not key:
        print(
            f"serving-check: no API key ({API_KEY_ENV} is empty); the chart sets it from "
            "vllm.apiKey.secretName",
            file=sys.stderr,
        )
        return 1
    deadline = time.monotonic() + timeout
    while True:
        try:
            served = [m["id"] for m in _call(f"{url.rstrip('/')}/v1/models", key=key)["data"]]
            break
        except urllib.error.HTTPError as e:
            why = (
                "the Secret named by vllm.apiKey.secretName holds another key than the server's"
                if e.code == 401
                else "see the server's log (kubectl logs)"
            )
            print(
                f"serving-check: GET {url}/v1/models with the API key answered HTTP {e.code}; "
                + why,
                file=sys.stderr,
            )
            return 1
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
    if problem := _refuses_without_key(url):
        print(
            f"serving-check: a request to {url}/v1/models without the API key {problem}: the "
            "server is open to anyone who reaches it; it must run with --api-key "
            "(vllm.apiKey.secretName sets VLLM_API_KEY)",
            file=sys.stderr,
        )
        return 1
    if model not in served:
        print(
            f"serving-check: {url} serves {served}, not {model!r}; requests must name a served "
            "model (vllm.servedModelName)",
            file=sys.stderr,
        )
        return 1
    try:
        text = completion(url, model, key=key)
    except (urllib.error.URLError, OSError, KeyError, IndexError, ValueError) as e:
        print(f"serving-check: POST {url}/v1/completions failed: {e}", file=sys.stderr)
        return 1
    if not text:
        print(f"serving-check: {model} answered an empty completion", file=sys.stderr)
        return 1
    print(
        f"serving-check: {url} refuses a request without the API key; with it, {model} "
        f"completed {PROMPT!r} with {text!r}"
    )
    return 0
