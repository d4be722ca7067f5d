"""A tiny sentence-embedding model built on the spot: a 2-layer BERT with random weights and a
word-level tokenizer made with ``tokenizers``, saved as transformers saves any model folder."""

from __future__ import annotations

from pathlib import Path

WORDS = ["the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "house", "red", "blue", "big", "small",
         "quickly", "slowly", "and", "or", "not", "hello", "world", "retrieval", "augmented", "generation",
         "vector", "search"]
MAX_TOKENS = 64
DIMENSIONS = 32


def build_embedding_model(folder: Path, pooling: str | None = None) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    vocab = {word: index for index, word in enumerate(specials + list(WORDS))}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]", model_max_length=MAX_TOKENS).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=DIMENSIONS, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=MAX_TOKENS)
    BertModel(config).save_pretrained(folder)
    if pooling:
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(f'{{"pooling_mode_{pooling}": true}}')
    return folder
