"""What prism-search writes for people and other tools: output files replaced in one rename (files), JSON every
parser reads (jsonout: inf and nan as null), and URLs with their credentials masked (urls), for storage, trackers
and every display alike.
"""

from search.outputs.files import check_output, write_output

__all__ = ["check_output", "write_output"]
