"""Our parser passes every conformance case, in both modes (the same cases upstream-check runs)."""

from __future__ import annotations

import pytest

from tabby_fixed.toolcalls import ToolCallParser
from tabby_fixed.toolcalls.conformance import CASES, TOOLS, ConformanceCase, mismatch
from tests.support import parse_both


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_conformance_case(case: ConformanceCase):
    result = parse_both(ToolCallParser(case.tool_format, TOOLS), case.text, random_count=4)
    assert mismatch(case, [(c.name, c.arguments_json) for c in result.tool_calls], result.content) is None


def test_mismatch_reports_type_changes():
    case = CASES[0]
    assert "expected" in mismatch(case, [("write_file", '{"path": "p", "content": 123}')])
    assert "not JSON" in mismatch(case, [("write_file", "{")])
    assert "expected content" in mismatch(case, [], "<tool_call>")
