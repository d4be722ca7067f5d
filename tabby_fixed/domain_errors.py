"""What can go wrong below the server, said without HTTP.

The pipeline (chat, engines, output constraints) raises these; each names the request field it
concerns when it knows it. The server turns them into each API's error body in one place
(``server/failures.py``), so no status code or error shape is decided down here.
"""

from __future__ import annotations


class DomainError(Exception):
    """A request the pipeline cannot serve as written. ``field`` is the request field at fault;
    None when only the route knows it (which input the prompt was made from)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class ContextTooLong(DomainError):
    """The prompt alone fills the model's context."""

    def __init__(self, prompt_tokens: int, max_seq_len: int) -> None:
        super().__init__(f"This model's maximum context length is {max_seq_len} tokens, but the prompt is "
                         f"{prompt_tokens} tokens. Shorten the conversation or start a new one.")
        self.prompt_tokens = prompt_tokens
        self.max_seq_len = max_seq_len


class NoChatTemplate(DomainError):
    """The model has no chat template, so messages cannot become a prompt."""


class TemplateFailed(DomainError):
    """The chat template could not render the messages."""


class ArgumentsNotJson(DomainError):
    """A tool call in the history has arguments that are not JSON, and the template needs an object."""


class ReservedTemplateVariable(DomainError):
    """A template variable the request may not set, because the request's own fields give it."""


class ImagesUnsupported(DomainError):
    """The request carries images and the model has no vision tower."""


class ImageUnreadable(DomainError):
    """An image in the request could not be decoded."""


class ConstraintRejected(DomainError):
    """An output constraint (schema, regex, grammar) the constrained decoder cannot use."""
