"""The ``saihm`` command line: argument parsing only, one module per command family.

Each family module has ``register(commands)``, which adds its parsers to the ``saihm``
subparsers, and each parser sets ``run(args) -> int`` as its handler. ``saihm.commands.main``
builds the tree, dispatches, and prints a :class:`~saihm.errors.SaihmError` as one line.
Library code below this package takes typed options, never an ``argparse.Namespace``.
"""
