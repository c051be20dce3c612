"""After applying, wait (bounded) until each Operator's components are healthy.

Every Operator is polled together, not one after another: a slow or broken
one costs the others nothing, and a reconcile takes as long as its slowest
Operator, at most ``timeout``. An Operator is done when all its components
are Current, or when one has Failed (kstatus' terminal state, e.g. a
Deployment past its progress deadline); the rest keep being polled until the
deadline. The verdicts become the Operator's status (``status.py``) and the
exit code (5 when something is not healthy in time).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.cluster.health import causes
from reconciler.cluster.health.judge import NOT_FOUND, Health, Status, conditions, judge, operand, webhook_services, worst
from reconciler.kube.client import ApiError, Kube
from reconciler.model.kube import Manifest, ObjectRef, operators_selector
from reconciler.report.words import counted

POLL_INTERVAL = 1.0
DEFAULT_TIMEOUT = 300.0


@dataclass(frozen=True)
class Component:
    """One applied object as it is now: identity, version and health."""

    ref: ObjectRef
    health: Health
    uid: str = ""
    resource_version: str = ""
    conditions: tuple[dict[str, Any], ...] = ()
    selector: str = ""   # a workload's pods, as a label selector: where the cause of a stuck rollout is read

    def to_status(self) -> dict[str, Any]:
        """The entry in ``status.components.refs``; abnormal components carry the conditions that explain them."""
        out: dict[str, Any] = {"apiVersion": self.ref.api_version, "kind": self.ref.kind, "name": self.ref.name}
        if self.ref.namespace:
            out["namespace"] = self.ref.namespace
        if self.uid:
            out["uid"] = self.uid
        if self.resource_version:
            out["resourceVersion"] = self.resource_version
        if not self.health.healthy:
            out["health"] = {"status": self.health.status.value, "reason": self.health.reason,
                             "message": self.health.message}
            abnormal = [dict(c) for c in self.conditions if _abnormal(c)]
            out["conditions"] = abnormal or [{"type": "Ready", "status": "False", "reason": self.health.reason,
                                              "message": self.health.message}]
        return out


def _abnormal(cond: Mapping[str, Any]) -> bool:
    """A condition that reports trouble: a positive-polarity one that is not True, or a negative one that is."""
    negative = cond.get("type") in ("Stalled", "Reconciling", "Degraded", "ReplicaFailure", "Failed")
    return (str(cond.get("status")) == "True") == negative


@dataclass(frozen=True)
class OperatorHealth:
    """The health of one Operator's components, and how long it was waited for."""

    name: str
    status: Status
    components: tuple[Component, ...]
    elapsed: float = 0.0
    timed_out: bool = False          # waited for, and still not healthy at the deadline
    operands: tuple[dict[str, Any], ...] = ()   # per owned CRD: how many of its custom resources are ready

    @property
    def healthy(self) -> bool:
        return self.status == Status.CURRENT

    @property
    def unhealthy(self) -> tuple[Component, ...]:
        return tuple(c for c in self.components if not c.health.healthy)

    @property
    def message(self) -> str:
        """What is wrong, first the components that failed, naming each and its reason."""
        if self.healthy:
            n = len(self.components)
            return f"{'its one component is' if n == 1 else 'all ' + counted(n, 'component') + ' are'} healthy"
        bad = sorted(self.unhealthy, key=lambda c: (c.health.status != Status.FAILED, str(c.ref)))
        text = "; ".join(f"{c.ref}: {c.health.message}" for c in bad[:3])
        if len(bad) > 3:
            text += f"; and {len(bad) - 3} more"
        return text


def check(kube: Kube, name: str, objects: Iterable[Manifest],
          known: Mapping[ObjectRef, Component] | None = None,
          listed: Mapping[tuple[str, str, str, str], Manifest] | None = None) -> OperatorHealth:
    """Judge every object of one Operator once; components in ``known`` that were Current are not fetched again.

    ``listed`` holds live objects already read (``read_listed``); the others are read one by one.
    """
    objects = list(objects)
    callers = webhook_services(objects)
    components = []
    for obj in objects:
        ref = ObjectRef.of(obj)
        previous = (known or {}).get(ref)
        if previous is not None and previous.health.healthy:
            components.append(previous)
            continue
        components.append(_component(kube, ref, (ref.namespace, ref.name) in callers and ref.kind == "Service"
                                     and ref.group == "", (listed or {}).get(ref.key)))
    return OperatorHealth(name, worst(c.health for c in components), tuple(components))


def read_listed(kube: Kube, operators: Mapping[str, Iterable[Manifest]]) -> dict[tuple[str, str, str, str], Manifest]:
    """The live objects of ``operators`` that carry their owner label, with one LIST per kind.

    Judging each component with a GET of its own cost a request per object
    on every reconcile. An object the lists do not return (its label was
    removed, or listing is not allowed) is read on its own by ``check``.
    """
    kinds: dict[tuple[str, str], set[str]] = {}
    for name, objs in operators.items():
        for obj in objs:
            kinds.setdefault((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))), set()).add(name)
    from reconciler.kube.concurrent import concurrently

    def listing(kind: tuple[tuple[str, str], set[str]]) -> list[Manifest]:
        (api_version, name), names = kind
        selector = operators_selector(names)
        try:
            info = kube.resource(api_version, name)
            return kube.list(info, label_selector=selector) if info is not None else []
        except ApiError:
            return []  # read one by one, as before
    out: dict[tuple[str, str, str, str], Manifest] = {}
    for items in concurrently(listing, sorted(kinds.items())):   # the kinds are independent: listed at once
        for item in items:
            out[ObjectRef.of(item).key] = item
    return out


