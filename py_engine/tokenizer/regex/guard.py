"""Reject, at load time, tokenizer regexes whose matching could run away (issue 16).

A tokenizer.json regex is a program from the model's files, and stdlib `re` backtracks with no
time limit: `(a+)+!` on thirty a's runs for minutes. Neither host can interrupt it (no signals or
threads in Pyodide), so we prove a bound before the pattern ever runs, on the pattern `re` will
execute (the translated one, parsed by stdlib's own pure-Python parser).

The cost model. A backtracking search that reaches a position from which the pattern may end
without an assertion ("surely final") succeeds: it may still try longer alternatives first, but it
falls back to ending there. So the only work that is thrown away happens on paths through the
other positions. We build the pattern's position automaton (Glushkov), counting parallel edges
(`(a+)+` enters `a` from `a` two ways, which is exactly what makes it exponential), and explore
the path counts of those throw-away paths over every class of characters the pattern tells apart:
- more than MAX_PATHS paths on one text, or MAX_TESTS character tests at one point of it (empty
  choices multiply too: `(?:|)(?:|)x`): exponential or polynomial ambiguity, rejected;
- a repetition of something that can match nothing (`(a*)+`, `(a?){30}`): rejected, as the
  automaton cannot see which iterations were empty;
- a loop among throw-away positions costs a factor of the text length (`\\s*[\\r\\n]+`), as does a
  lookaround whose body loops; scanning the text is one more factor. Quadratic in the text length
  is allowed (Llama-3's and GPT-2's own patterns are there); more is rejected.
Approximations only ever over-count (bounded repeats become loops, case-insensitive classes grow),
so a rejection may be cautious but an accepted pattern keeps the bound. Backreferences and
conditionals are rejected outright: no tokenizer uses them and they defeat any such bound.
"""

import warnings
from re import _constants as sre
from re import _parser

from ..spec_error import SpecError
from .classes import atoms, character_class
from .unicode_classes import Range

MAX_PATHS = 32  # throw-away paths on one text; real tokenizers have fewer than 8
MAX_TESTS = 512  # character tests those paths make at one point of the text; real: under 100
MAX_POSITIONS = 2000  # character positions after unrolling: real patterns have under 100
MAX_CONFIGURATIONS = 5000  # path-count vectors explored
MAX_CHECK_WORK = 3_000_000  # bounds the check itself to well under a second
MAX_NESTING = 60
UNROLL_REPEATS = 16  # a{m,n} with n up to this is unrolled (exact); beyond, it is a loop
UNROLL_POSITIONS = 64
_COUNT_CAP = 1 << 20


class _Fragment:
    """Glushkov sets of a sub-pattern, each position with the number of ways it is reached."""

    __slots__ = ("first", "last", "clean_last", "nullable", "clean_nullable")

    def __init__(self, first=None, last=None, clean_last=None, nullable=0, clean_nullable=0):
        self.first: dict[int, int] = first or {}
        self.last: dict[int, int] = last or {}
        self.clean_last: dict[int, int] = clean_last or {}  # can end here with no assertion after
        self.nullable, self.clean_nullable = nullable, clean_nullable


def _add(a: dict[int, int], b: dict[int, int], times: int = 1) -> dict[int, int]:
    out = dict(a)
    if times:
        for key, count in b.items():
            out[key] = min(_COUNT_CAP, out.get(key, 0) + count * times)
    return out


def _zero_width(clean: bool) -> _Fragment:
    return _Fragment(nullable=1, clean_nullable=int(clean))


