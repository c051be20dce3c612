"""A thin, typed layer over the Kubernetes REST API.

Objects stay dicts. Discovery is lazy: the first lookup reads every group at
once (aggregated discovery), a group/version it did not list is read on its
own; it is kept in memory for one run and refreshed once when a kind is not
found (a CRD applied a moment ago). Requests go through a transport
(``rest.py``: urllib3 alone for certificates, tokens and passwords, else the
official client, so every kubeconfig auth method it supports works here). One
``Kube`` is safe to share between threads: its connection pool holds
``WORKERS`` connections, so the planner and the applier can keep that many
requests in flight.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import quote

from reconciler.errors import ClusterError
from reconciler.kube.reach import unreached
from reconciler.model.kube import Manifest, ObjectRef

if TYPE_CHECKING:  # the client library is imported when a cluster is first configured, not with this module
    from kubernetes import client as k8s_client

    from reconciler.kube.rest import Transport

APPLY_PATCH = "application/apply-patch+yaml"
# Requests in flight at once when order does not matter (see cluster/apply/order.py). A Role or binding written
# by an installer waits in the API server's escalation check for its RBAC cache to be current (the next watch
# progress notification, up to 100 ms, whatever the load): the waits of requests in flight overlap, so 240 Roles
# take 3.3 s eight at a time and 1.1 s thirty-two at a time (docs/approval.md).
WORKERS = 32
_PAGE = 500          # list page size: bounded responses, same total cost
_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
_AGGREGATED_DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
_log = logging.getLogger("reconciler.kube")


class ApiError(ClusterError):
    """The API server answered with an error status."""

    def __init__(self, status: int, reason: str, message: str, obj: str | None = None) -> None:
        self.status = status
        self.reason = reason
        super().__init__(f"{reason or status}: {message}", obj=obj)


@dataclass(frozen=True)
class ResourceInfo:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str = "", name: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{self.plural}"
        return f"{base}/{quote(name)}" if name else base


def load_api_client(kubeconfig: str | None = None, context: str | None = None, *,
                    preferred: str | None = None) -> Transport | k8s_client.ApiClient | None:
    """A client (``rest.py``) from --kubeconfig, $KUBECONFIG (merged as kubectl does), ~/.kube/config or the pod's
    service account.

    Returns None when no cluster is configured at all. An unknown context is reported as such, naming the
    files read and the contexts they define. ``preferred`` (a fleet cluster's context) is used when no
    ``context`` is given and the kubeconfig defines it. The official client library is imported only when the
    kubeconfig needs it (``rest.py`` speaks for certificates, tokens and passwords), and never when no
    cluster is configured: a dry run without one does not pay for it.
    """
    from reconciler.kube.kubeconfig import load_kubeconfig

    merged = load_kubeconfig(kubeconfig)
    if merged is None and not context and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    path = ", ".join(merged.files) if merged is not None else None
    if context is None and preferred is not None and merged is not None and preferred in merged.contexts:
        context = preferred
    client = _client(merged, context, path)
    if client is not None:   # what a failure to reach it names: the kubeconfig and the context it came from
        client.origin = Origin(merged.files, context or merged.current_context) if merged is not None else \
            Origin((), "", in_cluster=True)
    return client


@dataclass(frozen=True)
class Origin:
    """Where a client's cluster comes from: the kubeconfig files and the context (or the pod's account)."""

    files: tuple[str, ...]
    context: str
    in_cluster: bool = False

    def hint(self) -> str:
        """What to check when the API server does not answer, naming the file and the context."""
        if self.in_cluster:
            return ("the pod's service account names the cluster's API server (KUBERNETES_SERVICE_HOST); check "
                    "that it is up and that network policies let the pod reach it")
        files = ", ".join(self.files)
        flag = f"--kubeconfig {self.files[0]} " if len(self.files) == 1 else ""
        return (f"check that the cluster of context {self.context!r} in {files} is running and reachable "
                f"(`kubectl {flag}--context {self.context} version`), or pick another with --context; "
                f"`reconciler cluster up` starts a local one")


def _client(merged: Any, context: str | None, path: str | None) -> Transport | k8s_client.ApiClient | None:
    """The client of ``load_api_client`` (``merged`` None: the pod's service account)."""
    if merged is not None and (light := _light_client(merged, context)) is not None:
        return light
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.config.config_exception import ConfigException

    try:
        if merged is not None:
            merged.context(context)  # raises a ClusterError naming the files and the contexts available
            return k8s_config.new_client_from_config_dict(merged.config, context=context, persist_config=False)
        if context:
            raise ClusterError(f"--context {context} given, but no kubeconfig is configured",
                               hint="pass --kubeconfig or set $KUBECONFIG")
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            cfg = k8s_client.Configuration()
            k8s_config.load_incluster_config(client_configuration=cfg)
            cfg.connection_pool_maxsize = WORKERS
            return k8s_client.ApiClient(cfg)
    except ConfigException as exc:
        raise ClusterError(f"cannot load the cluster configuration: {exc}", path=path or None,
                           hint="check the kubeconfig: it needs clusters, users and contexts") from None
    except ClusterError:
        raise
    except Exception as exc:  # noqa: BLE001 - the client library fails on a malformed file in many ways
        detail = " ".join(str(exc).split())[:300]
        raise ClusterError(f"the kubeconfig is not valid: {type(exc).__name__}: {detail}", path=path or None,
                           hint="check the kubeconfig: it must be a YAML mapping with clusters, users and "
                                "contexts (`kubectl config view` shows how kubectl reads it)") from None
    return None


def _light_client(merged: Any, context: str | None) -> Transport | None:
    """``rest.py``'s client for one context of a merged kubeconfig, or None where it does not speak the
    context's credentials (or the entry is malformed: the official client then says what is wrong with it)."""
    from reconciler.kube import rest

    wanted = merged.context(context)  # raises a ClusterError naming the files and the contexts available
    try:
        return rest.from_kubeconfig(merged.config, wanted, WORKERS)
    except Exception:  # noqa: BLE001
        return None


def client_for_context(merged: Any, context: str) -> Transport | k8s_client.ApiClient:
    """A client for one context of a kubeconfig already loaded (``kubeconfig.load_kubeconfig``), built as
    ``load_api_client`` builds one: a fleet reads each of its clusters through this."""
    light = _light_client(merged, context)
    if light is not None:
        return light
    from kubernetes import config as k8s_config

    return k8s_config.new_client_from_config_dict(merged.config, context=context, persist_config=False)


class Kube:
    """Requests and discovery against one cluster."""

    def __init__(self, api: k8s_client.ApiClient | Transport, *, attempts: int | None = None,
                 timeout: tuple[float, float] = (10, 60)) -> None:
        """``api`` is a transport (``rest.py``) or an official ``ApiClient``; ``attempts`` bounds the tries of
        one request (default: ``retry.DEFAULT_POLICY``); ``timeout`` is (connect, read) seconds. A fleet-wide
        read lowers both, so an unreachable cluster answers quickly."""
        from reconciler.kube.rest import transport

        self.transport = transport(api, WORKERS)
        self.origin: Origin | None = getattr(api, "origin", None)   # the kubeconfig and context it came from
        self.attempts = attempts
        self.timeout = timeout
        self._groups: dict[str, dict[str, ResourceInfo]] = {}
        self._discovery_lock = threading.RLock()
        self._aggregated = [False]   # whether aggregated discovery was read; shared with impersonating copies
        self.impersonated: str | None = None
        self.journal: Callable[[str, str, int, Any], None] | None = None   # told of each write done (``recording``)

    def impersonating(self, user: str) -> Kube:
        """The same connection and discovery, every request made as ``user`` (Impersonate-User)."""
        other = copy.copy(self)
        other.impersonated = user
        other.journal = None   # what an installer writes is a bundle's: the engine records it as a change
        return other

    def recording(self, journal: Callable[[str, str, int, Any], None]) -> Kube:
        """The same connection and discovery, each write the API server accepted (not a dry run) told to
        ``journal`` as (method, path, status, response): how the engine enters in its change set what it writes
        besides a bundle's objects (``cluster/apply/bookkeeping.py``)."""
        other = copy.copy(self)
        other.journal = journal
        return other

    @property
    def server(self) -> str:
        return self.transport.host

    def request(self, method: str, path: str, *, query: list[tuple[str, str]] | None = None,
                body: Any = None, content_type: str = "application/json", obj: str | None = None,
                accept: str = "application/json", repeatable: bool | None = None) -> Any:
        """One API call, retried on 429, transient 5xx and dropped connections (see ``kube/retry.py``).

        ``repeatable`` says the call may be sent again after it may have been applied; by default reads,
        PUT, DELETE and server-side apply are, and a POST is not (pass True when a 409 is handled).
        """
        import urllib3

        from reconciler.kube import retry

        policy = retry.DEFAULT_POLICY if self.attempts is None else retry.RetryPolicy(attempts=self.attempts)
        repeat = retry.idempotent(method, content_type) if repeatable is None else repeatable
        headers = {"Accept": accept, "Content-Type": content_type}
        if self.impersonated:
            headers["Impersonate-User"] = self.impersonated
        # The transport encodes JSON bodies itself; other types (apply-patch+yaml) go out as the text we give:
        # JSON (valid YAML) in UTF-8, never \u escapes, which the server's YAML reader refuses for characters
        # outside the Basic Multilingual Plane (surrogate pairs).
        json_type = content_type.split(";")[0].strip().endswith("json")
        payload = body if json_type or body is None or isinstance(body, (str, bytes)) else \
            json.dumps(body, ensure_ascii=False).encode("utf-8")
        attempt = 0
        while True:
            attempt += 1
            last = attempt >= policy.attempts
            try:
                resp = self.transport.send(method, path, query=query or [], headers=headers, body=payload,
                                           timeout=self.timeout)
            except urllib3.exceptions.HTTPError as exc:
                reason = getattr(exc, "reason", None) or exc
                never_sent = isinstance(reason, (urllib3.exceptions.NewConnectionError,
                                                 urllib3.exceptions.ConnectTimeoutError))
                if last or not (never_sent or repeat):
                    tried = f" (tried {attempt} times)" if attempt > 1 else ""
                    origin = self.origin
                    raise ClusterError(f"cannot reach the API server at {self.server}{tried}: {unreached(exc)}",
                                       obj=obj, hint=(origin.hint() if origin is not None else
                                                      "check the kubeconfig and that the cluster is running")
                                       if never_sent else "the request may or may not have been applied; "
                                       "run again to converge") from None
                delay = policy.delay(attempt, None)
                _log.info("%s %s: connection failed (%s); attempt %d of %d in %.2fs", method, path,
                          type(reason).__name__, attempt + 1, policy.attempts, delay)
                time.sleep(delay)
                continue
            text = resp.data.decode("utf-8", "replace")
            if _log.isEnabledFor(logging.DEBUG):
                _log.debug("%s %s (%d bytes): %d", method, path, len(text), resp.status)
            if 200 <= resp.status <= 299:
                answer = json.loads(text) if text else None
                if self.journal is not None and method != "GET" and ("dryRun", "All") not in (query or []):
                    self.journal(method, path, resp.status, answer)
                return answer
            retry_after = retry.parse_retry_after(resp.header("Retry-After"))
            if not last and retry.retryable_status(resp.status, retry_after, repeatable=repeat):
                delay = policy.delay(attempt, retry_after)
                _log.info("%s %s: %d from the API server; attempt %d of %d in %.2fs", method, path, resp.status,
                          attempt + 1, policy.attempts, delay)
                time.sleep(delay)
                continue
            try:
                status = json.loads(text)
            except ValueError:
                raise ApiError(resp.status, "", text.strip()[:500], obj) from None
            raise ApiError(resp.status, status.get("reason", ""), status.get("message", text), obj)

    # discovery

    def _group_version(self, api_version: str) -> dict[str, ResourceInfo]:
        """The kinds ``api_version`` serves. The first lookup reads every group at once (aggregated discovery,
        two requests); a group/version it did not list (a CRD applied since, or a server without aggregated
        discovery) is read on its own. Workers share the result: each is fetched once."""
        with self._discovery_lock:
            known = self._groups.get(api_version)
            if known is not None:
                return known
            if not self._aggregated[0]:
                self._read_aggregated()   # a failure (not a refusal of the format) is the step's: tried again next time
                self._aggregated[0] = True
                known = self._groups.get(api_version)
                if known is not None:
                    return known
            group, _, version = api_version.rpartition("/")
            path = f"/apis/{api_version}" if group else f"/api/{version}"
            try:
                listing = self.request("GET", path)
            except ApiError as exc:
                if exc.status != 404:
                    raise
                listing = {"resources": []}
            self._groups[api_version] = {
                r["kind"]: ResourceInfo(group, version, r["kind"], r["name"], r["namespaced"])
                for r in listing.get("resources", []) if "/" not in r["name"]
            }
            return self._groups[api_version]

    def _read_aggregated(self) -> None:
        """Every group/version the server serves, from its aggregated discovery documents (``/api``, ``/apis``
        as APIGroupDiscoveryList); a server that answers otherwise leaves discovery to one request per group."""
        for path in ("/api", "/apis"):
            try:
                doc = self.request("GET", path, accept=_AGGREGATED_DISCOVERY)
            except ApiError as exc:
                if exc.status in (404, 406, 415):   # not served, or not in this format: one request per group
                    return
                raise
            if not isinstance(doc, dict) or doc.get("kind") != "APIGroupDiscoveryList":
                return
            for item in doc.get("items") or []:
                group = str((item.get("metadata") or {}).get("name") or "")
                for v in item.get("versions") or []:
                    version = str(v.get("version") or "")
                    kinds = {}
                    for r in v.get("resources") or []:
                        kind = str((r.get("responseKind") or {}).get("kind") or "")
                        if kind and r.get("resource"):
                            kinds[kind] = ResourceInfo(group, version, kind, str(r["resource"]),
                                                       r.get("scope") == "Namespaced")
                    self._groups.setdefault(f"{group}/{version}" if group else version, kinds)

    def resource(self, api_version: str, kind: str, *, refresh: bool = True) -> ResourceInfo | None:
        """The resource serving kind at apiVersion, or None if the server does not serve it. A kind missing from
        what an earlier lookup read is read again (a CRD may have been applied since); one missing from what
        this lookup has just read is not."""
        with self._discovery_lock:
            known_before = api_version in self._groups
        info = self._group_version(api_version).get(kind)
        if info is None and refresh and known_before:
            with self._discovery_lock:
                self._groups.pop(api_version, None)
            info = self._group_version(api_version).get(kind)
        return info

    def forget_discovery(self) -> None:
        with self._discovery_lock:
            self._groups.clear()
            self._aggregated[0] = False

    # objects

    def kind_of(self, api_version: str, plural: str) -> str | None:
        """The kind a resource name (an API path's ``deployments``) stands for, from discovery."""
        return next((i.kind for i in self._group_version(api_version).values() if i.plural == plural), None)

    def require_resource(self, obj: Manifest) -> ResourceInfo:
        ref = ObjectRef.of(obj)
        info = self.resource(obj["apiVersion"], obj["kind"])
        if info is None:
            raise ClusterError(f"the cluster does not serve {ref.kind} in {obj['apiVersion']}", obj=str(ref),
                               hint="install the CustomResourceDefinition that provides it first")
        return info

    def get(self, info: ResourceInfo, namespace: str, name: str) -> Manifest | None:
        try:
            return self.request("GET", info.path(namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def wait_gone(self, info: ResourceInfo, namespace: str, name: str, timeout: float) -> bool:
        """Poll until the object is gone (deleted, its finalizers and dependents done); False if it is still
        there after ``timeout`` seconds (the caller says what that means)."""
        deadline = time.monotonic() + timeout
        while self.get(info, namespace, name) is not None:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def list(self, info: ResourceInfo, *, label_selector: str | None = None, limit: int | None = None,
             namespace: str = "", metadata_only: bool = False) -> list[Manifest]:
        """Objects of one kind (in every namespace unless ``namespace``), all pages unless ``limit``.

        Items carry apiVersion and kind, as a GET of each would (list items of
        built-in kinds come without them). ``metadata_only`` asks the server
        for metadata alone (labels, annotations, managedFields): a list of
        large CRDs then costs kilobytes, not megabytes.
        """
        query = [("labelSelector", label_selector)] if label_selector else []
        query.append(("limit", str(limit or _PAGE)))
        accept = f"{_METADATA_LIST},application/json" if metadata_only else "application/json"
        api_version = f"{info.group}/{info.version}" if info.group else info.version
        items: list[Manifest] = []
        while True:
            page = self.request("GET", info.path(namespace), query=query, accept=accept)
            for item in page.get("items") or []:
                if metadata_only:  # PartialObjectMetadata: named as the object it describes
                    item["apiVersion"], item["kind"] = api_version, info.kind
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", info.kind)
                items.append(item)
            token = (page.get("metadata") or {}).get("continue")
            if limit or not token:
                return items
            query = [q for q in query if q[0] != "continue"] + [("continue", token)]

    def custom_resource_count(self, crd: Manifest) -> int:
        """How many custom resources of a CRD exist: one metadata LIST of one item, plus the count the API
        server reports for the rest (``remainingItemCount``), so exact without listing them all."""
        from reconciler.model.crdsafety import served_kind

        kind = served_kind(crd)
        info = self.resource(*kind) if kind else None
        if info is None:
            return 0
        page = self.request("GET", info.path(""), query=[("limit", "1")], accept=f"{_METADATA_LIST},application/json")
        items = len(page.get("items") or [])
        rest = (page.get("metadata") or {}).get("remainingItemCount")
        if items and rest is None and (page.get("metadata") or {}).get("continue"):
            return len(self.list(info, metadata_only=True))   # the server did not count: list them all
        return items + int(rest or 0)

    def apply(self, info: ResourceInfo, obj: Manifest, *, field_manager: str, dry_run: bool) -> Manifest:
        ref = ObjectRef.of(obj)
        query = [("fieldManager", field_manager), ("force", "true")]
        if dry_run:
            query.append(("dryRun", "All"))
        return self.request("PATCH", info.path(ref.namespace, ref.name), query=query, body=obj,
                            content_type=APPLY_PATCH, obj=str(ref))

    def delete(self, info: ResourceInfo, namespace: str, name: str, *, dry_run: bool = False) -> None:
        query = [("propagationPolicy", "Background")]
        if dry_run:
            query.append(("dryRun", "All"))
        try:
            self.request("DELETE", info.path(namespace, name), query=query)
        except ApiError as exc:
            if exc.status != 404:
                raise
