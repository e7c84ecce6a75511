"""Retrieval: text in, ranking out (docs/retrieval.md). Pure: no store, no cryptography.

saihm-protocol "saihm_recall": "Matching is operator-defined; keyword containment is the
baseline." A cell matches a query when it contains every whitespace-separated query term as a
substring, ignoring case (the baseline, kept exactly), or when it shares a term with the query
after Unicode case folding, stop-word removal and Snowball stemming; a conversation turn also
through the turns around it. Matches are ordered by Okapi BM25 (:mod:`saihm.retrieval.bm25`)
with their context in their session, names and corrections (:mod:`saihm.retrieval.context`);
with an embedder, the semantic stage adds the cells nearest in meaning and every candidate is
scored by a weighted sum of the normalised lexical score and cosine
(:mod:`saihm.retrieval.fusion`).
"""

from saihm.retrieval.analysis import Analysis, Query, analyse, analyse_query, matches
from saihm.retrieval.bm25 import K1, B, Bm25, TermIndex
from saihm.retrieval.embed import Embedder, SemanticUnavailable, load_embedder
from saihm.retrieval.fusion import DEFAULT_WEIGHTS, Weights, weighted_sum
from saihm.retrieval.rank import Ranked, rank

__all__ = [
    "DEFAULT_WEIGHTS",
    "K1",
    "Analysis",
    "B",
    "Bm25",
    "Embedder",
    "Query",
    "Ranked",
    "SemanticUnavailable",
    "TermIndex",
    "Weights",
    "analyse",
    "analyse_query",
    "load_embedder",
    "matches",
    "rank",
    "weighted_sum",
]
