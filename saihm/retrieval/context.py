"""Context-aware lexical ranking (docs/retrieval.md "Context").

A remembered conversation is a sequence: a reply ("Yes! It was so fun") carries its meaning in
the turns around it. A cell's lexical score is therefore

    score(c) = BM25(c) + NEIGHBOURS * BM25(window(c)) + ANSWER * BM25(asked(c))
               + SESSION * evidence(group(c))

- ``window(c)``: the other visible cells of its group (its holder, session and namespace) within
  :data:`WINDOW` places of it in the order they were written, scored as one document (their
  term frequencies summed, its length their mean length);
- ``asked(c)``: the cell right before ``c`` in its window when that one asks (a "?"): a
  question is answered by the turn after it;
- ``evidence(g)``: the summed IDF of the query terms found anywhere in the group's visible cells;
- a **name** in the query (a capitalised word that is not a stop word and does not start a
  sentence: "Arjun", "Priya") counts ``1 + NAMES`` times in each of them.

A dialogue turn (:func:`reads_as_turn`: a said or did record, or a note that asks or speaks in
the first or second person) that shares no term with the query but sits within the window of
one that does becomes a candidate through its window alone (a reply); any other cell (a
statement of fact) is returned only when it matches by itself (saihm-protocol "saihm_recall":
the query filters), its context only ordering it. A query sharing nothing with any visible cell
still returns nothing.

**Corrections**: among the best :data:`CORRECTION_POOL` candidates, an older note of the same
owner that a newer one *corrects* is ranked just below the newer one: the two
state the same attribute of the same subject (at least two terms in common besides the change
words), the newer says it is a change (one of :data:`CHANGE_WORDS`: "now", "no longer",
"switched", "moved" ...) and gives a value the older lacks (a term of its own). A dialogue turn
(a said or did record, or a note in the first or second person or asking a question: "I went
to the support group", "How was it?") never takes part: a conversation restates what was said
without correcting it.

Pure: the caller passes only items the asker may see (checked item by item by the store), and
the neighbours it offers are drawn from those; an erased, failed or out-of-scope cell is never
an item, so it contributes nothing and is never shown. The neighbour, session and name weights
were chosen on the shipped conversational set's first half and checked on its second; the
answer weight and the corrections rule on LoCoMo's development half (docs/retrieval.md
"Context").
"""

from __future__ import annotations

import heapq
import re
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from saihm.retrieval.analysis import Analysis, Query, contains, stem_terms
from saihm.retrieval.bm25 import Bm25
from saihm.retrieval.rank import Ranked, collection_stats
from saihm.retrieval.stopwords import STOP_WORDS

__all__ = [
    "CHANGE_WORDS",
    "CORRECTION_POOL",
    "DEFAULT",
    "TURN_KINDS",
    "WINDOW",
    "Item",
    "Neighbours",
    "Weights",
    "corrected",
    "corrects",
    "in_order",
    "query_names",
    "rank_in_context",
    "reads_as_turn",
]

WINDOW = 2
#: The kinds of cell that are turns of a conversation record.
TURN_KINDS = frozenset({"said", "did"})
CORRECTION_POOL = 32
#: Words by which a statement says it changes an earlier one (a closed class, like the stop
#: words; compared after stemming).
CHANGE_WORDS = (
    *("now", "longer", "anymore", "instead", "switched", "changed", "new", "became", "become"),
    *("started", "stopped", "quit", "raised", "lowered", "increased", "decreased", "reduced"),
    *("replaced", "moved", "relocated", "updated"),
)
_CHANGE = frozenset(stem_terms(" ".join(CHANGE_WORDS)))
#: Change words that name the attribute they change: moving changes where one lives.
_CHANGES_ATTRIBUTE = {term: "live" for term in stem_terms("moved relocated")}
#: How far below the newer cell a restated older one is placed (a factor on the newer score).
_BELOW = 0.999


@dataclass(frozen=True, slots=True)
class Weights:
    """The weights of the context terms (docs/retrieval.md "Context": how they were chosen)."""

    neighbours: float = 0.4
    session: float = 0.1
    names: float = 0.5
    window: int = WINDOW
    corrections: bool = True
    #: The weight of the turn a cell answers (the one right before it, when it asks).
    answer: float = 0.6


DEFAULT = Weights()


