"""Text into numbers: vocabularies, batching for language models and translation, and tokenizers."""
