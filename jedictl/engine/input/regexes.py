"""Regular expressions that users hand to jedictl (input include/exclude, global-share attributes, retry
rules), checked before they are stored so that none can make a backtracking matcher run for hours.

Python's `re` backtracks. A pattern is refused when its structure lets one text be matched in very
many ways, which is what makes backtracking explode on a text that in the end does not match:

- a repeated group whose body can itself match in several ways -- `(a+)+`, `(a|aa)*`, `(\\w+\\s?)+$`,
  `(.*x){5}` -- unless the body holds a *delimiter*: a single character that none of the body's
  variable parts can match, so every repetition is pinned to one delimiter (`(\\.\\d+)*`,
  `(\\d+\\.){3}` are fine);
- three or more long repeats in a row that can take the same characters -- `.*a.*a.*b`, `a*a*a*` --
  whose choices multiply (two, as in `.*corrupted.*file`, cost little on names and messages).

The check is structural (on `re`'s own parse tree) and conservative: it may refuse a harmless pattern.
A possessive repeat or an atomic group around the inner repeat never gives back what it took, so
`(a++)+` and `(?>a+)+` are the way to write such a pattern that is accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

try:  # Python 3.11+
    from re import _constants as sre_constants
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

from jedictl.errors import BadInput

#: A repeat that may run this many times or more counts as long (its choices are many).
LONG_REPEAT = 16
#: Long repeats in a row that can take the same characters, from which a pattern is refused.
MAX_CHAINED_REPEATS = 3

# Characters that stand for all others when sets of characters are compared: ASCII plus a few of the
# classes Unicode adds (letters, digits, spaces, line breaks, case folding specials).
_PROBES = tuple(chr(code) for code in range(128)) + ("\x85", "\xa0", "é", "É", "ß", "ſ", "\u212a", "\u2028", "名", "٣", "🙂")
_ALL = frozenset(_PROBES)
_OP = sre_constants
_SINGLE_CHAR = {_OP.LITERAL, _OP.NOT_LITERAL, _OP.ANY, _OP.IN}
_REPEATS = {_OP.MAX_REPEAT, _OP.MIN_REPEAT}
_ZERO_WIDTH = {_OP.AT, _OP.ASSERT, _OP.ASSERT_NOT}
_CATEGORIES = {
    "CATEGORY_DIGIT": str.isdecimal, "CATEGORY_SPACE": str.isspace,
    "CATEGORY_WORD": lambda c: c.isalnum() or c == "_", "CATEGORY_LINEBREAK": lambda c: c == "\n",
}


class Ambiguous(Exception):
    """The pattern can backtrack without bound; the message says where."""


def compile_pattern(pattern: Any, path: str, flags: int = 0, max_length: int = 512) -> re.Pattern[str]:
    """Compile a user's regular expression, refusing an invalid one and one that can backtrack without bound."""
    if not isinstance(pattern, str) or len(pattern) > max_length:
        raise BadInput(f"must be a regular expression of at most {max_length} characters", path)
    try:
        compiled = re.compile(pattern, flags)
        tree = sre_parse.parse(pattern, flags)
    except (re.error, OverflowError, RecursionError) as exc:
        raise BadInput(f"is not a valid regular expression ({exc})", path) from exc
    try:
        _check(tree.data, bool(tree.state.flags & re.IGNORECASE))
    except Ambiguous as exc:
        raise BadInput(f"can take exponential time to match: {exc}; write it without nested or chained repeats "
                       "that match the same characters (or make them possessive: a++, (?>...))", path) from None
    except RecursionError as exc:
        raise BadInput("nests groups too deeply", path) from exc
    return compiled


# ------------------------------------------------------------------------------------------ analysis

@dataclass
class _Chain:
    """Repeats met since the last character that none of them can take, and the characters they take."""

    count: int = 0
    chars: frozenset[str] = frozenset()


def _check(items: list[tuple[Any, Any]], ignore_case: bool) -> None:
    """Every repeat's body and every sequence, at every depth."""
    for op, arg in items:
        if op in _REPEATS:
            low, high, body = arg
            if high > 1 and _ambiguous(body, ignore_case):
                raise Ambiguous("a repeated group whose body can match the same text in several ways")
            if high > 1 and _variable(body, ignore_case) and not _has_delimiter(body, ignore_case):
                raise Ambiguous("a repeated group whose body can match texts of several lengths")
        for nested, case in _nested(op, arg, ignore_case):
            _check(nested, case)
    if _chain(items, ignore_case, long_only=True) >= MAX_CHAINED_REPEATS:
        raise Ambiguous(f"{MAX_CHAINED_REPEATS} or more long repeats in a row that match the same characters")