def _component(kube: Kube, ref: ObjectRef, needs_endpoints: bool, live: Manifest | None = None) -> Component:
    try:
        if live is None:
            info = kube.resource(ref.api_version, ref.kind)
            live = kube.get(info, ref.namespace, ref.name) if info is not None else None
    except ApiError as exc:  # e.g. forbidden: the health is unknown, not a reason to abandon the others
        return Component(ref, Health(Status.IN_PROGRESS, f"could not be read: {exc.message}", "Unreadable"))
    if live is None:
        return Component(ref, NOT_FOUND)
    slices = _endpoint_slices(kube, ref) if needs_endpoints else None
    meta = live.get("metadata") or {}
    selector = causes.label_selector((live.get("spec") or {}).get("selector")) if (ref.group, ref.kind) in WORKLOADS \
        else ""
    return Component(ref, judge(live, slices), str(meta.get("uid", "")), str(meta.get("resourceVersion", "")),
                     tuple(conditions(live).values()), selector)


WORKLOADS = frozenset({("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet"), ("apps", "ReplicaSet")})


def explain(kube: Kube, health: OperatorHealth) -> OperatorHealth:
    """``health`` with each workload that is not healthy judged by the cause its pods show (``causes.py``): the
    reason becomes the cause's (``Unschedulable``, ``CrashLoopBackOff``, ...) and the message starts with it.

    One LIST of pods per such workload (by its selector), and one of Events for a pod whose readiness probe
    fails; called once, when waiting ends, so a rollout that merely takes its time costs nothing.
    """
    if health.healthy:
        return health
    components, changed = [], False
    for c in health.components:
        cause = _cause(kube, c.ref.namespace, c.selector) if c.selector and not c.health.healthy else None
        if cause is None:
            components.append(c)
            continue
        changed = True
        components.append(dataclasses.replace(
            c, health=Health(c.health.status, f"{cause.message}; {c.health.message}", cause.reason)))
    return dataclasses.replace(health, components=tuple(components)) if changed else health


def _cause(kube: Kube, namespace: str, selector: str) -> causes.Cause | None:
    try:
        pods = kube.resource("v1", "Pod")
        cause = causes.worst(kube.list(pods, label_selector=selector, namespace=namespace)) if pods else None
        if cause is not None and cause.probe_container:
            events = kube.resource("v1", "Event")
            if events is not None:
                listing = kube.request("GET", events.path(namespace), query=[
                    ("fieldSelector", f"involvedObject.kind=Pod,involvedObject.name={cause.pod}")])
                cause = cause.with_event((listing or {}).get("items") or [])
    except ApiError:
        return None   # the pods cannot be read (forbidden): the symptom is all there is to say
    return cause


def _endpoint_slices(kube: Kube, service: ObjectRef) -> list[Manifest]:
    info = kube.resource("discovery.k8s.io/v1", "EndpointSlice")
    if info is None:
        return []
    try:
        listing = kube.request("GET", info.path(service.namespace),
                               query=[("labelSelector", f"kubernetes.io/service-name={service.name}")])
    except ApiError:
        return []
    return list((listing or {}).get("items") or [])


def count_operands(kube: Kube, objects: Mapping[str, Iterable[Manifest]],
                   paths: Mapping[str, Mapping[str, str]]) -> dict[str, tuple[dict[str, Any], ...]]:
    """Per Operator, for each CRD among its ``objects`` that its CSV owns (``paths``: Operator -> CRD -> where its
    custom resources keep their conditions), the custom resources: total, ready, not ready. Every Operator's
    CRDs are listed at once, one LIST each.

    Operands are the users' objects: they are reported, and do not decide
    whether the Operator itself is Ready.
    """
    from reconciler.kube.concurrent import concurrently

    owned: list[tuple[str, Manifest]] = []
    for name, objs in objects.items():
        for obj in objs:
            ref = ObjectRef.of(obj)
            if (ref.group, ref.kind) == ("apiextensions.k8s.io", "CustomResourceDefinition") and \
                    ref.name in paths.get(name, {}):
                owned.append((name, obj))

    def custom_resources(entry: tuple[str, Manifest]) -> tuple[str, list[Manifest]]:
        spec = entry[1].get("spec") or {}
        versions = [v for v in spec.get("versions") or [] if v.get("served")]
        version = next((v["name"] for v in versions if v.get("storage")), versions[0]["name"] if versions else "")
        kind = (spec.get("names") or {}).get("kind", "")
        info = kube.resource(f"{spec.get('group')}/{version}", kind) if version and kind else None
        return kind, kube.list(info) if info is not None else []
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in paths if name in objects}
    for (name, obj), (kind, items) in zip(owned, concurrently(custom_resources, owned)):
        ref = ObjectRef.of(obj)
        verdicts = [(item, operand(item, paths[name][ref.name])) for item in items]
        not_ready = [v for v in verdicts if not v[1].healthy]
        entry: dict[str, Any] = {"crd": ref.name, "kind": kind, "total": len(items),
                                 "ready": len(items) - len(not_ready)}
        if not_ready:
            entry["notReady"] = [
                {"namespace": (i.get("metadata") or {}).get("namespace", ""), "name": (i.get("metadata") or {})
                 .get("name", ""), "reason": h.reason, "message": h.message} for i, h in not_ready[:10]]
        out[name].append(entry)
    return {name: tuple(entries) for name, entries in out.items()}