@dataclass(frozen=True, slots=True)
class Item:
    """One visible cell: ``order`` is its leaf index (ties: older first), ``group`` its
    holder's session and namespace (None: no neighbours, e.g. another holder's shared cell),
    ``owner`` the holder it belongs to (corrections only compare cells of one owner) and
    ``turn`` whether it is a turn of a conversation record (kind said or did), the one kind of
    cell that may be returned through its context alone."""

    key: Hashable
    analysis: Analysis
    order: int
    group: Hashable | None = None
    owner: Hashable | None = None
    turn: bool = False


#: The visible items of ``item``'s group within the window around it (itself excluded).
Neighbours = Callable[[Item], Sequence[Item]]

_WORD = re.compile(r"\w+(?:['\u2019]\w+)*|[.?!]")


def query_names(text: str) -> tuple[str, ...]:
    """The stemmed terms of the names in a query: capitalised words that are not stop words
    and do not open a sentence ("How old is Arjun?" -> ("arjun",))."""
    names: list[str] = []
    start = True
    for token in _WORD.findall(text):
        if token in ".?!":
            start = True
            continue
        if not start and token[0].isupper() and token.casefold() not in STOP_WORDS:
            names.extend(stem_terms(token.casefold()))
        start = False
    return tuple(dict.fromkeys(names))


def in_order(items: Iterable[Item], window: int = WINDOW) -> Neighbours:
    """The :data:`Neighbours` of a complete set of visible items (the item-by-item path)."""
    groups: dict[Hashable, list[Item]] = {}
    for item in items:
        if item.group is not None:
            groups.setdefault(item.group, []).append(item)
    place: dict[Hashable, int] = {}
    for members in groups.values():
        members.sort(key=lambda i: i.order)
        for position, item in enumerate(members):
            place[item.key] = position

    def neighbours(item: Item) -> Sequence[Item]:
        if item.group is None:
            return ()
        members = groups[item.group]
        p = place[item.key]
        return members[max(0, p - window) : p] + members[p + 1 : p + 1 + window]

    return neighbours


def window_of(members: Sequence[Item], order: int, window: int = WINDOW) -> list[Item]:
    """The items within ``window`` places of the one at leaf index ``order`` in ``members``
    (sorted by order, the one itself among them), itself excluded."""
    p = bisect_left([m.order for m in members], order)
    return [*members[max(0, p - window) : p], *members[p + 1 : p + 1 + window]]


def reads_as_turn(item: Item) -> bool:
    """Whether ``item`` is a turn of a dialogue: a said or did record, or a note that reads
    as one (:attr:`~saihm.retrieval.analysis.Analysis.turnlike`: it asks, or speaks in the
    first or second person)."""
    return item.turn or item.analysis.turnlike


def semantic_context(item: Item, neighbours: Neighbours) -> list[Hashable]:
    """The cells whose highest cosine is ``item``'s context in the fusion
    (:func:`saihm.retrieval.rank.fuse`): the cells around a dialogue turn (one that
    :func:`reads_as_turn` or has such a turn in its window: a conversation's "They were
    awestruck." is a reply too); ``item`` itself for a stated fact, which stands alone."""
    around = neighbours(item)
    if reads_as_turn(item) or any(reads_as_turn(o) for o in around):
        return [o.key for o in around]
    return [item.key]


def corrects(newer: Analysis, older: Analysis) -> bool:
    """Whether ``newer`` corrects ``older``: it says it is a change (a word of
    :data:`CHANGE_WORDS`), the two share at least two other terms (the same subject and
    attribute: "Priya", "vegetarian") and ``newer`` has a term ``older`` lacks (the new value).
    A change word that names an attribute ("moved": where one lives) counts as that attribute.
    """
    cues = _CHANGE.intersection(newer.tf)
    if not cues:
        return False
    terms = {*newer.tf, *(_CHANGES_ATTRIBUTE[c] for c in cues if c in _CHANGES_ATTRIBUTE)}
    terms -= _CHANGE
    before = older.tf.keys() - _CHANGE
    return len(terms & before) >= 2 and not terms <= before


