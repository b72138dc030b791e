"""PATCH /agents/{bot}/messages/{id} takes a text as long as /save takes for one message
(MEMORY_POOL_MAX_CHARS), and refuses a longer one as /save does: 413, nothing changed."""

from __future__ import annotations

import pytest

from tests.support.door import MakeApp, client_for, message

URL = "/agents/mythos/messages/m1"


@pytest.mark.parametrize("limit", [None, 100])
def test_patch_takes_what_save_takes_for_one_message(make_app: MakeApp, limit: int | None) -> None:
    """Review: PATCH capped a text at 100,000 characters (422) while /save stored a message of
    up to MEMORY_POOL_MAX_CHARS (1,000,000): a message saved long could not be corrected."""
    overrides = {} if limit is None else {"MEMORY_POOL_MAX_CHARS": limit}
    most = limit or 1_000_000
    with client_for(make_app(**overrides)) as client:
        body = {"bot": "mythos", "messages": [message("m1", "y" * most)]}
        saved = client.post("/save", json=body)
        assert saved.status_code == 202 and saved.json()["accepted"] == 1, saved.text
        edited = client.patch(URL, json={"text": "x" * most})
        assert edited.status_code == 200, edited.text[:300]
        assert edited.json()["outcome"] == "edited"
        over = "x" * (most + 1)
        refused = client.post("/save", json={"bot": "mythos", "messages": [message("m2", over)]})
        assert refused.status_code == 413
        too_long = client.patch(URL, json={"text": over})
        assert too_long.status_code == 413, too_long.text[:300]
        assert too_long.json() == {
            "error": "request_too_large",
            "detail": f"{most + 1} characters of text in one edit; the limit is {most} "
            "(MEMORY_POOL_MAX_CHARS)",
        }
        assert client.patch(URL, json={"text": "x" * most}).json()["outcome"] == "unchanged"


def test_patch_refuses_a_text_of_the_wrong_shape_with_422(make_app: MakeApp) -> None:
    with client_for(make_app()) as client:
        for body in ({}, {"text": 5}, {"text": None}, {"text": "ok", "extra": 1}):
            response = client.patch(URL, json=body)
            assert response.status_code == 422, (body, response.text)
            assert response.json()["error"] == "invalid_request"