def wait_healthy(kube: Kube, operators: Mapping[str, Iterable[Manifest]], *, timeout: float,
                 progress: Callable[[str], object] | None = None, interval: float = POLL_INTERVAL,
                 operands: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, OperatorHealth]:
    """Poll every Operator until each is healthy or has failed, or ``timeout`` seconds pass (0: judge once).

    ``operands`` (Operator -> owned CRD -> conditions path) adds each Operator's operand counts.
    """
    objects = {name: list(objs) for name, objs in operators.items()}
    started = time.monotonic()
    deadline = started + max(timeout, 0.0)
    results: dict[str, OperatorHealth] = {}
    known: dict[str, dict[ObjectRef, Component]] = {name: {} for name in objects}
    pending = sorted(objects)
    while True:
        listed = read_listed(kube, {name: [o for o in objects[name] if not (
            (c := known[name].get(ObjectRef.of(o))) is not None and c.health.healthy)] for name in pending})
        for name in pending:
            health = check(kube, name, objects[name], known[name], listed)
            known[name] = {c.ref: c for c in health.components}
            results[name] = OperatorHealth(name, health.status, health.components, time.monotonic() - started)
        pending = [n for n in pending if results[n].status in (Status.IN_PROGRESS, Status.NOT_FOUND)]
        if not pending or time.monotonic() >= deadline:
            if timeout > 0:
                for name in pending:
                    results[name] = dataclasses.replace(results[name], timed_out=True)
            for name in results:   # what is still not healthy: its cause, read once
                results[name] = explain(kube, results[name])
            wanted = {name: paths for name, paths in (operands or {}).items() if paths and name in results}
            for name, tally in count_operands(kube, {n: objects[n] for n in wanted}, wanted).items():
                results[name] = dataclasses.replace(results[name], operands=tally)
            return {name: results[name] for name in sorted(results)}
        if progress is not None:
            waiting = results[pending[0]]
            progress(f"waiting for {counted(len(pending), 'Operator')} ({time.monotonic() - started:.0f}s/{timeout:.0f}s): "
                     f"{pending[0]}: {waiting.message}")
        time.sleep(min(interval, max(deadline - time.monotonic(), 0.0)))


# -- webhooks whose server is not ready yet ------------------------------------------------------

WEBHOOK_KINDS = (("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
                 ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"))


def soften_webhooks(kube: Kube, objects: Iterable[Manifest]) -> tuple[tuple[Manifest, ...], tuple[ObjectRef, ...]]:
    """``objects`` with the webhooks whose Service has no ready endpoint set to ``failurePolicy: Ignore``.

    Returns the objects and the configurations that were softened; the apply
    engine decides which to soften and restores them (``ownership/webhooks.py``).
    """
    out, softened = [], []
    asked: dict[tuple[str, str], bool] = {}   # webhooks of a bundle mostly share one Service: asked once each

    def unready_service(service: Mapping[str, Any]) -> bool:
        key = (str(service.get("namespace") or ""), str(service.get("name") or ""))
        if key not in asked:
            asked[key] = _service_unready(kube, service)
        return asked[key]
    for obj in objects:
        ref = ObjectRef.of(obj)
        if (ref.group, ref.kind) not in WEBHOOK_KINDS:
            out.append(obj)
            continue
        unready = [h for h in obj.get("webhooks") or []
                   if unready_service(((h.get("clientConfig") or {}).get("service") or {}))]
        if not unready or all(h.get("failurePolicy") == "Ignore" for h in unready):
            out.append(obj)
            continue
        names = {h.get("name") for h in unready}
        out.append({**obj, "webhooks": [{**h, "failurePolicy": "Ignore"} if h.get("name") in names else h
                                        for h in obj.get("webhooks") or []]})
        softened.append(ref)
    return tuple(out), tuple(softened)


def _service_unready(kube: Kube, service: Mapping[str, Any]) -> bool:
    if not service.get("name"):
        return False   # a URL webhook: nothing here serves it
    ref = ObjectRef("", "Service", str(service.get("namespace") or ""), str(service["name"]), "v1")
    slices = _endpoint_slices(kube, ref)
    return not judge({"apiVersion": "v1", "kind": "Service", "metadata": {"name": ref.name}}, slices).healthy
