"""graph(): entities and relations from visible records only, built per call."""

from __future__ import annotations

from saihm.provider.models import GraphQuery


def _setup(world):
    world.put(
        "ip",
        {
            "entity": {"id": "Mira", "type": "character"},
            "relations": [{"relation": "appears_in", "target": "Skyline"}],
        },
    )
    world.put("ip", {"entity": "Skyline", "relations": [{"type": "sold_as", "target": "Mug"}]})
    world.put("private", {"entity": "Mira", "relations": [{"relation": "secret", "target": "X"}]})
    world.put("ip", {"note": "no entity here"})


def test_graph_is_filtered_per_item(world):
    _setup(world)
    g = world.consumer("studio", ["ip"]).graph(GraphQuery(consumer="studio"))
    assert {n.id for n in g.nodes} == {"Mira", "Skyline", "Mug"}
    assert {(e.source, e.relation, e.target) for e in g.edges} == {
        ("Mira", "appears_in", "Skyline"),
        ("Skyline", "sold_as", "Mug"),
    }
    mira = next(n for n in g.nodes if n.id == "Mira")
    assert mira.type == "character" and len(mira.record_ids) == 1
    assert "X" not in {n.id for n in g.nodes}


def test_graph_traversal_depth_and_limit(world):
    _setup(world)
    studio = world.consumer("studio", ["ip", "private"])
    one = studio.graph(GraphQuery(consumer="studio", entity="Mira", depth=1))
    assert {n.id for n in one.nodes} == {"Mira", "Skyline", "X"}
    two = studio.graph(GraphQuery(consumer="studio", entity="Mira", depth=2))
    assert {n.id for n in two.nodes} == {"Mira", "Skyline", "X", "Mug"}
    cut = studio.graph(GraphQuery(consumer="studio", limit=2))
    assert len(cut.nodes) == 2 and cut.truncated
    assert all(e.source in {n.id for n in cut.nodes} for e in cut.edges)
    missing = studio.graph(GraphQuery(consumer="studio", entity="Nobody"))
    assert missing.nodes == () and not missing.truncated
