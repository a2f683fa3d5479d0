"""The tokenizer families: one protocol, five vocabularies, one door (``families.load_tokenizer``)."""
