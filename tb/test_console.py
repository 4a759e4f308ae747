"""sw.console: progress bars write plain lines to streams that are not terminals (logs, pipes)
and tqdm's redrawn bar to terminals; the warnings of a run are printed once, counted."""

import io
import subprocess
import sys
import warnings

import pytest
from tqdm import tqdm

import sw.console
from sw.console import is_terminal, progress_bar, warnings_summarized


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_bar_into_a_log_is_plain_lines(monkeypatch):
    monkeypatch.setattr(sw.console, "LOG_INTERVAL_S", 0.0)    # every refresh may write a line
    log = io.StringIO()
    with progress_bar(total=3, desc="work", unit="step", file=log, leave=False) as bar:
        for _ in range(3):
            bar.update()
            bar.set_postfix(ret="1.0")
    text = log.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert lines[0].startswith("work:   0%") and lines[-1].startswith("work: 100%")
    assert "3/3" in lines[-1] and "ret=1.0" in lines[-1]
    assert len(lines) == len(set(lines))                    # no line repeated


def test_a_log_gets_a_line_per_interval_and_the_last_state():
    log = io.StringIO()                 # LOG_INTERVAL_S (30 s) is longer than this loop
    for _ in progress_bar(range(1000), desc="fast", file=log, leave=False):
        pass
    lines = log.getvalue().splitlines()
    assert len(lines) == 2, lines                           # the start and the end
    assert "0/1000" in lines[0] and "1000/1000" in lines[1]


def test_a_terminal_gets_tqdm_and_disable_writes_nothing():
    term = _Terminal()
    bar = progress_bar(range(2), file=term, desc="t")
    assert type(bar) is tqdm
    list(bar)
    assert "\r" in term.getvalue()
    log = io.StringIO()
    list(progress_bar(range(5), file=log, disable=True))
    assert log.getvalue() == ""
    assert is_terminal(term) and not is_terminal(log) and not is_terminal(object())


def test_warnings_are_summarized_once_after_the_run():
    out = io.StringIO()
    with warnings_summarized("the test run", file=out) as caught:
        for i in range(7):
            warnings.warn(f"batch {i} clipped", RuntimeWarning)
        warnings.warn("something else", UserWarning)
    assert len(caught) == 8
    assert out.getvalue().splitlines() == [
        "warning during the test run: RuntimeWarning, 7 times; the first: batch 0 clipped",
        "warning during the test run: UserWarning: something else"]
    quiet = io.StringIO()
    with warnings_summarized(file=quiet):
        pass
    assert quiet.getvalue() == ""


def test_a_warning_filter_set_by_the_user_still_applies():
    code = ("import warnings\nfrom sw.console import warnings_summarized\n"
            "with warnings_summarized():\n    warnings.warn('boom', RuntimeWarning)\n")
    run = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", code],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "RuntimeWarning: boom" in run.stderr


@pytest.mark.parametrize("argv", [
    ["-m", "sw.rl.ppo", "--backend", "cpu", "--total-steps", "2048"],
    ["-m", "sw.rl.dqn", "--backend", "cpu", "--total-steps", "1010"],
])
def test_the_programs_write_plain_lines_into_a_log(argv):
    pytest.importorskip("torch")
    pytest.importorskip("gymnasium")
    run = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "\r" not in run.stderr and "\x1b" not in run.stderr
    bar = [line for line in run.stderr.splitlines() if "%|" in line]
    assert bar and "100%" in bar[-1], run.stderr
