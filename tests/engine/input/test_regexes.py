"""User regular expressions: catastrophic backtracking is refused before a pattern is stored, and a
pattern that is accepted matches any name in bounded time (a property checked on random patterns)."""

from __future__ import annotations

import re
import signal
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jedictl.engine.input.regexes import compile_pattern
from jedictl.errors import BadInput

ACCEPTED = [
    r"\.log\.tgz(\.\d+)*$", r".*(corrupted|truncated) input file", r"simul|evgen", r"user|panda", r"GP_.*", r".*Lost heartbeat.*",
    r"^f\.0", r"(?i)DAOD", r"[0-9]{3}", r"_tid\d+_00", r"\.root$", r"(\d+\.){3}\d+", r"(a|b)*", r"(?:ab|cd)+", r"[a-z]+[0-9]+[a-z]+",
    r".*a.*b", r"^(?:[A-Za-z0-9_.-]+)$", r"a*+a*+a*+b", r"(?i)^mc\d+_13p6TeV\..*\.DAOD_PHYS\..*$", r"x(?=a+)", r"", r"(\.[0-9]+)?$",
    r"^user\.[^.]+\.", r"(?s).*", r"(a++)+$", r"(?>a+)+$", r"(?:[^/]+/)*[^/]+\.root", r"(\.\d+)+", r"(?i)(A|a)+$",
]
REFUSED = [
    r"(a+)+$", r"(a|a)*$", r"(a|aa)+$", r"(.*)*", r"(\w+\s?)+$", r"(.*a){20}", r".*.*.*.*.*.*x", r"(a*)*b", r"^(([a-z])+.)+[A-Z]([a-z])+$",
    r".*a.*a.*b", r"a*a*a*b", r"(?=(a+)+$)", r"(x+x+)+y", r"(a|b|ab)*c", r"(.*?,){11}P", r"\d*\d*\d*x", r"(a)\1*\1*\1*", r"(a*a*;)+$",
    r"(?>(a+)+$)", r"((ab)*)*c", r"(a?){30}a{30}",
]


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_ordinary_patterns_are_accepted(pattern):
    assert compile_pattern(pattern, "p").pattern == pattern


@pytest.mark.parametrize("pattern", REFUSED)
def test_catastrophic_patterns_are_refused(pattern):
    with pytest.raises(BadInput, match=r"^p: can take exponential time to match: "):
        compile_pattern(pattern, "p")


@pytest.mark.parametrize("pattern,message", [("(unclosed", "is not a valid regular expression"), ("a" * 513, "at most 512 characters"),
                                             (7, "must be a regular expression")])
def test_invalid_patterns_are_refused(pattern, message):
    with pytest.raises(BadInput, match=re.escape(message)):
        compile_pattern(pattern, "p")


def test_groups_nested_past_the_parser_are_refused():
    with pytest.raises(BadInput, match="is not a valid regular expression"):
        compile_pattern("(?:" * 1000 + "a" + ")" * 1000, "p", max_length=10_000)


# -------------------------------------------------------------------------------- the property itself

atoms = st.sampled_from(["a", "b", ".", r"\d", r"\w", "[ab]", "[^b]", r"\s", "x", "(?:a|b)", "(?:a|ab)", "(?:a|a)"])
quantifiers = st.sampled_from(["", "", "*", "+", "?", "{2,5}", "{3}", "*?", "{1,40}"])
patterns = st.recursive(
    st.tuples(atoms, quantifiers).map("".join),
    lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=4).map("".join),
        st.tuples(inner, quantifiers).map(lambda t: f"(?:{t[0]}){t[1]}"),
        st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
    ),
    max_leaves=6,
).map(lambda p: p + "$")
#: Texts on which backtracking explodes if it can: long runs of what the patterns match, then a mismatch.
SUBJECTS = ["a" * 254 + "!", "ab" * 127 + "!", "0" * 254 + "!", "a " * 127 + "!", "x" * 254 + "\n"]


class _TooSlow(Exception):
    pass


def _alarm(signum, frame):  # noqa: ANN001, ARG001
    raise _TooSlow


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(pattern=patterns)
def test_accepted_patterns_match_long_names_quickly(pattern):
    try:
        compiled = compile_pattern(pattern, "p")
    except BadInput:
        return  # refused: the feeder never runs it
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for subject in SUBJECTS:
            started = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, 2.0)  # re checks for signals while it backtracks
            try:
                compiled.search(subject)
            except _TooSlow:
                pytest.fail(f"accepted {pattern!r} backtracks for more than 2 s on {subject[:12]!r}...")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            assert time.monotonic() - started < 2.0
    finally:
        signal.signal(signal.SIGALRM, previous)
