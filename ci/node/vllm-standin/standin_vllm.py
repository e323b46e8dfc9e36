"""A STAND-IN for vLLM's OpenAI-compatible server as a Ray Serve app (vLLM's engine needs a
TPU): what the node tier's RayService test puts in the rendered Ray Serve LLM application's
place. It answers /v1/models and /v1/completions with the OpenAI API's shapes, and keeps vLLM's
--api-key rule as vLLM reads it: the key from the replica's VLLM_API_KEY (the chart sets it on
every pod of the RayService from vllm.apiKey.secretName), a /v1/ request without
`Authorization: Bearer <key>` answered 401, /health open."""

from __future__ import annotations

import os
import socket

from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse


@serve.deployment(ray_actor_options={"num_cpus": 0.1})
class StandInVllm:
    def __init__(self, model: str) -> None:
        self.model = model
        self.key = os.environ.get("VLLM_API_KEY", "")

    async def __call__(self, request: Request) -> JSONResponse:
        path = request.url.path
        if path == "/health":
            return JSONResponse({})
        if self.key and request.headers.get("authorization") != f"Bearer {self.key}":
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        if path == "/v1/models":
            return JSONResponse({"object": "list", "data": [{"id": self.model, "object": "model"}]})
        if path == "/v1/completions" and request.method == "POST":
            body = await request.json()
            # Which host answered: the replica runs on one of the slice's hosts, not the head.
            choice = {
                "index": 0,
                "text": f" (from {socket.gethostname()})",
                "finish_reason": "length",
            }
            usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
            return JSONResponse(
                {
                    "object": "text_completion",
                    "model": body["model"],
                    "choices": [choice],
                    "usage": usage,
                }
            )
        return JSONResponse({"error": "not found"}, status_code=404)


def build(args: dict) -> serve.Application:
    """The app, named as the rendered config names its model (`model`)."""
    return StandInVllm.bind(args["model"])
