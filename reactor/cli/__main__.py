"""``python -m reactor.cli worker ...``: the ``reactor`` console script."""

from reactor.cli import main

main()
