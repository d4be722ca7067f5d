"""The scripted engine's tokenizer is bounded: prompts from clients cannot grow it without end."""

from __future__ import annotations

from tabby_fixed.engine.scripted import ScriptedEngine
from tests.test_scripted import folder_with


def test_the_vocabulary_stops_growing_and_text_still_round_trips(tmp_path):
    engine = ScriptedEngine(folder_with(tmp_path, {"responses": [], "default": "x"}))
    words = " ".join(f"w{i}" for i in range(70_000))  # more distinct words than the vocabulary holds
    assert engine.decode(engine.encode(words)) == words
    fresh = engine.encode("never-seen")
    assert len(fresh) == len("never-seen")  # spelled by character: nothing new is kept
    assert engine.decode(fresh) == "never-seen"
    known = engine.encode("w5 w6")
    assert len(known) == 3 and engine.encode("w5 w6") == known  # earlier words keep their ids


def test_a_long_word_is_spelled_not_remembered(tmp_path):
    engine = ScriptedEngine(folder_with(tmp_path, {"responses": [], "default": "x"}))
    word = "y" * 10_000
    assert len(engine.encode(word)) == 10_000 and engine.decode(engine.encode(word)) == word
