"""Bearer token on and off, on the real API in-process (token read from the app's settings)."""

from __future__ import annotations

import pytest

from tests.api import api_client
from tests.conftest import make_runtime

# /feedback for an unknown id answers 404 once past the token check.
FEEDBACK = {"request_id": "unknown-id", "rating": 1}


@pytest.fixture(scope="module")
def runtime(settings, db, demo_kb):
    return make_runtime(settings, db, demo_kb)


@pytest.fixture
def guarded(settings, runtime):
    with api_client(settings.model_copy(update={"api_token": "s3cret-token"}), runtime) as client:
        yield client


@pytest.mark.parametrize("header", [None, "Bearer wrong", "Basic s3cret-token", "s3cret-token", "Bearer "])
def test_token_required_when_set(guarded, header):
    headers = {"Authorization": header} if header else {}
    for path, body in (("/api/v1/chat", {"message": "hi"}), ("/api/v1/feedback", FEEDBACK)):
        response = guarded.post(path, json=body, headers=headers)
        assert response.status_code == 401
        assert "Authorization: Bearer" in response.json()["error"]
        assert response.headers["www-authenticate"] == "Bearer"


def test_right_token_passes(guarded):
    response = guarded.post("/api/v1/feedback", json=FEEDBACK, headers={"Authorization": "Bearer s3cret-token"})
    assert response.status_code == 404 and "no answer" in response.json()["error"]


def test_no_token_configured_means_open(settings, runtime):
    with api_client(settings, runtime) as client:
        assert client.post("/api/v1/feedback", json=FEEDBACK).status_code == 404


def test_health_stays_open_with_a_token(guarded):
    assert guarded.get("/healthz").status_code == 200


def test_docs_show_typed_request_and_response_schemas(guarded):
    spec = guarded.get("/api/openapi.json").json()
    chat = spec["paths"]["/api/v1/chat"]["post"]
    assert chat["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/ChatIn")
    assert chat["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/ChatOut")
    assert chat["responses"]["429"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorOut")
    feedback = spec["paths"]["/api/v1/feedback"]["post"]
    assert feedback["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/FeedbackIn")
    assert set(spec["components"]["schemas"]["ChatOut"]["properties"]) >= {"request_id", "route", "answer", "sources"}
