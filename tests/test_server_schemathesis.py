"""schemathesis against the server's own OpenAPI document: generated requests, valid and invalid.

The document (``/openapi.json``) comes from the typed request models, so schemathesis can
generate bodies for every operation. For each request it checks that the answer is not a
5xx, that its status and content type are documented, and that a JSON body matches the
documented schema (a 400 must be OpenAI's error body); invalid bodies must be refused.

Not checked: that every schema-valid body is accepted (``positive_data_acceptance``). Some
are refused on purpose, with a 400 naming the field: a JSON Schema keyword outside lab-08's subset,
``logprobs: true`` and other features a scripted model cannot honour, a prompt over the context. A quarter of the
generated bodies keep the model name schemathesis invented (a 404 to check); the rest
ask for the served model, so generation itself runs too.

Bounded: a fixed number of examples per operation, derandomized, on 127.0.0.1 only.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from mini_vllm.labs import load_lab
from mini_vllm.serving import MODEL_NAME, BackgroundServer, build_engine

pytestmark = pytest.mark.slow  # a fuzzer over every endpoint (13 s of CPU): make check runs it

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          negative_data_rejection]


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    engine = build_engine("byte", max_model_len=2048)  # byte tokens: a generated prompt's length is its size
    with BackgroundServer(engine, pipeline=load_lab("lab-02", "solution")) as running:
        yield running


@pytest.fixture(scope="module")
def api(server: BackgroundServer) -> schemathesis.BaseSchema:
    config = schemathesis.Config.from_dict({"phases": {"coverage": {"enabled": True}},
                                            "generation": {"mode": "all"}})
    return schemathesis.openapi.from_url(f"http://127.0.0.1:{server.port}/openapi.json", config=config)


schema = schemathesis.pytest.from_fixture("api")


@schema.parametrize()
@settings(max_examples=15, derandomize=True, deadline=None, database=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
def test_generated_requests_get_documented_answers(case: schemathesis.Case) -> None:
    positive = case.meta is not None and case.meta.generation.mode.value == "positive"
    if positive and isinstance(case.body, dict) and "model" in case.body and len(repr(case.body)) % 4:
        case.body["model"] = MODEL_NAME
    case.call_and_validate(checks=CHECKS, timeout=30)
