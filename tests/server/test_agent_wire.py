"""The chat, Messages and Responses streams on the wire: a client that goes away cancels the job,
and a quiet engine gets keep-alives in each API's own form."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.server.conftest import API_KEY, serve

BODIES = {
    "/chat/completions": {"model": "slow", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    "/messages": {"model": "slow", "max_tokens": 500, "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    "/responses": {"model": "slow", "stream": True, "input": "hi"},
}


@pytest.mark.parametrize("path", BODIES)
def test_disconnect_cancels_the_job(workspace, path):
    for server in serve(workspace, "slow"):
        engine = server.app.state.model.engine
        with httpx.stream("POST", server.v1 + path, headers={"x-api-key": API_KEY}, json=BODIES[path],
                          timeout=30) as response:
            lines = response.iter_lines()
            while "tick" not in next(lines):
                pass
            assert engine.active_jobs() == 1
        deadline = time.monotonic() + 2  # the whole answer would take 8 s
        while engine.active_jobs() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert engine.active_jobs() == 0


@pytest.mark.parametrize(("path", "keep_alive"), [("/messages", 'event: ping\r\ndata: {"type":"ping"}'),
                                                  ("/responses", ": ping - ")])
def test_keep_alives_while_the_engine_is_silent(workspace, path, keep_alive):
    for server in serve(workspace, "slow", "--sse-ping-interval", "0.01"):
        with httpx.stream("POST", server.v1 + path, headers={"x-api-key": API_KEY},
                          json={**BODIES[path], "max_tokens": 5, "max_output_tokens": 5}, timeout=30) as response:
            body = response.read().decode()
        assert any(frame.startswith(keep_alive) for frame in body.split("\r\n\r\n"))
