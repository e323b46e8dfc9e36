"""`generate --release R` of a serving release: its vLLM server (a Deployment, a RayService or a
LeaderWorkerSet) asked over vLLM's OpenAI-compatible API, through a port-forward of the
release's Service, with the API key read from the Secret its pods read (never printed)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from launcher.client.serve.status import SERVER as COMPONENT
from launcher.core.errors import UsageError

API_KEY_ENV = "VLLM_API_KEY"  # what the chart sets from vllm.apiKey's Secret


@dataclass(frozen=True)
class Ask:
    prompt: str
    max_tokens: int = 32
    temperature: float = 1.0
    seed: int = 0
    chat: bool = False


def api_key_ref(pods: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(Secret, key) the server's pods read their API key from."""
    for pod in pods:
        for container in pod["spec"].get("containers", []):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if env.get("name") == API_KEY_ENV and ref:
                    return ref["name"], ref["key"]
    return None


def _call(url: str, key: str, body: dict | None = None, timeout: float = 300) -> dict:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:
        detail = e.read().decode(errors="replace")[:300]
        fix = (
            "the Secret the pods read holds another key than the server was started with: "
            "restart the server's pods after changing it"
            if e.code == 401
            else f"see the server's log: kubectl logs -l app.kubernetes.io/component={COMPONENT}"
        )
        raise UsageError(url, f"answered HTTP {e.code} {detail}", fix) from None


def ask(url: str, key: str, request: Ask) -> tuple[str, dict]:
    """(the model's name, vLLM's answer) for one completion, or a chat turn with `chat`."""
    models = [m["id"] for m in _call(f"{url}/v1/models", key)["data"]]
    if not models:
        raise UsageError(url, "serves no model yet", "wait until it is Ready (status --release)")
    model = models[0]
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "seed": request.seed,
    }
    if request.chat:
        body["messages"] = [{"role": "user", "content": request.prompt}]
        return model, _call(f"{url}/v1/chat/completions", key, body)
    body["prompt"] = request.prompt
    return model, _call(f"{url}/v1/completions", key, body)


def answer_text(answer: dict) -> str:
    choice = answer["choices"][0]
    return choice["message"]["content"] if "message" in choice else choice["text"]


def generate(release: str, namespace: str, request: Ask, dry_run: bool = False) -> int:
    from launcher.client.release.helm_release import (
        find_service,
        get_items,
        port_forward,
        secret_value,
    )

    selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component={COMPONENT}"
    ref = api_key_ref(get_items(namespace, "pods", "-l", selector, dry_run=dry_run))
    if ref is None and not dry_run:
        raise UsageError(
            "--release",
            f"release {release!r} has no vLLM server pods in namespace {namespace!r}",
            f"for a training release name the run (--run RUN); for a serving one, "
            f"`tpu-launcher status --release {release}` says where it stands",
        )
    secret, item = ref or ("<secret>", "<key>")
    key = secret_value(namespace, secret, item, "read the server's API key", dry_run)
    service, port = find_service(release, namespace, COMPONENT, dry_run)
    with port_forward(namespace, f"service/{service}", port, dry_run) as url:
        if dry_run:
            print(f"POST {url}/v1/{'chat/' if request.chat else ''}completions")
            return 0
        model, answer = ask(url, key, request)
    print(f"{model} (release {release}): {answer_text(answer)}")
    usage = answer.get("usage") or {}
    if usage:
        print(
            f"tokens: prompt {usage.get('prompt_tokens')}, completion "
            f"{usage.get('completion_tokens')}"
        )
    return 0
