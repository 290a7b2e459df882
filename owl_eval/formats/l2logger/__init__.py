"""The l2logger 1.1 log layout (what l2metrics 3.1 reads): columnar reading, field parsing and writing.

``read`` parses a log folder into an :class:`EpisodeLog`; ``write`` writes one (whole or episode by episode);
``columnar`` parses the ``data-log.tsv`` files column-wise (pyarrow.csv); ``fields`` checks values and reads
irregular files row by row.
"""

from owl_eval.formats.l2logger.fields import L2LogError
from owl_eval.formats.l2logger.read import LOG_FORMAT_VERSION, STANDARD_COLUMNS, TIMESTAMP_FORMAT, EpisodeLog, read_log
from owl_eval.formats.l2logger.write import L2Logger, write_log

__all__ = [
    "LOG_FORMAT_VERSION",
    "STANDARD_COLUMNS",
    "TIMESTAMP_FORMAT",
    "EpisodeLog",
    "L2LogError",
    "L2Logger",
    "read_log",
    "write_log",
]
