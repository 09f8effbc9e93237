"""Work-queue selection criteria: a small SQL-like boolean language, parsed and evaluated safely.

JEDI rewrites criteria text into Python and runs it with `exec` (jedi-inventory.md §14.5); here the
text is tokenised and parsed into a tree that can only compare task attributes with literals:

    expr  := term (OR term)*            term := factor (AND factor)*
    factor:= NOT factor | '(' expr ')' | NAME predicate
    predicate := (= | == | != | <> | < | <= | > | >=) value
               | [NOT] IN '(' value {, value} ')'
               | [NOT] LIKE value
               | IS [NOT] NULL
    value := 'string' | "string" | number | :bind

`LIKE` has SQL semantics (`%` any run, `_` one character, `\\` escapes), matched by a wildcard matcher
whose time grows with pattern x value length at worst -- never a regex, whose backtracking a pattern like
`%a%a%a%a%b` makes exponential. Parentheses and NOTs nest at most MAX_DEPTH deep. Attribute names are checked against a known list at parse time; a missing
attribute behaves like SQL NULL (every comparison false, IS NULL true). Bind variables (`:p1`) take
their values from the queue's `variables` (JEDI's `p1:evgen,p2:simul`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, Union

from jedictl.engine.input import fields
from jedictl.errors import BadInput

#: Task attributes a criterion may use (JEDI's set plus a few more), matched case-insensitively.
KNOWN_ATTRIBUTES = (
    "prodSourceLabel", "processingType", "workingGroup", "coreCount", "site", "eventService",
    "splitRule", "campaign", "taskType", "userName", "vo", "cloud", "taskPriority", "ramCount",
    "transPath", "countryGroup",
)
_CANONICAL = {name.lower(): name for name in KNOWN_ATTRIBUTES}

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>'(?:[^']|'')*'|"(?:[^"]|"")*")
      | (?P<number>-?\d+(?:\.\d+)?)
      | (?P<bind>:[A-Za-z_]\w*)
      | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,)
      | (?P<word>[A-Za-z_]\w*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "LIKE", "IS", "NULL"}


@dataclass(frozen=True)
class Compare:
    attribute: str
    op: str
    value: Any


@dataclass(frozen=True)
class InList:
    attribute: str
    values: tuple[Any, ...]
    negated: bool


#: How deeply parentheses and NOTs may nest (the parser is recursive).
MAX_DEPTH = 50
#: LIKE pattern tokens besides literal characters.
ANY_RUN, ONE_CHAR = object(), object()


@dataclass(frozen=True)
class Like:
    attribute: str
    pattern: tuple[Any, ...]  # literal characters, ANY_RUN (%) and ONE_CHAR (_)
    negated: bool


@dataclass(frozen=True)
class IsNull:
    attribute: str
    negated: bool


@dataclass(frozen=True)
class Not:
    operand: "Node"


@dataclass(frozen=True)
class BoolOp:
    op: str  # AND | OR
    operands: tuple["Node", ...]


@dataclass(frozen=True)
class Always:
    """The empty criterion: matches every task."""


Node = Union[Compare, InList, Like, IsNull, Not, BoolOp, Always]


def parse(text: str | None, variables: Mapping[str, Any] | str | None = None, path: str = "criteria") -> Node:
    """Parse criteria text; raises BadInput naming `path` and the offending token."""
    if text is None or not text.strip():
        return Always()
    binds = parse_variables(variables, path)
    tokens = _tokenize(text, path)
    parser = _Parser(tokens, binds, path)
    node = parser.expression()
    if parser.position < len(tokens):
        raise BadInput(f"unexpected {tokens[parser.position][1]!r}", path)
    return node


def parse_variables(variables: Mapping[str, Any] | str | None, path: str = "variables") -> dict[str, Any]:
    """JEDI's `p1:evgen,p2:simul` text, or a mapping, as a dict of bind values."""
    if variables is None or variables == "":
        return {}
    if isinstance(variables, Mapping):
        values = {}
        for key, value in variables.items():
            name = str(key).lstrip(":")
            if isinstance(value, str):
                fields.text(value, f"{path}.{name}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                raise BadInput("must be a string or a number", f"{path}.{name}")
            else:
                fields.number(value, f"{path}.{name}")  # finite
            values[name] = value
        return values
    result: dict[str, Any] = {}
    for item in fields.text(variables, path, max_length=4096).split(","):  # type: ignore[union-attr]
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise BadInput(f"{item!r} is not name:value", path)
        result[name.strip()] = value.strip()
    return result


def evaluate(node: Node, attributes: Mapping[str, Any]) -> bool:
    """True when the task described by `attributes` (keyed by KNOWN_ATTRIBUTES names) matches."""
    if isinstance(node, Always):
        return True
    if isinstance(node, BoolOp):
        results = (evaluate(operand, attributes) for operand in node.operands)
        return all(results) if node.op == "AND" else any(results)
    if isinstance(node, Not):
        return not evaluate(node.operand, attributes)
    value = attributes.get(node.attribute)
    if isinstance(node, IsNull):
        return (value is None) != node.negated
    if value is None:
        return False
    if isinstance(node, InList):
        return any(_equal(value, item) for item in node.values) != node.negated
    if isinstance(node, Like):
        return like_match(node.pattern, str(value)) != node.negated
    return _compare(value, node.op, node.value)


def _equal(left: Any, right: Any) -> bool:
    both_numbers = _as_number(left), _as_number(right)
    if None not in both_numbers:
        return both_numbers[0] == both_numbers[1]
    return str(left) == str(right)


def _compare(left: Any, op: str, right: Any) -> bool:
    if op in ("=", "=="):
        return _equal(left, right)
    if op in ("!=", "<>"):
        return not _equal(left, right)
    a, b = _as_number(left), _as_number(right)
    if a is None or b is None:
        a, b = str(left), str(right)  # type: ignore[assignment]
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]  # type: ignore[operator]


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and re.fullmatch(r"-?\d+(\.\d+)?", value.strip()):
        return float(value)
    return None


