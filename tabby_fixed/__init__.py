"""tabby-fixed: a TabbyAPI-compatible OpenAI server whose tool calls arrive exactly as the model wrote them."""

__version__ = "0.1.0"
