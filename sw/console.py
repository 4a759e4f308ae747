"""What the command lines print while they run: progress bars that suit where they are
written, and the warnings of a run summarized once after its bar.

:func:`progress_bar` is tqdm's bar, redrawn in place, when its stream is a terminal. Written
anywhere else (a ``make`` log, a pipe, a CI log) it prints plain lines instead: one when it
starts, one at most every :data:`LOG_INTERVAL_S` seconds while it advances and one when it
ends, without carriage returns or cursor moves, so that a log reads line by line.

:func:`warnings_summarized` collects the warnings raised inside it (a driver's
``ClippingWarning`` per batch, say) and prints each kind once when it ends, with how many times
it came, instead of letting each one cut into the bar.
"""

import contextlib
import sys
import warnings

from tqdm import tqdm

__all__ = ["LOG_INTERVAL_S", "is_terminal", "progress_bar", "warnings_summarized"]

#: Seconds between the lines of a progress bar written to a stream that is not a terminal.
LOG_INTERVAL_S = 30.0


def is_terminal(stream) -> bool:
    """Whether ``stream`` is an open terminal (False for files, pipes and closed streams)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class _LineBar(tqdm):
    """tqdm printed as lines (module docstring): a refresh writes the bar's text and a newline
    if the count or the postfix changed and the last line is at least ``mininterval`` (at least
    :data:`LOG_INTERVAL_S`) old; clearing and cursor moves write nothing; closing writes the
    final state, whether or not the bar is ``leave``-ing."""

    def __init__(self, *args, **kwargs):
        self._logged = None                     # (count, postfix) of the last line written
        self._logged_t = None
        self._closing = False
        interval = max(float(kwargs.pop("mininterval", 0.1)), LOG_INTERVAL_S)
        kwargs.update(mininterval=interval, maxinterval=interval, dynamic_ncols=False)
        super().__init__(*args, **kwargs)

    def display(self, msg=None, pos=None):
        state = (self.n, self.postfix)
        if msg is not None or state == self._logged:        # a clear, or nothing new
            return True
        now = self._time()
        if self._logged_t is not None and now - self._logged_t < self.mininterval \
                and not self._closing:
            return True
        self.fp.write(self.__str__().rstrip() + "\n")
        self.fp.flush()
        self._logged, self._logged_t = state, now
        return True

    def clear(self, nolock=False):
        pass

    def moveto(self, n):
        pass

    def close(self):
        if not self.disable and hasattr(self, "last_print_t"):
            self._closing = True
            self._ema_dt = lambda: None         # the overall rate, as tqdm's own last line
            self.display()
            self.sp = None          # tqdm's own close then writes nothing (its "GUI" path)
        super().close()


def progress_bar(iterable=None, *, file=None, **kwargs):
    """A tqdm bar over ``iterable`` (tqdm's keyword arguments: ``total``, ``desc``,
    ``disable``, ...), on ``file`` (default ``sys.stderr``): redrawn in place on a terminal,
    plain lines elsewhere (module docstring)."""
    file = sys.stderr if file is None else file
    cls = tqdm if is_terminal(file) else _LineBar
    return cls(iterable, file=file, **kwargs)


def _summary(records, during):
    groups = {}
    for w in records:
        key = (w.category, w.filename, w.lineno)
        if key in groups:
            groups[key][1] += 1
        else:
            groups[key] = [str(w.message), 1]
    lines = []
    for (category, _, _), (first, count) in groups.items():
        name = category.__name__
        if count == 1:
            lines.append(f"warning during {during}: {name}: {first}")
        else:
            lines.append(f"warning during {during}: {name}, {count} times; the first: {first}")
    return lines


@contextlib.contextmanager
def warnings_summarized(during="the run", *, file=None):
    """Collect the warnings raised inside the ``with`` block and print them when it ends, on
    ``file`` (default ``sys.stderr``): one line per kind and place of origin, with how many
    times it came and its first message (``warning during the run: ClippingWarning, 7 times;
    the first: ...``). Every occurrence is counted unless Python's warning filters were set
    (``-W``, ``PYTHONWARNINGS``): then they decide, and ``-W error`` still raises."""
    with warnings.catch_warnings(record=True) as records:
        if not sys.warnoptions:
            warnings.simplefilter("always")
        try:
            yield records
        finally:
            lines = _summary(records, during)
            if lines:
                print("\n".join(lines), file=sys.stderr if file is None else file, flush=True)