class _Automaton:
    def __init__(self, pattern: str, depth: int):
        self.pattern, self.depth = pattern, depth
        self.classes: list[tuple[Range, ...] | None] = [None]  # position 0 is the start
        self.edges: list[dict[int, int]] = [{}]
        self.assertion_cost = 0

    # --- building -------------------------------------------------------------------------

    def build(self, items, flags: int) -> _Fragment:
        fragment = _zero_width(True)
        for op, av in items:
            fragment = self._concat(fragment, self._node(op, av, flags))
        return fragment

    def _fail(self, problem: str) -> SpecError:
        return SpecError(f"regex {self.pattern[:200]!r} {problem}")

    def _position(self, ranges) -> _Fragment:
        if len(self.classes) > MAX_POSITIONS:
            raise self._fail(f"is too large to check (over {MAX_POSITIONS} character positions)")
        self.classes.append(tuple(ranges))
        self.edges.append({})
        position = len(self.classes) - 1
        return _Fragment({position: 1}, {position: 1}, {position: 1})

    def _link(self, last: dict[int, int], first: dict[int, int]) -> None:
        for p, ways_p in last.items():
            edges = self.edges[p]
            for q, ways_q in first.items():
                edges[q] = min(_COUNT_CAP, edges.get(q, 0) + ways_p * ways_q)

    def _concat(self, a: _Fragment, b: _Fragment) -> _Fragment:
        self._link(a.last, b.first)
        return _Fragment(
            _add(a.first, b.first, a.nullable),
            _add(b.last, a.last, b.nullable),
            _add(b.clean_last, a.clean_last, b.clean_nullable),
            min(_COUNT_CAP, a.nullable * b.nullable),
            min(_COUNT_CAP, a.clean_nullable * b.clean_nullable),
        )

    def _alternate(self, fragments: list[_Fragment]) -> _Fragment:
        out = _Fragment()
        for f in fragments:
            out.first, out.last = _add(out.first, f.first), _add(out.last, f.last)
            out.clean_last = _add(out.clean_last, f.clean_last)
            out.nullable = min(_COUNT_CAP, out.nullable + f.nullable)
            out.clean_nullable = min(_COUNT_CAP, out.clean_nullable + f.clean_nullable)
        return out

    def _repeat(self, low: int, high: int, body, flags: int) -> _Fragment:
        if high == 0:
            return _zero_width(True)
        before = len(self.classes)
        one = self.build(body, flags)
        size = len(self.classes) - before
        if high != sre.MAXREPEAT and high <= UNROLL_REPEATS and size * high <= UNROLL_POSITIONS:
            copies = [one] + [self.build(body, flags) for _ in range(high - 1)]
            tail = _zero_width(True)
            for copy in reversed(copies[low:]):  # a{m,n} = a^m (a (a ...)?)?
                tail = self._alternate([self._concat(copy, tail), _zero_width(True)])
            for copy in reversed(copies[:low]):
                tail = self._concat(copy, tail)
            return tail
        if one.nullable:
            # (a?){30} or ((?<=a))+: which iterations match nothing is a choice the loop below
            # would not see, and `re` may try them all.
            raise self._fail("repeats something that can match nothing, such as (a?){30} or (a*)+")
        self._link(one.last, one.first)  # a loop: every later iteration starts where one ends
        if low > 1:  # the loop stands for a{m,}: where it may end depends on a count we dropped
            one.clean_last, one.clean_nullable = {}, 0
        if low == 0:
            one.nullable, one.clean_nullable = one.nullable + 1, one.clean_nullable + 1
        return one

    def _node(self, op, av, flags: int) -> _Fragment:
        if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN):
            return self._position(character_class(op, av, flags))
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)):
            low, high, body = av
            return self._nested(lambda: self._repeat(low, high, body, flags))
        if op is sre.SUBPATTERN:
            _group, add_flags, del_flags, body = av
            return self._nested(lambda: self.build(body, (flags | add_flags) & ~del_flags))
        if op is getattr(sre, "ATOMIC_GROUP", None):
            return self._nested(lambda: self.build(av, flags))
        if op is sre.BRANCH:
            return self._nested(lambda: self._alternate([self.build(branch, flags) for branch in av[1]]))
        if op in (sre.ASSERT, sre.ASSERT_NOT):
            self._nested(lambda: self._assertion(av[1], flags))
            return _zero_width(False)
        if op is sre.AT:
            return _zero_width(False)
        if op is sre.FAILURE:
            return _Fragment()
        if op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
            raise self._fail("uses a backreference or a conditional group, which tokenizers do not need")
        raise self._fail(f"uses {op}, which the backtracking check does not know")

    def _nested(self, build):
        if self.depth >= MAX_NESTING:
            raise self._fail(f"nests groups deeper than {MAX_NESTING}")
        self.depth += 1
        try:
            return build()
        finally:
            self.depth -= 1

    def _assertion(self, body, flags: int) -> _Fragment:
        inner = _Automaton(self.pattern, self.depth)
        whole = inner.build(body, flags)
        inner.finish(whole)
        # One evaluation: throw-away paths (a factor n if they loop), a success path as long as
        # the text if it loops through final positions, and the lookarounds inside.
        cost = inner.throwaway_loops() + inner.final_loops() + inner.assertion_cost
        self.assertion_cost = max(self.assertion_cost, cost)
        return whole

    # --- checking -------------------------------------------------------------------------

    def finish(self, whole: _Fragment) -> None:
        self.edges[0] = dict(whole.first)
        self.final = set(whole.clean_last) | ({0} if whole.clean_nullable else set())
        self._count_throwaway_paths()

    def _count_throwaway_paths(self) -> None:
        class_ids: dict[tuple, int] = {}
        for ranges in self.classes[1:]:
            class_ids.setdefault(ranges, len(class_ids))
        bits = [0] + [1 << class_ids[ranges] for ranges in self.classes[1:]]
        # Each path tests the next character against every position it may go on to (counted
        # with the ways to get there: `(?:|)(?:|)x` tests x four times), but only paths through
        # positions that are not surely final can be thrown away and tried again.
        tests = [sum(edges.values()) for edges in self.edges]
        successors = [[(q, ways, bits[q]) for q, ways in edges.items() if q not in self.final] for edges in self.edges]
        atoms_ = atoms(list(class_ids))
        seeds = [((state, 1),) for state in {0, *self.final}]
        seen, frontier, work = set(seeds), list(seeds), 0
        while frontier:
            configuration = frontier.pop()
            if sum(ways * tests[state] for state, ways in configuration) > MAX_TESTS:
                raise self._fail(self._AMBIGUOUS)
            work += len(atoms_) * (1 + sum(len(successors[state]) for state, _ in configuration))
            if work > MAX_CHECK_WORK:
                raise self._fail("is too complex to check for runaway backtracking")
            for atom in atoms_:
                counts: dict[int, int] = {}
                for state, ways in configuration:
                    for q, edge_ways, bit in successors[state]:
                        if atom & bit:
                            counts[q] = min(_COUNT_CAP, counts.get(q, 0) + ways * edge_ways)
                if not counts:
                    continue
                if sum(counts.values()) > MAX_PATHS:
                    raise self._fail(self._AMBIGUOUS)
                following = tuple(sorted(counts.items()))
                if following not in seen:
                    if len(seen) >= MAX_CONFIGURATIONS:
                        raise self._fail("is too complex to check for runaway backtracking")
                    seen.add(following)
                    frontier.append(following)

    _AMBIGUOUS = "can backtrack exponentially or polynomially (ambiguous repetition such as (a+)+ or a*a*)"

    def throwaway_loops(self) -> int:
        """1 if positions that are not surely final lie on a loop (a failed attempt can then
        backtrack over a stretch as long as the text), else 0."""
        return int(_has_cycle(self.edges, lambda p: p not in self.final))

    def final_loops(self) -> int:
        return int(any(_reaches(self.edges, p, p) for p in self.final if p))


