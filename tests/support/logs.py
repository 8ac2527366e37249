"""A logger's records kept for assertions instead of propagated to the root logger, where Salt's
pytest plugin buffers them until the session ends."""

import contextlib
import logging


class Records(logging.Handler):
    """The records one logger emitted while ``kept`` held it."""

    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)

    def messages(self, level=logging.WARNING):
        """The messages at ``level`` or above, in order."""
        return [r.getMessage() for r in self.records if r.levelno >= level]


@contextlib.contextmanager
def kept(name):
    """Collect the records of logger ``name`` (not propagated) while the block runs."""
    logger = logging.getLogger(name)
    handler = Records()
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