def _nested(op: Any, arg: Any, ignore_case: bool) -> list[tuple[list[Any], bool]]:
    """The sub-sequences of one item, with the case flag in force in each."""
    if op == _OP.SUBPATTERN:
        return [(arg[3], _flags(ignore_case, arg))]
    if op in _REPEATS or op == _OP.POSSESSIVE_REPEAT:
        return [(arg[2], ignore_case)]
    if op == _OP.ATOMIC_GROUP:
        return [(arg, ignore_case)]
    if op in (_OP.ASSERT, _OP.ASSERT_NOT):
        return [(arg[1], ignore_case)]
    if op == _OP.BRANCH:
        return [(list(branch), ignore_case) for branch in arg[1]]
    if op == _OP.GROUPREF_EXISTS:
        return [(list(branch), ignore_case) for branch in (arg[1], arg[2]) if branch]
    return []


def _ambiguous(items: list[tuple[Any, Any]], ignore_case: bool) -> bool:
    """Can `items` match one text in more than one way? (Conservative: yes when unsure.)"""
    if _chain(items, ignore_case, long_only=False) >= 2:
        return True  # two repeats in a row share characters: a*a*, \w+\d*
    for op, arg in items:
        if op == _OP.BRANCH and _ambiguous_branch(arg[1], ignore_case):
            return True
        if op in (_OP.GROUPREF, _OP.GROUPREF_EXISTS):
            return True
        if op in _REPEATS and arg[1] > 1 and (_ambiguous(arg[2], ignore_case)
                                               or (_variable(arg[2], ignore_case) and not _has_delimiter(arg[2], ignore_case))):
            return True
        if op in (_OP.SUBPATTERN, _OP.BRANCH) or op in _REPEATS:
            if any(_ambiguous(nested, case) for nested, case in _nested(op, arg, ignore_case)):
                return True
    return False


def _chain(items: list[tuple[Any, Any]], ignore_case: bool, long_only: bool) -> int:
    """The longest run of repeats in `items` (groups flattened) that can take the same characters: a
    character none of them can take, or a repeat of other characters that must take one, ends a run."""
    return _scan(items, _Chain(), ignore_case, long_only)[1]


def _scan(items: list[tuple[Any, Any]], chain: _Chain, ignore_case: bool, long_only: bool) -> tuple[_Chain, int]:
    longest = chain.count
    for op, arg in items:
        if op in _SINGLE_CHAR:
            if chain.count and not _char_set(op, arg, ignore_case) & chain.chars:
                chain = _Chain()
        elif op == _OP.SUBPATTERN:
            chain, inner = _scan(arg[3], chain, _flags(ignore_case, arg), long_only)
            longest = max(longest, inner)
        elif op in _REPEATS:
            low, high, body = arg
            counts = (high >= LONG_REPEAT or _contains_long_repeat(body)) if long_only else (low != high or _variable(body, ignore_case))
            chars = _chars(body, ignore_case)
            if not counts:
                if chain.count and low >= 1 and not chars & chain.chars:
                    chain = _Chain()
                else:
                    chain = _Chain(chain.count, chain.chars | chars) if chain.count else chain
            elif chain.count and low >= 1 and not chars & chain.chars:
                chain = _Chain(1, chars)  # must take a character the others cannot: a new run
            else:
                chain = _Chain(chain.count + 1, chain.chars | chars)
        elif op in (_OP.BRANCH, _OP.GROUPREF_EXISTS):
            branches = arg[1] if op == _OP.BRANCH else [arg[1], arg[2] or []]
            results = [_scan(list(branch), chain, ignore_case, long_only) for branch in branches]
            chain = _Chain(max(r[0].count for r in results), frozenset().union(*(r[0].chars for r in results)))
            longest = max([longest] + [r[1] for r in results])
        elif op in (_OP.ATOMIC_GROUP, _OP.POSSESSIVE_REPEAT):
            chain = _Chain()  # never gives back what it took: what follows cannot share its characters
        elif op == _OP.GROUPREF:
            chain = _Chain(chain.count + 1, _ALL)
        longest = max(longest, chain.count)
    return chain, longest


def _flags(ignore_case: bool, group: Any) -> bool:
    added, removed = group[1], group[2]
    return (ignore_case or bool(added & re.IGNORECASE)) and not removed & re.IGNORECASE


def _variable(items: list[tuple[Any, Any]], ignore_case: bool) -> bool:
    """Can `items` match texts of different lengths, or one text in more than one way? A possessive
    repeat or an atomic group matches one way from where it starts, so it is not variable here."""
    for op, arg in items:
        if op in _REPEATS:
            if arg[0] != arg[1] or _variable(arg[2], ignore_case):
                return True
        elif op == _OP.SUBPATTERN:
            if _variable(arg[3], _flags(ignore_case, arg)):
                return True
        elif op == _OP.BRANCH:
            if _ambiguous_branch(arg[1], ignore_case):
                return True
        elif op in (_OP.GROUPREF, _OP.GROUPREF_EXISTS):
            return True
    return False


