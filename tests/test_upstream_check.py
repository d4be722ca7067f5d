"""The machinery of ``make upstream-check`` without the network: ``scripts/upstream_standin.py`` serving a
stand-in upstream tree whose chat endpoint parses no tool calls at all (everything the model writes comes
back as content), posted to through the OpenAI SDK in both modes. The harness must count the prose case as
passing and every tool-call case as failing, name what went wrong, and print the table. The real run, against
upstream's own app, is the README's ``make upstream-check``.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import upstream_check

# What upstream_standin.py imports from an upstream tree, reduced to a server that answers with the text.
STAND_IN_UPSTREAM = {
    "common/auth.py": "DISABLE_AUTH = False\n",
    "common/model.py": "container = None\n",
    "common/templating.py": "class PromptTemplate:\n    def __init__(self, name, raw_template):\n"
                            "        self.name, self.raw_template = name, raw_template\n",
    "endpoints/server.py": textwrap.dedent('''
        import json
        from types import SimpleNamespace

        from fastapi import FastAPI, Request
        from fastapi.responses import StreamingResponse

        from common import auth, model


        def setup_app(host=None, port=None):
            app = FastAPI()

            @app.post("/v1/chat/completions")
            async def chat(request: Request):
                assert auth.DISABLE_AUTH
                body = await request.json()
                params = SimpleNamespace(messages=[SimpleNamespace(**m) for m in body["messages"]])
                pieces = [g async for g in model.container.stream_generate("id", "prompt", params)]
                text = "".join(g.get("text", "") for g in pieces)
                head = {"id": "x", "created": 0, "model": "stand-in"}
                if not body.get("stream"):
                    message = {"role": "assistant", "content": text}
                    choice = {"index": 0, "message": message, "finish_reason": "stop"}
                    return {**head, "object": "chat.completion", "choices": [choice]}

                async def events():
                    for g in pieces:
                        finish = g.get("finish_reason")
                        delta = {"content": g["text"]} if g.get("text") else {}
                        choice = {"index": 0, "delta": delta, "finish_reason": finish}
                        chunk = {**head, "object": "chat.completion.chunk", "choices": [choice]}
                        yield f"data: {json.dumps(chunk)}\\n\\n"
                    yield "data: [DONE]\\n\\n"

                return StreamingResponse(events(), media_type="text/event-stream")

            return app
    '''),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], list[str]]:
    tree = tmp_path_factory.mktemp("stand-in-upstream")
    for path, text in STAND_IN_UPSTREAM.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    return upstream_check.run_tree(Path(sys.executable), tree, tree)


def test_every_case_is_posted_in_every_mode(results):
    cases = sum(len(outcomes) for outcomes in results.values())
    assert cases == len(upstream_check.CASES) * len(upstream_check.MODES)


def test_text_returned_as_content_passes_only_where_no_call_is_expected(results):
    """Outcomes come per (format, seed) in case order, each case once per mode."""
    modes = len(upstream_check.MODES)
    for (tool_format, seed), outcomes in results.items():
        cases = [c for c in upstream_check.CASES if (c.tool_format, c.seed) == (tool_format, seed)]
        for index, case in enumerate(cases):
            passed = [o == "" for o in outcomes[index * modes:(index + 1) * modes]]
            assert passed == [not case.calls] * modes, case.name


def test_failures_say_what_was_wrong_and_in_which_mode(results):
    failure = results[("glm4_5", "000")][0]
    assert failure.startswith("glm4_5 string 123 (non-streaming): expected content None")
    assert any("(streaming, 1-char chunks)" in o for o in results[("minimax_m2", "001")])


def test_table_shows_both_trees_and_says_whether_patched_passes(results, capsys):
    assert upstream_check.print_table(results, results) is False
    table = capsys.readouterr().out
    assert "qwen3_coder  002" in table and "3/6 FAIL" in table
    assert "glm4_5       002" not in table, "a shape a format does not have gets no row"
    passing = {key: [""] * len(outcomes) for key, outcomes in results.items()}
    assert upstream_check.print_table(results, passing) is True
