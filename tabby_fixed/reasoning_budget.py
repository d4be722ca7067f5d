"""The reasoning budget: after so many reasoning tokens, the model is made to stop thinking.

As upstream: the budget comes from the request (``reasoning_budget_tokens`` and its aliases,
then ``reasoning.max_tokens``), else from the model's ``reasoning_budget_tokens``; a negative or
missing value at one level defers to the next, and none means no cap. When a job's reasoning
reaches the budget, the engine forces ``reasoning_budget_message`` followed by the end-of-reasoning
tag into the output, and the model continues from there with its answer.

Each engine follows its job's text with a ``BudgetWatch`` (no HTTP or engine knowledge here).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReasoningBudget:
    """What an engine needs to enforce one job's budget."""

    tokens: int  # most reasoning tokens; 0 ends reasoning as soon as it starts
    injection: str  # forced into the output when the budget is spent: the message, then the end tag
    start_tag: str
    end_tag: str
    starts_inside: bool  # the prompt leaves the model inside an opened reasoning block
    #: Tags that also end reasoning (a tool call's opening tag, which the output parser treats so):
    #: nothing is forced into a call.
    exit_tags: tuple[str, ...] = ()


def chosen_budget(*levels: int | None) -> int | None:
    """The first level that sets a budget; negative values mean "not set here", as upstream."""
    return next((level for level in levels if level is not None and level >= 0), None)


class BudgetWatch:
    """Follows one job's output, piece by piece, and says once when the budget is spent.

    Reasoning is tracked by its tags, including tags split across pieces. Tokens count while the
    output is inside reasoning; the piece that opens reasoning does not count, the one that closes
    it does not either. The budget is not called spent while the text ends in what may become a
    closing tag.
    """

    def __init__(self, budget: ReasoningBudget) -> None:
        self.budget = budget
        self.inside = budget.starts_inside
        self.spent = 0
        self.fired = False
        self._tail = ""  # the end of the text seen, long enough to hold a split tag

    def due_at_start(self) -> bool:
        """A zero budget for a prompt that opens reasoning: force the end before any token."""
        return self._fire() if self.inside and self.budget.tokens == 0 else False

    def feed(self, text: str, tokens: int) -> bool:
        """True exactly once: when this piece brings the reasoning to its budget."""
        if self.fired:
            return False
        was_inside = self.inside
        seen = self._tail + text
        closing = (self.budget.end_tag, *self.budget.exit_tags)
        opened, closed = seen.rfind(self.budget.start_tag), max(seen.rfind(tag) for tag in closing)
        if opened >= 0 or closed >= 0:
            self.inside = opened > closed
        keep = max(len(tag) for tag in (self.budget.start_tag, *closing)) - 1
        self._tail = seen[-keep:] if keep else ""
        if was_inside and self.inside:
            self.spent += tokens
        # Not while the text may be opening a closing tag: the model may be ending on its own,
        # or starting a call, and forced text would land inside the tag.
        closing_soon = any(seen.endswith(tag[:size]) for tag in closing for size in range(1, len(tag)))
        if self.inside and self.spent >= self.budget.tokens and not closing_soon:
            return self._fire()
        return False

    def _fire(self) -> bool:
        self.fired = True
        return True
