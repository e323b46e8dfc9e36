"""helm test's check of a vLLM release, against a FAKE vLLM: a stand-in for the OpenAI-compatible
server (vLLM's TPU backend needs a TPU), answering /v1/models and /v1/completions on 127.0.0.1
with the response shapes of the OpenAI API that vLLM serves, and with its --api-key rule: a /v1/
request without `Authorization: Bearer <key>` gets 401 (vLLM's api_server: its auth middleware)."""

from __future__ import annotations

import pytest

from launcher.runtime.cluster.serving_check import PROMPT, check
from tests.support.fake_vllm import KEY, FakeVllm

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", KEY)  # as the chart's test pod gets it from the Secret


def test_passes_when_the_served_model_completes(fake_vllm, capsys):
    assert check(fake_vllm, "demo", timeout=5) == 0
    (request,) = FakeVllm.requests
    assert request["model"] == "demo" and request["prompt"] == PROMPT
    assert request["temperature"] == 0  # greedy: the same model answers the same
    assert "' Paris'" in capsys.readouterr().out


def test_names_the_served_models_when_the_name_is_wrong(fake_vllm, capsys):
    assert check(fake_vllm, "llama", timeout=5) == 1
    assert "serves ['demo'], not 'llama'" in capsys.readouterr().err


def test_an_empty_completion_fails(fake_vllm, capsys, monkeypatch):
    monkeypatch.setattr(FakeVllm, "completion", "")
    assert check(fake_vllm, "demo", timeout=5) == 1
    assert "empty completion" in capsys.readouterr().err


def test_a_server_that_never_answers_is_named():
    assert check("http://127.0.0.1:9", "demo", timeout=0.1) == 1  # discard port: nothing listens


def test_fails_without_the_api_key(fake_vllm, capsys, monkeypatch):
    monkeypatch.delenv("VLLM_API_KEY")
    assert check(fake_vllm, "demo", timeout=5) == 1
    assert "no API key (VLLM_API_KEY is empty)" in capsys.readouterr().err


def test_fails_with_another_key(fake_vllm, capsys, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "not-the-key")
    assert check(fake_vllm, "demo", timeout=5) == 1
    assert "HTTP 401; the Secret named by vllm.apiKey.secretName" in capsys.readouterr().err
    assert FakeVllm.requests == []  # nothing was generated


def test_fails_when_the_server_answers_without_a_key(fake_vllm, capsys, monkeypatch):
    """A server started without --api-key serves anyone: the check must not pass it."""
    monkeypatch.setattr(FakeVllm, "api_key", None)
    assert check(fake_vllm, "demo", timeout=5) == 1
    assert "without the API key answered it" in capsys.readouterr().err