def _ambiguous_branch(branches: list[Any], ignore_case: bool) -> bool:
    """Alternatives are harmless when each is fixed and they start with different characters."""
    firsts: list[frozenset[str]] = []
    for branch in branches:
        items = list(branch)
        if _variable(items, ignore_case) or not items or items[0][0] not in _SINGLE_CHAR:
            return True
        first = _char_set(items[0][0], items[0][1], ignore_case)
        if any(first & other for other in firsts):
            return True
        firsts.append(first)
    return False


def _has_delimiter(items: list[tuple[Any, Any]], ignore_case: bool) -> bool:
    """Does the body (groups flattened) hold a single character that none of its variable parts can match?"""
    flat = _flatten(items, ignore_case)
    variable_chars = frozenset().union(*(_chars([item], case) for item, case in flat
                                          if item[0] not in _SINGLE_CHAR and item[0] not in _ZERO_WIDTH))
    return any(item[0] in _SINGLE_CHAR and not _char_set(item[0], item[1], case) & variable_chars for item, case in flat)


def _flatten(items: list[tuple[Any, Any]], ignore_case: bool) -> list[tuple[tuple[Any, Any], bool]]:
    flat = []
    for op, arg in items:
        if op == _OP.SUBPATTERN:
            flat += _flatten(arg[3], _flags(ignore_case, arg))
        else:
            flat.append(((op, arg), ignore_case))
    return flat


def _contains_long_repeat(items: list[tuple[Any, Any]]) -> bool:
    for op, arg in items:
        if op in _REPEATS and (arg[1] >= LONG_REPEAT or _contains_long_repeat(arg[2])):
            return True
        if op == _OP.SUBPATTERN and _contains_long_repeat(arg[3]):
            return True
        if op == _OP.BRANCH and any(_contains_long_repeat(list(branch)) for branch in arg[1]):
            return True
    return False


def _chars(items: list[tuple[Any, Any]], ignore_case: bool) -> frozenset[str]:
    """Every character `items` can consume."""
    found: set[str] = set()
    for op, arg in items:
        if op in _SINGLE_CHAR:
            found |= _char_set(op, arg, ignore_case)
        elif op == _OP.SUBPATTERN:
            found |= _chars(arg[3], _flags(ignore_case, arg))
        elif op in _REPEATS or op == _OP.POSSESSIVE_REPEAT:
            found |= _chars(arg[2], ignore_case)
        elif op == _OP.ATOMIC_GROUP:
            found |= _chars(arg, ignore_case)
        elif op == _OP.BRANCH:
            for branch in arg[1]:
                found |= _chars(list(branch), ignore_case)
        elif op in (_OP.GROUPREF, _OP.GROUPREF_EXISTS):
            return _ALL
    return frozenset(found)


def _char_set(op: Any, arg: Any, ignore_case: bool) -> frozenset[str]:
    """The probe characters one single-character item matches."""
    if op == _OP.ANY:
        return _ALL
    if op in (_OP.LITERAL, _OP.NOT_LITERAL):
        matched = frozenset(c for c in _PROBES if _same(c, chr(arg), ignore_case))
        return matched if op == _OP.LITERAL else _ALL - matched
    negate = False
    matched: set[str] = set()
    for kind, value in arg:
        if kind == _OP.NEGATE:
            negate = True
        elif kind == _OP.LITERAL:
            matched |= {c for c in _PROBES if _same(c, chr(value), ignore_case)}
        elif kind in (_OP.RANGE, getattr(_OP, "RANGE_UNI_IGNORE", _OP.RANGE)):
            low, high = value
            matched |= {c for c in _PROBES if any(low <= ord(v) <= high for v in _variants(c, ignore_case))}
        elif kind == _OP.CATEGORY:
            name = str(value)
            positive = _CATEGORIES.get(name.replace("NOT_", ""))
            if positive is None:
                return _ALL  # a class this check does not know: assume it matches anything
            hits = {c for c in _PROBES if positive(c)}
            matched |= (set(_PROBES) - hits) if "NOT_" in name else hits
        else:
            return _ALL
    return frozenset(_ALL - matched if negate else matched)


def _variants(char: str, ignore_case: bool) -> set[str]:
    if not ignore_case:
        return {char}
    return {variant for variant in (char, char.lower(), char.upper(), char.casefold()) if len(variant) == 1}


def _same(probe: str, char: str, ignore_case: bool) -> bool:
    if probe == char:
        return True
    return ignore_case and bool(_variants(probe, True) & _variants(char, True))
