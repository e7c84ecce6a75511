"""saihm.witness: a C2SP tlog-witness's state and the operator's submitter.

``state`` keeps a witness's durable per-origin record; ``submit`` is the operator's background
job that asks configured witnesses to cosign. The server that answers ``add-checkpoint``
(``saihm witness serve``) is :mod:`saihm.services.witness`, on the edges' floor beside HTTP.
"""
