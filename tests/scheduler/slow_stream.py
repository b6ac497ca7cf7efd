"""A stream a try's code leaves in sys.stderr whose flush blocks on opening the FIFO at RELEASE until a writer
opens it: the try's code has ended (and its report is left), its process blocks on its way out, and stays so until
it is killed. Source text for the DAG files of the tests that need such a try (with RELEASE defined before it)."""

SLOW_STREAM = """
class SlowStream:
    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        return self.stream.write(text)

    def flush(self):
        with open(RELEASE) as fifo:  # (until a writer opens it)
            fifo.read()
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)
"""