def _has_cycle(edges: list[dict[int, int]], keep) -> bool:
    state = {}  # 1: on the stack, 2: done
    for root in range(len(edges)):
        if not keep(root) or root in state:
            continue
        stack = [(root, iter(edges[root]))]
        state[root] = 1
        while stack:
            node, successors = stack[-1]
            for q in successors:
                if not keep(q):
                    continue
                if state.get(q) == 1:
                    return True
                if q not in state:
                    state[q] = 1
                    stack.append((q, iter(edges[q])))
                    break
            else:
                state[node] = 2
                stack.pop()
    return False


def _reaches(edges: list[dict[int, int]], source: int, target: int) -> bool:
    seen, stack = set(), list(edges[source])
    while stack:
        node = stack.pop()
        if node == target:
            return True
        if node not in seen:
            seen.add(node)
            stack.extend(edges[node])
    return False


def check_backtracking(translated: str, original: str) -> None:
    """Raise SpecError unless `translated` (what `re` runs for tokenizer regex `original`) is
    proven to match in at most quadratic time in the length of the text it scans."""
    try:
        with warnings.catch_warnings():  # the same warnings re.compile gave, and hid
            warnings.simplefilter("ignore")
            parsed = _parser.parse(translated)
    except RecursionError:
        raise SpecError(f"regex {original[:200]!r} nests too deeply") from None
    automaton = _Automaton(original, 0)
    automaton.finish(automaton.build(parsed.data, parsed.state.flags))
    # Scanning the text (a factor n), throw-away loops, and lookaround evaluations multiply.
    exponent = 1 + automaton.throwaway_loops() + automaton.assertion_cost
    if exponent > 2:
        raise SpecError(
            f"regex {original[:200]!r} can take time growing as the text length to the power "
            f"{exponent} (nested loops or loops inside lookarounds); at most quadratic is allowed"
        )
