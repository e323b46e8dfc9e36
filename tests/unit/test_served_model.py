"""`generate --release` of a serving release, its HTTP half against a FAKE vLLM (tests/support/
fake_vllm.py: vLLM's TPU backend needs a TPU): the served model is asked by the name it lists, a
completion or a chat turn, with the API key; a wrong key is refused saying why. The kubectl half
(the Secret the pods read, the port-forward) is the cluster tier's."""

from __future__ import annotations

import pytest

from launcher.client.serve.served_model import Ask, answer_text, api_key_ref, ask
from launcher.core.errors import UsageError
from tests.support.fake_vllm import KEY, FakeVllm

pytestmark = pytest.mark.unit


def test_a_completion_of_the_listed_model_with_the_key(fake_vllm):
    model, answer = ask(fake_vllm, KEY, Ask("The capital of France is", 8, 0.0, 3))
    assert (model, answer_text(answer)) == ("demo", " Paris")
    (sent,) = FakeVllm.requests
    assert sent == {
        "path": "/v1/completions",
        "model": "demo",
        "prompt": "The capital of France is",
        "max_tokens": 8,
        "temperature": 0.0,
        "seed": 3,
    }


def test_chat_asks_the_chat_api_as_a_user(fake_vllm):
    _, answer = ask(fake_vllm, KEY, Ask("What is two plus five?", chat=True))
    assert answer_text(answer) == " Paris"
    (sent,) = FakeVllm.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["messages"] == [{"role": "user", "content": "What is two plus five?"}]


def test_a_wrong_key_is_refused_saying_which_secret_to_fix(fake_vllm):
    with pytest.raises(UsageError) as err:
        ask(fake_vllm, "not-the-key", Ask("hi"))
    assert "answered HTTP 401" in err.value.problem
    assert "Secret" in err.value.fix


def test_the_key_is_found_in_the_server_pods_env():
    pod = {
        "spec": {
            "containers": [
                {
                    "env": [
                        {"name": "HOME", "value": "/tmp"},
                        {
                            "name": "VLLM_API_KEY",
                            "valueFrom": {"secretKeyRef": {"name": "vllm-key", "key": "api-key"}},
                        },
                    ]
                }
            ]
        }
    }
    assert api_key_ref([pod]) == ("vllm-key", "api-key")
    assert api_key_ref([{"spec": {"containers": [{"env": []}]}}]) is None
