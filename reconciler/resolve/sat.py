"""The resolution problem on python-sat: encoding, preference search, explanations.

Encoding (deppy's, on CNF):

* one variable per candidate bundle;
* each Operator or Input is mandatory: at least one of its candidates;
* each chosen bundle's dependencies: ``not b or d1 or ... or dn``;
* at most one bundle per package, and at most one provider per API;
* what is installed restricts an Operator to its installed bundle and the
  bundles one upgrade edge away, and an installed dependency's package the
  same way (``Hold``);
* bundles that need a newer Kubernetes than the cluster runs are excluded.

Every group of clauses is guarded by a selector literal and described as a
sentence (a "fact"). Solving under all selectors as assumptions yields, when
unsatisfiable, a core of facts; deletion-based minimisation turns it into a
minimal set of conflicting sentences a person can act on.

Preference is deppy's: choices are visited in order (declarations by name,
then the dependencies of each chosen bundle), and each takes its most
preferred candidate that keeps the whole problem satisfiable. The result is
deterministic for the same inputs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from pysat.card import CardEnc, EncType
from pysat.formula import IDPool
from pysat.solvers import Solver

from reconciler.model.constraints import Predicate, bundle_dependencies, gvk_text
from reconciler.model.catalog import PROP_GVK
from reconciler.resolve.universe import Candidate, Universe, dependency_order

UPGRADE_EDGES = "upgrades follow the catalog's upgrade edges"   # the fact a change no edge reaches conflicts with


@dataclass
class Requirement:
    """One Operator or Input to satisfy: its ordered candidates and what restricts them."""

    name: str
    label: str                                  # "Operator plumbus"
    text: str                                   # "Operator plumbus (operators/plumbus.yaml) requires ..."
    candidates: list[Candidate]
    allowed: set[tuple[str, str, str]] | None = None   # upgrade edges from what is installed
    installed: Candidate | None = None
    installed_name: str = ""                    # what is installed, also when the catalog no longer has it
    installed_from: str = ""                    # the lockfile that says so, when no cluster was read
    force: bool = False
    minimal_version: bool = False


@dataclass(frozen=True)
class Hold:
    """An installed dependency: its package may only stay at ``allowed`` (what is installed, one edge on)."""

    package: str
    allowed: frozenset[tuple[str, str, str]]
    text: str                                   # the fact, for explanations


@dataclass(frozen=True)
class Fact:
    selector: int
    text: str


@dataclass
class Choice:
    """A chosen bundle, who needed it, and why more preferred alternatives were not taken."""

    candidate: Candidate
    required_by: list[str] = field(default_factory=list)     # requirement names or "bundle X"
    because: list[str] = field(default_factory=list)         # what it satisfies
    rejected: list[tuple[str, list[str]]] = field(default_factory=list)  # (alternative, reasons)


@dataclass
class Outcome:
    choices: dict[tuple[str, str, str], Choice]
    by_requirement: dict[str, Candidate]
    dependencies: dict[tuple[str, str, str], list[tuple[str, Candidate]]]   # bundle -> [(need, satisfied by)]
    conflict: list[str] | None = None


class Problem:
    def __init__(self, universe: Universe, requirements: list[Requirement],
                 exclude: Callable[[Candidate], str | None] | None = None, holds: tuple[Hold, ...] = ()) -> None:
        self.universe = universe
        self.requirements = requirements
        self.holds = holds
        self.exclude = exclude                 # why a candidate may not be chosen (e.g. minKubeVersion), or None
        self.excluded: dict[tuple[str, str, str], str] = {}   # asked of the candidates in the problem only
        self.pool = IDPool()
        self.solver = Solver(name="minisat22")
        self.facts: list[Fact] = []
        self.fact_of: dict[int, Fact] = {}
        self.in_problem: dict[tuple[str, str, str], Candidate] = {}
        self.dep_lists: dict[tuple[str, str, str], list[tuple[Predicate, list[Candidate]]]] = {}
        self.minimal: set[tuple[str, str, str]] = set()    # bundles whose dependencies prefer old versions
        self.no_deps: set[tuple[str, str, str]] = set()    # bundles installed by force
        self._encode()

    def var(self, cand: Candidate) -> int:
        return self.pool.id(("bundle",) + cand.key)

    def _fact(self, text: str, clauses: list[list[int]]) -> None:
        selector = self.pool.id(("fact", len(self.facts)))
        fact = Fact(selector, text)
        self.facts.append(fact)
        self.fact_of[selector] = fact
        for clause in clauses:
            self.solver.add_clause(clause + [-selector])

    def _encode(self) -> None:
        queue: deque[tuple[Candidate, bool]] = deque()
        for req in self.requirements:
            names = ", ".join(c.name for c in req.candidates[:8]) + (" ..." if len(req.candidates) > 8 else "")
            text = f"{req.text}; " + (f"candidates: {names}" if req.candidates else "no bundle in any catalog "
                                                                                      "matches")
            self._fact(text, [[self.var(c) for c in req.candidates]])
            if req.allowed is not None and (req.installed is not None or req.installed_name):
                blocked = [c for c in req.candidates if c.key not in req.allowed]
                if blocked:
                    reachable = sorted(key[2] for key in req.allowed)
                    installed = req.installed.name if req.installed is not None else req.installed_name
                    known = f" (as {req.installed_from} records it: no cluster was read)" if req.installed_from else ""
                    self._fact(f"{req.label} has {installed} installed{known}, and {UPGRADE_EDGES} "
                               f"one hop at a time, which allow only: "
                               f"{', '.join(reachable) or 'nothing'} (inputClass: force moves it anywhere)",
                               [[-self.var(c)] for c in blocked])
            for c in req.candidates:
                if req.force:
                    self.no_deps.add(c.key)
                if req.minimal_version:
                    self.minimal.add(c.key)
                queue.append((c, req.force))
        while queue:
            cand, force = queue.popleft()
            if cand.key in self.in_problem:
                continue
            self.in_problem[cand.key] = cand
            reason = self.exclude(cand) if self.exclude is not None else None
            if reason:
                self.excluded[cand.key] = reason
                self._fact(f"{cand.name} {reason}", [[-self.var(cand)]])
            if force or cand.key in self.no_deps:
                self.dep_lists[cand.key] = []
                continue
            lists = []
            for need in bundle_dependencies(cand.bundle):
                options = dependency_order(self.universe.matching(need), cand, cand.key in self.minimal)
                lists.append((need, options))
                shown = ", ".join(str(o) for o in options[:6]) + (" ..." if len(options) > 6 else "")
                self._fact(f"{cand.name} requires {need.describe()}, " +
                           (f"provided by {shown}" if options else "which no bundle in any catalog provides"),
                           [[-self.var(cand)] + [self.var(o) for o in options]])
                for o in options:
                    if cand.key in self.minimal:
                        self.minimal.add(o.key)
                    queue.append((o, False))
            self.dep_lists[cand.key] = lists
        for hold in self.holds:
            blocked = sorted((c for c in self.in_problem.values() if c.package == hold.package
                              and c.key not in hold.allowed), key=lambda c: c.key)
            if blocked:
                self._fact(hold.text, [[-self.var(c)] for c in blocked])
        self._uniqueness()

    def _uniqueness(self) -> None:
        by_package: dict[str, list[Candidate]] = {}
        by_api: dict[tuple[str, str, str], list[Candidate]] = {}
        for cand in self.in_problem.values():
            by_package.setdefault(cand.package, []).append(cand)
            for v in cand.bundle.properties_of(PROP_GVK):
                if isinstance(v, dict):
                    by_api.setdefault((v.get("group", ""), v.get("version", ""), v.get("kind", "")), []).append(cand)
        for pkg, cands in sorted(by_package.items()):
            if len(cands) > 1:
                self._at_most_one(sorted(cands, key=lambda c: c.key),
                                  f"at most one bundle of package {pkg} can be installed")
        for api, cands in sorted(by_api.items()):
            if len({c.package for c in cands}) > 1:
                pkgs = sorted({c.package for c in cands})
                self._at_most_one(sorted(cands, key=lambda c: c.key),
                                  f"at most one package may provide API {gvk_text(*api)}, which "
                                  f"{', '.join(pkgs)} all provide")

    def _at_most_one(self, cands: list[Candidate], text: str) -> None:
        lits = [self.var(c) for c in cands]
        enc = EncType.pairwise if len(lits) <= 8 else EncType.seqcounter
        cnf = CardEnc.atmost(lits, bound=1, vpool=self.pool, encoding=enc)
        self._fact(text, [list(cl) for cl in cnf.clauses])

    # solving

    @property
    def selectors(self) -> list[int]:
        return [f.selector for f in self.facts]

    def explain(self) -> list[str]:
        """A minimal set of facts that cannot all hold."""
        self.solver.solve(assumptions=self.selectors)
        core = [lit for lit in (self.solver.get_core() or []) if lit in self.fact_of]
        i = 0
        while i < len(core):
            trial = core[:i] + core[i + 1:]
            if not self.solver.solve(assumptions=trial):
                smaller = [lit for lit in (self.solver.get_core() or []) if lit in self.fact_of]
                core = smaller if len(smaller) < len(trial) else trial
                i = 0 if len(smaller) < len(trial) else i
            else:
                i += 1
        return [self.fact_of[lit].text for lit in sorted(core)]

    def solve(self) -> Outcome:
        base = self.selectors
        if not self.solver.solve(assumptions=base):
            return Outcome({}, {}, {}, conflict=self.explain())
        chosen: list[int] = []
        chosen_set: set[tuple[str, str, str]] = set()
        choices: dict[tuple[str, str, str], Choice] = {}
        by_req: dict[str, Candidate] = {}
        deps: dict[tuple[str, str, str], list[tuple[str, Candidate]]] = {}
        # (who, the dependent bundle's key or None, what they need, ordered options, allowed keys or None)
        work: deque[tuple[str, tuple[str, str, str] | None, str, list[Candidate], set | None]] = deque(
            (r.name, None, r.text, r.candidates, r.allowed) for r in self.requirements)
        while work:
            who, dependent, need, options, allowed = work.popleft()
            taken = next((o for o in options if o.key in chosen_set), None)
            rejected: list[tuple[str, list[str]]] = []
            if taken is None:
                for o in options:
                    if allowed is not None and o.key not in allowed:
                        rejected.append((o.name, ["not one upgrade edge away from what is installed"]))
                        continue
                    if o.key in self.excluded:
                        rejected.append((o.name, [self.excluded[o.key]]))
                        continue
                    if self.solver.solve(assumptions=base + chosen + [self.var(o)]):
                        taken = o
                        chosen.append(self.var(o))
                        chosen_set.add(o.key)
                        choices[o.key] = Choice(o)
                        for dep_need, dep_options in self.dep_lists.get(o.key, []):
                            work.append((f"bundle {o.name}", o.key, dep_need.describe(), dep_options, None))
                        break
                    rejected.append((o.name, self._why_not(base + chosen, self.var(o))))
                if taken is None:  # cannot happen: the problem is satisfiable under `chosen`
                    raise AssertionError(f"no satisfiable option for {who}")
            choice = choices[taken.key]
            choice.required_by.append(who)
            choice.because.append(need)
            if not choice.rejected:
                choice.rejected = rejected
            if dependent is not None:
                deps.setdefault(dependent, []).append((need, taken))
            else:
                by_req[who] = taken
        return Outcome(choices, by_req, deps)

    def _why_not(self, assumptions: list[int], lit: int) -> list[str]:
        self.solver.solve(assumptions=assumptions + [lit])
        core = self.solver.get_core() or []
        reasons = [self.fact_of[x].text for x in core if x in self.fact_of]
        earlier = [x for x in core if x not in self.fact_of and x != lit]
        if earlier:
            names = [c.name for c in self.in_problem.values() if self.var(c) in earlier]
            reasons.append(f"conflicts with bundles already chosen: {', '.join(sorted(names))}")
        return reasons

    def close(self) -> None:
        self.solver.delete()
