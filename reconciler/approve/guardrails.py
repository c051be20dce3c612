"""Guardrails: policies every rendered object and every resolution must pass, evaluated offline.

A policy is written as a Kubernetes ``ValidatingAdmissionPolicy``
(``admissionregistration.k8s.io/v1``), so what a platform team already
writes for its clusters reads the same here: ``spec.matchConstraints``
(``resourceRules`` and ``excludeResourceRules`` by API group, version,
resource and operation), ``spec.matchConditions`` and ``spec.validations``
(CEL ``expression``, ``message`` or ``messageExpression``), and
``spec.failurePolicy`` for expressions that fail at run time. The objects
are checked as a CREATE; ``object`` is the rendered object, ``oldObject``
is null, ``request`` carries kind, namespace, name and operation, and
``params`` the repository's and the bundle's facts (``catalogs``: the catalogs it lists;
``serviceAccounts``: the bundle's own, as ``namespace/name``). ``object`` is converted for CEL only
once ``matchConditions`` have selected the object.

The resolution of each Operator is checked too, as an object of the
resource ``resolutions`` in the group ``reconciler.dev``, with the fields
operator, kind, package, bundle, version, catalog, channel, source and
declaredBundle; only rules that name the group ``reconciler.dev`` itself
select it (a ``*`` group means Kubernetes objects).

The project's defaults come from the top-level ``policies/`` folder
(``/etc/reconciler/policies`` in the image, or ``$RECONCILER_POLICIES``);
a repository adds its own in its ``policies/`` folder, and may switch a
default off by declaring a policy of the same name with no validations.
An approval record may waive a policy for one exact bundle.

CEL in Python is slow to start (cel-python's parser) and to run (about a
millisecond per object), while most runs judge what an earlier run judged.
So verdicts are remembered across processes (``verdicts.py``), keyed by the
policy and by exactly the inputs its expressions read: the top-level fields
of ``object``, ``request`` and ``params`` named in the expression text
(``Policy.reads``), or the whole variable when the text uses it any other
way. A run with nothing new to judge imports no CEL at all; a new bundle is
evaluated only for the objects whose inputs are new (a thousand ConfigMaps in
one namespace are one evaluation of a policy that reads
``request.namespace``). Whether a policy compiles is remembered the same way,
and programs are compiled on first use and kept for the process.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import yamlio
from reconciler.approve import verdicts
from reconciler.errors import InputError
from reconciler.model.kube import API_GROUP, Manifest

POLICY_API_VERSIONS = ("admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1beta1")
POLICY_KIND = "ValidatingAdmissionPolicy"
RESOLUTION_RESOURCE = (API_GROUP, "v1alpha1", "resolutions")
VARIABLES = ("object", "oldObject", "request", "params")
# A variable, and what follows it (a field named like one, ``x.object``, counts too: reading more is safe).
_VARIABLE = re.compile(r"(?<!\w)(" + "|".join(VARIABLES) + r")\b")
_FIELD = re.compile(r"\s*\.\s*([A-Za-z_]\w*)\b(\s*\()?")
WHOLE = None   # in Policy.reads: the expression uses the variable otherwise than by naming a field


@dataclass(frozen=True)
class _Rule:
    groups: tuple[str, ...]
    versions: tuple[str, ...]
    resources: tuple[str, ...]
    operations: tuple[str, ...]

    def matches(self, group: str, version: str, resource: str) -> bool:
        def has(values: tuple[str, ...], value: str) -> bool:
            return "*" in values or value in values
        ops_ok = any(op in ("*", "CREATE") for op in self.operations)
        return ops_ok and has(self.groups, group) and has(self.versions, version) and (
            has(self.resources, resource) or has(self.resources, resource.split("/")[0]))


@dataclass(frozen=True)
class _Check:
    expression: str
    message: str = ""
    message_expression: str = ""

    @property
    def program(self) -> Callable[[dict], Any]:
        return _compiled(self.expression)

    @property
    def message_program(self) -> Callable[[dict], Any] | None:
        return _compiled(self.message_expression) if self.message_expression else None


def reads(expressions: Iterable[str]) -> dict[str, frozenset[str] | None]:
    """Which variables the expressions read, and of each which top-level fields (``WHOLE``: all of it).

    Read from the text, conservatively: a variable followed by ``.field`` reads that field (and whatever
    lies below it); any other use (indexing, ``.?`` optional access, a method such as ``request.all(...)``,
    comparing or passing the whole value, a comprehension variable of that name, the word inside a string
    literal) counts as reading all of it. A verdict keyed by what this returns is therefore never shared by
    two inputs the expressions could tell apart.
    """
    out: dict[str, frozenset[str] | None] = {}
    for text in expressions:
        for match in _VARIABLE.finditer(text):
            name = match.group(1)
            named = _FIELD.match(text, match.end())
            if named is None or named.group(2):
                out[name] = WHOLE
            elif name not in out or out[name] is not WHOLE:
                out[name] = (out.get(name) or frozenset()) | {named.group(1)}
    return out


@dataclass(frozen=True)
class Policy:
    name: str
    path: str
    rules: tuple[_Rule, ...]
    excluded: tuple[_Rule, ...]
    conditions: tuple[_Check, ...]
    validations: tuple[_Check, ...]
    fail_closed: bool = True

    @functools.cached_property
    def reads(self) -> dict[str, frozenset[str] | None]:
        return reads(text for c in self.conditions + self.validations for text in (c.expression, c.message_expression))

    @functools.cached_property
    def conditions_read(self) -> dict[str, frozenset[str] | None]:
        """What ``matchConditions`` read: when not ``object``, an object they exclude is never converted."""
        return reads(c.expression for c in self.conditions)

    @functools.cached_property
    def fingerprint(self) -> str:
        """What decides a verdict besides the inputs: the expressions, messages and failure policy."""
        return json.dumps([[(c.expression, c.message, c.message_expression) for c in part]
                           for part in (self.conditions, self.validations)] + [self.fail_closed])

    def applies(self, group: str, version: str, resource: str) -> bool:
        return any(r.matches(group, version, resource) for r in self.rules) and not any(
            r.matches(group, version, resource) for r in self.excluded)

    def applies_to_resolutions(self) -> bool:
        """Only rules that name the group reconciler.dev itself select resolutions, never a ``*``."""
        group, version, resource = RESOLUTION_RESOURCE
        return any(group in r.groups and r.matches(group, version, resource) for r in self.rules) and not any(
            r.matches(group, version, resource) for r in self.excluded)


@dataclass(frozen=True)
class Violation:
    policy: str
    path: str
    subject: str          # the object (or resolution) that violates it
    message: str

    def describe(self) -> str:
        return f"{self.subject}: policy {self.policy} ({self.path}): {self.message}"


def default_policy_dir() -> Path | None:
    for candidate in (os.environ.get("RECONCILER_POLICIES"), "/etc/reconciler/policies",
                      str(Path(__file__).resolve().parents[2] / "policies")):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


def load_policies(repo_root: Path | None = None) -> list[Policy]:
    """The project's defaults, then the repository's own; a repository policy replaces a default of its name."""
    found: dict[str, Policy] = {}
    sources = [(default_policy_dir(), None)]
    if repo_root is not None:
        sources.append((repo_root / "policies", repo_root))
    for directory, root in sources:
        if directory is None or not directory.is_dir():
            continue
        for path in sorted(directory.iterdir()):
            if path.name.startswith(".") or not path.name.endswith((".yaml", ".yml")):
                continue
            rel = path.relative_to(root).as_posix() if root else f"(default) {path.name}"
            for doc in yamlio.read_all(path, rel):
                policy = parse_policy(doc, rel)
                if root is not None and policy.name in found and not found[policy.name].path.startswith("(default)"):
                    raise InputError(f"policy {policy.name} is declared twice", path=rel,
                                     hint=f"the other is in {found[policy.name].path}")
                found[policy.name] = policy
    verdicts.store().flush()  # which expressions compile
    return [p for p in found.values() if p.validations]


def parse_policy(doc: Any, rel: str) -> Policy:
    if not isinstance(doc, dict) or doc.get("kind") != POLICY_KIND or doc.get("apiVersion") not in POLICY_API_VERSIONS:
        raise InputError(f"not a policy: expected apiVersion {POLICY_API_VERSIONS[0]}, kind {POLICY_KIND}", path=rel,
                         hint="policies/ holds ValidatingAdmissionPolicy documents only")
    meta, spec = doc.get("metadata"), doc.get("spec")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise InputError("the policy has no metadata.name", path=rel)
    where = f"ValidatingAdmissionPolicy {name}"
    if not isinstance(spec, dict):
        raise InputError("spec must be a mapping", path=rel, obj=where)
    constraints = spec.get("matchConstraints") or {}
    if not isinstance(constraints, dict):
        raise InputError("spec.matchConstraints must be a mapping", path=rel, obj=where)

    def rules(key: str) -> tuple[_Rule, ...]:
        out = []
        for i, r in enumerate(constraints.get(key) or []):
            if not isinstance(r, dict):
                raise InputError(f"spec.matchConstraints.{key}[{i}] must be a mapping", path=rel, obj=where)
            vals = []
            for k in ("apiGroups", "apiVersions", "resources", "operations"):
                v = r.get(k) or (["*"] if k == "operations" else [])
                if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                    raise InputError(f"spec.matchConstraints.{key}[{i}].{k} must be a list of strings",
                                     path=rel, obj=where)
                vals.append(tuple(v))
            out.append(_Rule(*vals))
        return tuple(out)

    def checks(key: str, text_key: str) -> tuple[_Check, ...]:
        items = spec.get(key) or []
        if not isinstance(items, list):
            raise InputError(f"spec.{key} must be a list", path=rel, obj=where)
        out = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("expression"), str):
                raise InputError(f"spec.{key}[{i}] needs an expression", path=rel, obj=where)
            msg_expr = item.get("messageExpression")
            _verify(item["expression"], rel, where, f"spec.{key}[{i}]")
            if isinstance(msg_expr, str) and msg_expr:
                _verify(msg_expr, rel, where, f"spec.{key}[{i}].messageExpression")
            out.append(_Check(item["expression"], str(item.get(text_key) or ""),
                              msg_expr if isinstance(msg_expr, str) else ""))
        return tuple(out)

    failure = spec.get("failurePolicy", "Fail")
    if failure not in ("Fail", "Ignore"):
        raise InputError("spec.failurePolicy must be Fail or Ignore", path=rel, obj=where)
    return Policy(name, rel, rules("resourceRules"), rules("excludeResourceRules"), checks("matchConditions", "name"),
                  checks("validations", "message"), failure == "Fail")


def _verify(expression: str, rel: str, where: str, field_path: str) -> None:
    """Refuse an expression that does not compile; one known to compile (``verdicts``) is not parsed again."""
    store, k = verdicts.store(), verdicts.key("compiles", expression)
    if store.get(k) is True:
        return
    try:
        _compiled(expression)
    except Exception as exc:  # cel-python raises its own parse error types
        raise InputError(f"{field_path}: CEL expression {expression!r} does not compile: "
                         f"{str(exc).strip().splitlines()[0]}", path=rel, obj=where) from None
    store.put(k, True)


@functools.lru_cache(maxsize=512)
def _compiled(expression: str) -> Callable[[dict], Any]:
    """Compiled on first use and kept: the loop judges with the same policies at every revision."""
    from reconciler.model import celbudget

    env = celbudget.environment()
    return env.program(env.compile(expression)).evaluate


class _EvalError(Exception):
    pass


class _TooCostly(Exception):
    pass


def _run(program: Callable[[dict], Any], activation: dict) -> Any:
    from reconciler.model import celbudget

    try:
        result = celbudget.evaluate(program, activation)
    except celbudget.BudgetExceeded:
        raise _TooCostly() from None
    except Exception as exc:  # cel-python raises its own evaluation error types
        raise _EvalError(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from None
    if isinstance(result, Exception):  # cel-python returns some errors as values
        raise _EvalError(str(result))
    return result


def _as_bool(value: Any) -> Any:
    import celpy

    return bool(value) if isinstance(value, (bool, celpy.celtypes.BoolType)) else value


def _check(policy: Policy, activation: dict, subject: str,
           load_object: Callable[[], None] | None = None) -> list[str]:
    """The messages of every validation the subject fails (none when a match condition excludes it).

    ``load_object`` puts ``object`` into the activation: called only once an expression needs it.
    """
    expression = ""
    try:
        if load_object is not None and "object" in policy.conditions_read:
            load_object()
        for cond in policy.conditions:
            expression = cond.expression
            if _as_bool(_run(cond.program, activation)) is not True:
                return []
        if load_object is not None and "object" in policy.reads:
            load_object()
        out = []
        for v in policy.validations:
            expression = v.expression
            result = _as_bool(_run(v.program, activation))
            if not isinstance(result, bool):
                raise _EvalError(f"expression {v.expression!r} returned {type(result).__name__}, not a boolean")
            if result is False:
                message = v.message or f"failed expression: {v.expression}"
                if v.message_program is not None:
                    expression = v.message_expression
                    try:
                        message = str(_run(v.message_program, activation))
                    except _EvalError:
                        pass
                out.append(message)
        return out
    except _TooCostly:
        from reconciler.model.celbudget import BUDGET

        raise InputError(f"CEL expression {expression!r} exceeded the evaluation budget ({BUDGET} steps) on "
                         f"{subject}", path=policy.path, obj=f"ValidatingAdmissionPolicy {policy.name}",
                         hint="nest fewer comprehensions (all, exists, map, filter) or iterate over "
                              "smaller lists") from None
    except _EvalError as exc:
        if not policy.fail_closed:
            return []
        return [f"the policy could not be evaluated: {exc}"]


def check_objects(policies: Iterable[Policy], objects: Iterable[Manifest], resource_of: Callable[[str, str], str],
                  params: dict[str, Any]) -> list[Violation]:
    """Every violation of every rendered object; ``resource_of(apiVersion, kind)`` names its resource.

    Verdicts come from the store when a policy already judged the same inputs (see the module's docstring);
    only the rest are evaluated, and their verdicts stored.
    """
    policies = list(policies)
    judge = _Judge(params)
    out = []
    try:
        for obj in objects:
            api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
            group, _, version = api_version.rpartition("/")
            resource = resource_of(api_version, kind)
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            subject = f"{kind} {meta.get('namespace', '') + '/' if meta.get('namespace') else ''}{meta.get('name', '?')}"
            applicable = [p for p in policies if p.applies(group, version, resource)]
            if not applicable:
                continue
            request = {"operation": "CREATE", "name": meta.get("name", ""), "namespace": meta.get("namespace", ""),
                       "kind": {"group": group, "version": version, "kind": kind},
                       "resource": {"group": group, "version": version, "resource": resource}}
            inputs = {"object": obj, "oldObject": None, "request": request}
            for policy in applicable:
                out.extend(judge(policy, inputs, subject))
    finally:
        judge.store.flush()
    return out


def check_resolution(policies: Iterable[Policy], resolution: dict[str, Any], params: dict[str, Any]) -> list[Violation]:
    """Violations of one Operator's resolution (package, catalog, bundle, source)."""
    group, version, resource = RESOLUTION_RESOURCE
    inputs = {"object": resolution, "oldObject": None,
              "request": {"operation": "CREATE", "name": resolution.get("operator", ""), "namespace": "",
                          "kind": {"group": group, "version": version, "kind": "Resolution"}}}
    subject = f"resolution of {resolution.get('operator')}"
    judge = _Judge(params)
    try:
        return [v for p in policies if p.applies_to_resolutions() for v in judge(p, inputs, subject)]
    finally:
        judge.store.flush()


class _Judge:
    """One policy on one subject: the stored verdict, or an evaluation whose verdict is stored."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.store = verdicts.store()
        self._cel_params: Any = None

    def __call__(self, policy: Policy, inputs: dict[str, Any], subject: str) -> list[Violation]:
        inputs = {**inputs, "params": self.params}
        k = verdicts.key("verdict", policy.fingerprint, _projection(policy.reads, inputs))
        messages = self.store.get(k)
        if not isinstance(messages, list):
            activation = self._activation(inputs)

            def load_object() -> None:
                import celpy

                if "object" not in activation:
                    activation["object"] = celpy.json_to_cel(inputs["object"])
            messages = _check(policy, activation, subject, load_object)
            self.store.put(k, messages)
        return [Violation(policy.name, policy.path, subject, m) for m in messages]

    def _activation(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Everything but ``object``: converting a large CRD for CEL is the costly part, done only when read."""
        import celpy

        if self._cel_params is None:
            self._cel_params = celpy.json_to_cel(self.params)
        return {"oldObject": None, "params": self._cel_params, "request": celpy.json_to_cel(inputs["request"])}


def _projection(read: dict[str, frozenset[str] | None], inputs: dict[str, Any]) -> str:
    """The inputs a policy reads, as canonical JSON: a field that is absent is left out, one that is null kept."""
    out: dict[str, Any] = {}
    for name, fields in sorted(read.items()):
        value = inputs.get(name)
        if fields is WHOLE or not isinstance(value, dict):
            out[name] = value
        else:
            out[name] = {f: value[f] for f in sorted(fields) if f in value}
    return json.dumps(out, sort_keys=True, separators=(",", ":"), default=str)