def like_tokens(pattern: str) -> tuple[Any, ...]:
    """SQL LIKE as tokens; a backslash makes the next character literal (PostgreSQL's escape)."""
    tokens: list[Any] = []
    chars = iter(pattern)
    for char in chars:
        if char == "\\":
            tokens.append(next(chars, "\\"))
        elif char == "%":
            if not tokens or tokens[-1] is not ANY_RUN:  # %% is %
                tokens.append(ANY_RUN)
        else:
            tokens.append(ONE_CHAR if char == "_" else char)
    return tuple(tokens)


def like_match(tokens: Sequence[Any], value: str) -> bool:
    """Does `value` match the LIKE tokens whole? Greedy, going back only to the last %: at most
    len(tokens) x len(value) steps."""
    position = index = 0
    star, star_position = -1, 0
    while position < len(value):
        if index < len(tokens) and tokens[index] is not ANY_RUN and (tokens[index] is ONE_CHAR or tokens[index] == value[position]):
            index += 1
            position += 1
        elif index < len(tokens) and tokens[index] is ANY_RUN:
            star, star_position = index, position
            index += 1
        elif star >= 0:  # let the last % take one more character and retry from there
            star_position += 1
            index, position = star + 1, star_position
        else:
            return False
    while index < len(tokens) and tokens[index] is ANY_RUN:
        index += 1
    return index == len(tokens)


def _tokenize(text: str, path: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise BadInput(f"cannot read {text[position:position + 12]!r} at character {position + 1}", path)
        kind = match.lastgroup or ""
        value = match.group(kind)
        if kind == "word" and value.upper() in _KEYWORDS:
            kind, value = "keyword", value.upper()
        tokens.append((kind, value))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, tokens: Sequence[tuple[str, str]], binds: Mapping[str, Any], path: str):
        self.tokens = tokens
        self.binds = binds
        self.path = path
        self.position = 0
        self.depth = 0

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self) -> tuple[str, str]:
        token = self._peek()
        if token is None:
            raise BadInput("ends too early", self.path)
        self.position += 1
        return token

    def _accept(self, kind: str, value: str | None = None) -> bool:
        token = self._peek()
        if token is not None and token[0] == kind and (value is None or token[1] == value):
            self.position += 1
            return True
        return False

    def _expect(self, kind: str, value: str) -> None:
        if self._peek() is None:
            raise BadInput(f"ends too early: expected {value!r}", self.path)
        token = self._take()
        if token != (kind, value):
            raise BadInput(f"expected {value!r}, found {token[1]!r}", self.path)

    def expression(self) -> Node:
        operands = [self.term()]
        while self._accept("keyword", "OR"):
            operands.append(self.term())
        return operands[0] if len(operands) == 1 else BoolOp("OR", tuple(operands))

    def term(self) -> Node:
        operands = [self.factor()]
        while self._accept("keyword", "AND"):
            operands.append(self.factor())
        return operands[0] if len(operands) == 1 else BoolOp("AND", tuple(operands))

    def factor(self) -> Node:
        if self._accept("keyword", "NOT"):
            return Not(self._nested(self.factor))
        if self._accept("op", "("):
            node = self._nested(self.expression)
            self._expect("op", ")")
            return node
        kind, word = self._take()
        if kind != "word":
            raise BadInput(f"expected an attribute name, found {word!r}", self.path)
        attribute = _CANONICAL.get(word.lower())
        if attribute is None:
            raise BadInput(f"unknown attribute {word!r} (known: {', '.join(KNOWN_ATTRIBUTES)})", self.path)
        return self.predicate(attribute)

    def _nested(self, parse: Any) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise BadInput(f"nests parentheses and NOTs more than {MAX_DEPTH} deep", self.path)
        try:
            return parse()
        finally:
            self.depth -= 1

    def predicate(self, attribute: str) -> Node:
        if self._accept("keyword", "IS"):
            negated = self._accept("keyword", "NOT")
            self._expect("keyword", "NULL")
            return IsNull(attribute, negated)
        negated = self._accept("keyword", "NOT")
        if self._accept("keyword", "IN"):
            self._expect("op", "(")
            values = [self.value()]
            while self._accept("op", ","):
                values.append(self.value())
            self._expect("op", ")")
            return InList(attribute, tuple(values), negated)
        if self._accept("keyword", "LIKE"):
            return Like(attribute, like_tokens(str(self.value())), negated)
        if negated:
            raise BadInput("NOT must be followed by IN or LIKE here", self.path)
        kind, op = self._take()
        if kind != "op" or op not in ("=", "==", "!=", "<>", "<", "<=", ">", ">="):
            raise BadInput(f"expected a comparison after {attribute}, found {op!r}", self.path)
        return Compare(attribute, op, self.value())

    def value(self) -> Any:
        kind, text = self._take()
        if kind == "string":
            quote = text[0]
            return text[1:-1].replace(quote * 2, quote)
        if kind == "number":
            return float(text) if "." in text else int(text)
        if kind == "bind":
            name = text[1:]
            if name not in self.binds:
                raise BadInput(f"bind variable {text} has no value in variables", self.path)
            return self.binds[name]
        raise BadInput(f"expected a value, found {text!r}", self.path)
