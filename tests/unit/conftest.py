"""Fixtures the unit tests share."""

from tests.support.fake_vllm import fake_vllm  # noqa: F401 (a FAKE vLLM server on 127.0.0.1)
