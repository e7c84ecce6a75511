"""Text analysis: Unicode case folding, word tokens, stop words, Snowball stemming.

One :class:`Analysis` per cell text, made once when the cell enters the in-memory index and
kept with it; one :class:`Query` per recall. Tokens are runs of Unicode word characters
(``\\w+`` over the case-folded text), so "Dark-Mode" gives "dark" and "mode".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import Stemmer

from saihm.retrieval.stopwords import STOP_WORDS

__all__ = [
    "PERSONAL",
    "Analysis",
    "Query",
    "analyse",
    "analyse_query",
    "contains",
    "matches",
    "stem_terms",
]

# Tokens are runs of word characters; apostrophes inside a word ("user's", "don't") stay with
# it, as the Snowball stop list and stemmer expect; U+2019 is folded to U+0027 first.
_WORD_APOSTROPHE = re.compile(r"\w+(?:'\w+)*")
_STEMMER = Stemmer.Stemmer("english")
# PyStemmer caches recent words by default. Words of cell text are content: with the cache
# off, nothing of an erased cell outlives its entry in saihm's own bounded cache.
_STEMMER.maxCacheSize = 0


#: First- and second-person words (split at apostrophes: "I'm" has "i"): a text that has one
#: speaks as a turn of a dialogue, not as a statement about someone.
PERSONAL = frozenset(
    {"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves"}
    | {"you", "your", "yours", "yourself", "yourselves"}
)


def _tokens(folded: str) -> list[str]:
    return _WORD_APOSTROPHE.findall(folded.replace("\u2019", "'"))


def stem_terms(folded: str) -> list[str]:
    """The stemmed, non-stop-word terms of already case-folded text, in order."""
    return _STEMMER.stemWords([t for t in _tokens(folded) if t not in STOP_WORDS])


@dataclass(frozen=True, slots=True)
class Analysis:
    """One text, analysed: its case-folded form (for containment), its term frequencies after
    stemming and its length in terms (BM25's |d|)."""

    folded: str
    tf: dict[str, int]
    length: int
    #: It reads as a turn of a dialogue: it asks ("?") or speaks in the first or second
    #: person ("I went to the support group"), rather than stating a fact about someone.
    turnlike: bool = False


@dataclass(frozen=True, slots=True)
class Query:
    """One query: its containment terms (case-folded, split on white space, as the baseline
    filter has always split them) and its distinct stemmed non-stop-word terms."""

    text: str
    containment: tuple[str, ...]
    terms: tuple[str, ...]

    @property
    def everything(self) -> bool:
        """Absent or empty (only white space) means all cells (saihm-protocol "saihm_recall")."""
        return not self.containment


def analyse(text: str) -> Analysis:
    """The :class:`Analysis` of one cell's plaintext."""
    folded = text.casefold()
    tf: dict[str, int] = {}
    tokens = _tokens(folded)
    terms = _STEMMER.stemWords([t for t in tokens if t not in STOP_WORDS])
    for term in terms:
        tf[term] = tf.get(term, 0) + 1
    personal = any(t.split("'", 1)[0] in PERSONAL for t in tokens)
    return Analysis(folded=folded, tf=tf, length=len(terms), turnlike="?" in folded or personal)


def analyse_query(text: str | None) -> Query:
    """The :class:`Query` of ``text``; None and "" give the query that matches everything."""
    text = text or ""
    folded = text.casefold()
    return Query(
        text=text,
        containment=tuple(folded.split()),
        terms=tuple(dict.fromkeys(stem_terms(folded))),
    )


def contains(query: Query, analysis: Analysis) -> bool:
    """The baseline: every white-space-separated query term is a substring, ignoring case."""
    text = analysis.folded
    return all(term in text for term in query.containment)


def matches(query: Query | str | None, text: str | Analysis) -> bool:
    """Whether a cell with ``text`` matches ``query`` (docs/retrieval.md "Matching").

    True for the empty query; else when the baseline containment holds or the two share a
    stemmed non-stop-word term.
    """
    q = query if isinstance(query, Query) else analyse_query(query)
    a = text if isinstance(text, Analysis) else analyse(text)
    if q.everything or contains(q, a):
        return True
    return any(term in a.tf for term in q.terms)
