"""`python -m search.cli`: the same as the `prism-search` command."""

from search.cli import main

main()