def rank_in_context(
    query: Query,
    matched: Sequence[Item],
    neighbours: Neighbours,
    *,
    stats: Bm25 | None = None,
    weights: Weights = DEFAULT,
    need: int | None = None,
) -> list[Ranked]:
    """The candidates for ``query``, best first, scored with their context.

    ``matched``: every visible item that matches the query by itself (shares a term or passes
    the containment baseline; more may be passed, they are checked); ``neighbours``: the visible
    items around an item. ``stats`` are the BM25 statistics of the visible set (computed from
    ``matched`` when None, which is right only when ``matched`` is that whole set). With
    ``need``, only the best ``need`` are returned. The empty query ranks ``matched`` in order.
    """
    if query.everything:
        return sorted((Ranked(i.key, 0.0, i.order) for i in matched), key=lambda r: r.order)
    if stats is None:
        stats = collection_stats(query, [(i.key, i.analysis, i.order) for i in matched])
    terms = query.terms
    names = [t for t in query_names(query.text) if t in terms]
    term_weights: Mapping[str, float] | None = (
        dict.fromkeys(names, 1.0 + weights.names) if names and weights.names else None
    )
    wanted = {*terms, *(u for us in stats.expansions.values() for u in us)}

    direct: dict[Hashable, float] = {}
    items: dict[Hashable, Item] = {}
    present: dict[Hashable, set[str]] = {}  # group -> query terms found in it
    sharing: list[Item] = []
    for item in matched:
        tf = item.analysis.tf
        found = [t for t in terms if t in tf]
        if found:
            direct[item.key] = stats.score(tf, item.analysis.length, terms, term_weights)
            sharing.append(item)
            if item.group is not None:
                present.setdefault(item.group, set()).update(found)
        elif contains(query, item.analysis):
            direct[item.key] = 0.0
        else:
            continue
        items[item.key] = item

    # Candidates through their window: the neighbours of the items that share a term.
    if weights.neighbours:
        for item in sharing:
            for other in neighbours(item):
                if other.key not in items and reads_as_turn(other):
                    items[other.key] = other
                    direct[other.key] = 0.0

    evidence: dict[Hashable, float] = {}
    if weights.session:
        for group, in_group in present.items():
            evidence[group] = sum((term_weights or {}).get(t, 1.0) * stats.idf(t) for t in in_group)

    scored: list[Ranked] = []
    for key, item in items.items():
        score = direct[key]
        if weights.neighbours and item.group is not None and item.group in present:
            around = neighbours(item)
            if around:
                merged: dict[str, int] = {}
                length = 0
                for other in around:
                    length += other.analysis.length
                    tf = other.analysis.tf
                    for t in wanted:
                        f = tf.get(t)
                        if f:
                            merged[t] = merged.get(t, 0) + f
                if merged:
                    window = stats.score(merged, length / len(around), terms, term_weights)
                    score += weights.neighbours * window
                if weights.answer:
                    # The answer to a question: the turn right after one that asks.
                    before = [o for o in around if o.order < item.order]
                    asked = before[-1] if before else None
                    if asked is not None and "?" in asked.analysis.folded:
                        a = asked.analysis
                        score += weights.answer * stats.score(a.tf, a.length, terms, term_weights)
        if item.group is not None:
            score += weights.session * evidence.get(item.group, 0.0)
        scored.append(Ranked(key, score, item.order))

    def best(r: Ranked) -> tuple[float, int]:
        return (-r.score, r.order)

    if weights.corrections and len(scored) > 1:
        scored = corrected(scored, items)
    if need is not None:
        return heapq.nsmallest(need, scored, key=best)
    scored.sort(key=best)
    return scored


def corrected(scored: list[Ranked], items: Mapping[Hashable, Item]) -> list[Ranked]:
    """Among the best :data:`CORRECTION_POOL`, place each older note that a newer note of the
    same owner :func:`corrects` just below that newer one; dialogue turns (said or did records
    and notes that :func:`reads_as_turn`) keep their places."""
    pool = heapq.nsmallest(CORRECTION_POOL, scored, key=lambda r: (-r.score, r.order))
    notes = {
        r.key for r in pool if items[r.key].owner is not None and not reads_as_turn(items[r.key])
    }
    if len(notes) < 2:
        return scored
    final: dict[Hashable, float] = {}
    newest_first = sorted((r for r in pool if r.key in notes), key=lambda r: -r.order)
    for i, r in enumerate(newest_first):
        item = items[r.key]
        score = r.score
        for newer in newest_first[:i]:
            cap = final[newer.key] * _BELOW
            if cap >= score:
                continue  # already below it: nothing to check
            other = items[newer.key]
            if other.owner == item.owner and corrects(other.analysis, item.analysis):
                score = cap
        final[r.key] = score
    if all(final[k] == r.score for r in pool if (k := r.key) in final):
        return scored
    return [Ranked(r.key, final.get(r.key, r.score), r.order) for r in scored]
