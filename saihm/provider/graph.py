"""A minimal entity-relationship view over records a grant can see (RFC 0007 "Knowledge graph").

Built at query time from the records the store's checked read returned, so it inherits the
per-item check and there is no separate, unchecked index. A record contributes a node when its
content is an object with ``entity`` (a string, or ``{"id", "type"?}``) and edges from
``relations``: a list of ``{"relation" (or "type"), "target"}`` (target a string or
``{"id"}``). Nothing is inferred: no entity resolution, merging, ranking or reasoning.
"""

from __future__ import annotations

from collections import deque

from saihm.provider.models import GraphEdge, GraphExcerpt, GraphNode, MemoryRecord


def _entity(value: object) -> tuple[str, str | None] | None:
    if isinstance(value, str) and value:
        return value, None
    if isinstance(value, dict) and isinstance(value.get("id"), str) and value["id"]:
        kind = value.get("type")
        return value["id"], kind if isinstance(kind, str) else None
    return None


def build(
    records: list[MemoryRecord], *, start: str | None, depth: int, limit: int
) -> GraphExcerpt:
    """Nodes and edges from ``records``; from ``start``, only what lies within ``depth`` hops.

    Edges are followed in both directions for reachability. ``truncated`` is true when more
    nodes qualified than ``limit``; edges are kept only between returned nodes.
    """
    nodes: dict[str, dict] = {}
    edges: list[GraphEdge] = []

    def node(name: str, kind: str | None = None) -> dict:
        entry = nodes.setdefault(name, {"type": None, "records": []})
        if kind and entry["type"] is None:
            entry["type"] = kind
        return entry

    for record in records:
        content = record.content
        if not isinstance(content, dict):
            continue
        found = _entity(content.get("entity"))
        if found is None:
            continue
        source, kind = found
        node(source, kind)["records"].append(record.id)
        relations = content.get("relations")
        for rel in relations if isinstance(relations, list) else []:
            if not isinstance(rel, dict):
                continue
            name = rel.get("relation", rel.get("type"))
            target = _entity(rel.get("target"))
            if not isinstance(name, str) or not name or target is None:
                continue
            node(target[0], target[1])
            edges.append(
                GraphEdge(source=source, target=target[0], relation=name, record_id=record.id)
            )
    order = list(nodes) if start is None else _reachable(start, edges, depth, nodes)
    kept = order[:limit]
    keep = set(kept)
    return GraphExcerpt(
        nodes=tuple(
            GraphNode(id=n, type=nodes[n]["type"], record_ids=tuple(nodes[n]["records"]))
            for n in kept
        ),
        edges=tuple(e for e in edges if e.source in keep and e.target in keep),
        truncated=len(order) > limit,
    )


def _reachable(start: str, edges: list[GraphEdge], depth: int, nodes: dict) -> list[str]:
    if start not in nodes:
        return []
    neighbours: dict[str, list[str]] = {}
    for e in edges:
        neighbours.setdefault(e.source, []).append(e.target)
        neighbours.setdefault(e.target, []).append(e.source)
    seen = {start: 0}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        if seen[current] == depth:
            continue
        for nxt in neighbours.get(current, ()):
            if nxt not in seen:
                seen[nxt] = seen[current] + 1
                queue.append(nxt)
    return list(seen)
