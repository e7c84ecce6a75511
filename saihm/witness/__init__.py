"""saihm.witness: a C2SP tlog-witness (``saihm witness serve``) and the operator's submitter.

``state`` keeps a witness's durable per-origin record, ``server`` answers ``add-checkpoint``,
``submit`` is the operator's background job that asks configured witnesses to cosign.
"""
