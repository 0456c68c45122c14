"""Streamers for generate(streamer=...), as transformers has them: TextStreamer prints the text
as it comes; TextIteratorStreamer hands it to another thread as an iterator."""
import queue
import sys


class TextStreamer:
    """Writes each piece of text to a file (stdout) as generation produces it."""

    def __init__(self, file=None):
        self.file = file

    def on_text(self, text):
        print(text, end="", flush=True, file=self.file or sys.stdout)

    def end(self):
        print(file=self.file or sys.stdout, flush=True)


class TextIteratorStreamer:
    """generate() runs in one thread and puts pieces in; another iterates over them.

        streamer = TextIteratorStreamer()
        threading.Thread(target=model.generate, args=(prompt,), kwargs={"streamer": streamer}).start()
        for piece in streamer: ...
    """

    _END = object()

    def __init__(self, timeout=None):
        self.timeout = timeout  # seconds to wait for a piece; None: no limit
        self._queue = queue.Queue()

    def on_text(self, text):
        self._queue.put(text)

    def end(self):
        self._queue.put(self._END)

    def __iter__(self):
        return self

    def __next__(self):
        piece = self._queue.get(timeout=self.timeout)
        if piece is self._END:
            raise StopIteration
        return piece
