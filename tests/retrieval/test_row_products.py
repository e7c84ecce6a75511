"""The semantic stage's cosines are computed on the calling thread, not by numpy's BLAS
(saihm/retrieval/embed.py ``row_products``; docs/retrieval.md "The engine"): numpy's
``matrix @ vector`` over a holder's vectors wakes OpenBLAS's thread pool, which spins after
each call, doubling a recall's CPU on a shared machine. The answers are the product's."""

from __future__ import annotations

from typing import Any

import numpy
import pytest

from saihm.retrieval import embed
from saihm.retrieval.embed import VectorTable, cosines


class NoMatmul(numpy.ndarray):
    """A matrix that refuses to be multiplied by ``@`` / ``numpy.matmul`` / ``numpy.dot``
    (the calls numpy hands to its BLAS), and is otherwise an ordinary array."""

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if ufunc is numpy.matmul:
            raise AssertionError("the product was handed to numpy.matmul (BLAS)")
        plain = [i.view(numpy.ndarray) if isinstance(i, NoMatmul) else i for i in inputs]
        return getattr(ufunc, method)(*plain, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func is numpy.dot:
            raise AssertionError("the product was handed to numpy.dot (BLAS)")
        return super().__array_function__(func, types, args, kwargs)


def _unit_rows(n: int, dim: int = 384, seed: int = 3) -> numpy.ndarray:
    rows = numpy.random.default_rng(seed).standard_normal((n, dim)).astype(numpy.float32)
    return rows / numpy.linalg.norm(rows, axis=1, keepdims=True)


def test_the_table_does_not_hand_its_product_to_blas() -> None:
    rows = _unit_rows(2_000)
    table = VectorTable(list(enumerate(rows)))
    expected = table.nearest(rows[5], 0.1, 10, [7, 9])
    table.matrix = table.matrix.view(NoMatmul)
    assert table.nearest(rows[5], 0.1, 10, [7, 9]) == expected
    assert 5 in expected and {7, 9} <= expected.keys()


def test_cosines_take_the_same_product(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _unit_rows(50)
    seen: list[tuple[int, ...]] = []
    row_products = embed.row_products

    def spy(matrix: Any, vector: Any) -> Any:
        seen.append(matrix.shape)
        return row_products(matrix, vector)

    monkeypatch.setattr(embed, "row_products", spy)
    got = cosines(rows[0], list(rows))
    assert seen == [(50, 384)]
    assert got == pytest.approx((rows @ rows[0]).tolist(), abs=1e-6)


def test_row_products_are_the_matrix_product_and_keep_ties() -> None:
    rows = _unit_rows(3_000)
    rows[10] = rows[20]  # two cells of one text: the same cosine, so the caller's tie-break
    query = rows[20]
    got = embed.row_products(rows, query)
    assert got.dtype == numpy.float32 and got.shape == (3_000,)
    assert numpy.allclose(got, rows.astype(numpy.float64) @ query.astype(numpy.float64), atol=1e-6)
    assert got[10] == got[20]
    table = VectorTable(list(enumerate(rows)))
    near = table.nearest(query, 0.0, 1, [])
    assert {10, 20} <= near.keys()  # tied with the k-th: both kept
