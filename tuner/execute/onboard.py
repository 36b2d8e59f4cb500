"""``tuner onboard`` / ``tuner offboard``: give Deployments the tuner's preferred node affinity,
or take it away. Changing a pod template rolls the workload once, so this is an explicit,
one-time step that never happens during tuning, and nothing in it may surprise:

- the Deployments are named (``--workloads NS/NAME ...``) or ``--all`` says so explicitly;
  ``--all`` prints the list and asks for a confirmation on a terminal (``--yes`` answers it;
  without a terminal and without ``--yes`` it refuses, exit status 2);
- they roll one at a time: each patch is followed by a watch of the Deployment's status until
  its rollout completed (as ``kubectl rollout status`` reads it: the new generation observed,
  every replica updated and available, no old one left), and the first rollout that fails
  (the Deployment's progress deadline exceeded, or ``--timeout``) stops the command, naming
  what was rolled and what was not touched;
- the tuner's own Deployments are never touched: every Deployment in the tuner's own namespace
  (``execute.journal_namespace`` and ``daemon.leader_election.namespace``: where ``deploy/``
  runs it, its Lease and journal live, and its Role grants). The command runs with a
  person's credentials, usually outside the cluster, so its own pod's namespace (the downward
  API) is not what it can rely on; the settings are;
- ``--dry-run`` prints the JSON patch each Deployment would get and patches nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.errors import InputError, ServiceError
from tuner.execute.affinity import with_preference, without_preference
from tuner.execute.retry import ActionFailed, Retry
from tuner.execute.watch import Verification, wait_until
from tuner.model.conventions import Keys
from tuner.settings import Settings, load_settings

JSON_PATCH = "application/json-patch+json"
AFFINITY = "/spec/template/spec/affinity"
DEFAULT_PROGRESS_DEADLINE_S = 600
"""A Deployment's ``spec.progressDeadlineSeconds`` when unset (the API's default)."""
DEADLINE_MARGIN_S = 60.0
"""Waited past the progress deadline, for the deployment controller to report it."""


def add_onboard_parsers(commands: Any) -> None:
    """Register ``onboard`` and ``offboard``."""
    for name, remove, text in (
        ("onboard", False, "add the tuner's preferred node affinity to Deployments (rolls them)"),
        ("offboard", True, "remove the tuner's node affinity from Deployments (rolls them)"),
    ):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--settings", type=Path, help="settings.json (cluster, label prefix)")
        which = sub.add_mutually_exclusive_group(required=True)
        which.add_argument(
            "--workloads", nargs="+", metavar="NS/NAME", help="the Deployments to change"
        )
        which.add_argument(
            "--all",
            action="store_true",
            help="every Deployment outside analyse.excluded_namespaces and the tuner's own "
            "namespace (listed first, then confirmed)",
        )
        sub.add_argument("--yes", action="store_true", help="confirm --all without asking")
        sub.add_argument(
            "--timeout",
            type=float,
            metavar="SECONDS",
            help="longest wait for one rollout (default: the Deployment's progress deadline "
            "plus a minute)",
        )
        sub.add_argument("--dry-run", action="store_true", help="print the patches, change nothing")
        sub.set_defaults(run=lambda a, remove=remove: run_onboard(a, remove=remove))


def _parse(text: str) -> tuple[str, str]:
    parts = text.split("/")
    if len(parts) == 3 and parts[1] == "Deployment":
        parts = [parts[0], parts[2]]
    if len(parts) != 2 or not all(parts):
        raise InputError(f"workload {text!r}: expected NAMESPACE/NAME of a Deployment")
    return parts[0], parts[1]


def own_namespaces(settings: Settings) -> frozenset[str]:
    """The tuner's own namespaces: its Deployments there are never onboarded."""
    return frozenset(
        {settings.execute.journal_namespace, settings.daemon.leader_election.namespace}
    )


@dataclass(frozen=True)
class Change:
    """One Deployment's change: the JSON patch, and the generation it had."""

    key: str
    """``namespace/name``."""
    name: str
    namespace: str
    label: str
    patch: tuple[Mapping[str, Any], ...]


def change(
    deployment: Any, keys: Keys, *, remove: bool, serialize: Callable[[Any], Any]
) -> Change | None:
    """The patch that adds (or removes) the preference; None when there is nothing to do."""
    meta = deployment.metadata
    label = keys.workload_label(meta.namespace, meta.name)
    spec = deployment.spec.template.spec
    current = serialize(spec.affinity) if spec.affinity else None
    edit: Callable[[Any, str], Any] = without_preference if remove else with_preference
    wanted = edit(current, label)
    if wanted == current:
        return None
    annotation = "/metadata/annotations/" + keys.onboarded.replace("~", "~0").replace("/", "~1")
    patch: list[Mapping[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.resource_version},
        {"op": "remove", "path": AFFINITY}
        if wanted is None
        else {"op": "add", "path": AFFINITY, "value": wanted},
    ]
    annotations = meta.annotations or {}
    if remove and keys.onboarded in annotations:
        patch.append({"op": "remove", "path": annotation})
    elif not remove:
        if not annotations:
            patch.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        patch.append({"op": "add", "path": annotation, "value": "true"})
    return Change(f"{meta.namespace}/{meta.name}", meta.name, meta.namespace, label, tuple(patch))


def rolled_out(generation: int) -> Callable[[Mapping[str, Any]], Verification | None]:
    """Check on a Deployment (the one object watched): its rollout of ``generation`` is
    complete, or failed (progress deadline exceeded, or the Deployment deleted)."""

    def check(objects: Mapping[str, Any]) -> Verification | None:
        deployment = next(iter(objects.values()), None)
        if deployment is None:
            return Verification(False, "the Deployment was deleted")
        status = deployment.status
        if status is None or (status.observed_generation or 0) < generation:
            return None
        for condition in status.conditions or ():
            if condition.type == "Progressing" and condition.reason == "ProgressDeadlineExceeded":
                return Verification(False, f"rollout failed: {condition.message}")
        wanted = deployment.spec.replicas if deployment.spec.replicas is not None else 1
        updated = status.updated_replicas or 0
        if updated < wanted or (status.replicas or 0) > updated:
            return None
        if (status.available_replicas or 0) < updated:
            return None
        return Verification(True, f"rolled out: {updated} pod(s) updated and available")

    return check


def run_onboard(args: argparse.Namespace, *, remove: bool) -> int:
    """Onboard (or offboard) the selected Deployments, one rollout at a time."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from tuner.monitor.kube import api_client, api_refusal

    settings = load_settings(args.settings)
    if args.timeout is not None and not 0 < args.timeout <= 86400:
        raise InputError(f"--timeout {args.timeout:g}: expected 0 < SECONDS <= 86400")
    verb = "offboard" if remove else "onboard"
    keys = Keys(settings.execute.label_prefix)
    with api_client(settings.kubernetes) as api:
        apps = client.AppsV1Api(api)
        try:
            if args.all:
                deployments, left_out = _every(apps, settings)
            else:
                deployments, left_out = _named(apps, settings, args.workloads), []
            changes = []
            for deployment in deployments:
                found = change(
                    deployment, keys, remove=remove, serialize=api.sanitize_for_serialization
                )
                if found is None:
                    print(f"{_key(deployment)}: already {verb}ed")
                else:
                    changes.append(found)
            if args.all:
                _list(verb, changes, left_out)
            if args.dry_run:
                for one in changes:
                    print(f"{one.key}: would patch {json.dumps(list(one.patch))}")
                return 0
            if not changes or (args.all and not _confirmed(verb, len(changes), args.yes)):
                return 0
            _roll_each(apps, settings, changes, remove=remove, timeout_s=args.timeout)
        except ApiException as err:
            raise ServiceError(f"kubernetes API: {api_refusal(err)}") from err
    return 0


def _key(deployment: Any) -> str:
    return f"{deployment.metadata.namespace}/{deployment.metadata.name}"


def _named(apps: Any, settings: Settings, workloads: list[str]) -> list[Any]:
    """The Deployments named, read; one in the tuner's own namespace or missing is refused."""
    from kubernetes.client.exceptions import ApiException

    own = own_namespaces(settings)
    found = []
    for namespace, name in dict.fromkeys(_parse(w) for w in workloads):
        if namespace in own:
            raise InputError(
                f"deployment {namespace}/{name} is in the tuner's own namespace {namespace} "
                "(execute.journal_namespace, daemon.leader_election.namespace): never onboarded"
            )
        try:
            found.append(apps.read_namespaced_deployment(name, namespace))
        except ApiException as err:
            if err.status == 404:
                raise InputError(f"deployment {namespace}/{name} not found") from err
            raise
    return found


def _every(apps: Any, settings: Settings) -> tuple[list[Any], list[str]]:
    """Every Deployment but those of the excluded and the tuner's own namespaces; and those
    left out, each with why."""
    own, excluded = own_namespaces(settings), settings.analyse.excluded_namespaces
    chosen, left_out = [], []
    items = apps.list_deployment_for_all_namespaces().items
    for deployment in sorted(items, key=_key):
        namespace = deployment.metadata.namespace
        if namespace in own:
            left_out.append(f"{_key(deployment)} (the tuner's own namespace)")
        elif namespace in excluded:
            left_out.append(f"{_key(deployment)} (analyse.excluded_namespaces)")
        else:
            chosen.append(deployment)
    return chosen, left_out


def _list(verb: str, changes: list[Change], left_out: list[str]) -> None:
    """What ``--all`` would change, and what it leaves out."""
    print(
        f"{verb} --all: {len(changes)} Deployment(s) to change, one at a time "
        "(each rolls once: its pods are replaced):"
    )
    for one in changes:
        print(f"  {one.key}")
    if left_out:
        print(f"left out: {', '.join(left_out)}")


def _confirmed(verb: str, count: int, yes: bool) -> bool:
    """``--yes``, or the answer on a terminal; without either, refused (exit status 2)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise InputError(
            f"{verb} --all: confirm the {count} Deployment(s) listed with --yes "
            "(no terminal to ask on)"
        )
    try:
        answer = input(f"{verb} these {count} Deployment(s)? [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() in ("y", "yes"):
        return True
    print("nothing changed")
    return False


def _roll_each(
    apps: Any, settings: Settings, changes: list[Change], *, remove: bool, timeout_s: float | None
) -> None:
    """Patch each Deployment and wait for its rollout before the next; the first that fails
    stops it (a :class:`ServiceError` naming what was and was not rolled)."""
    print(
        f"tuner: {'offboarding' if remove else 'onboarding'} changes the pod template: each "
        "Deployment rolls once (its pods are replaced), one at a time",
        file=sys.stderr,
        flush=True,
    )
    done = "no longer prefers" if remove else "now prefers"
    for number, one in enumerate(changes, 1):
        print(f"{one.key}: {done} nodes with {one.label}; rolling out ...", flush=True)
        verdict = _roll(apps, settings, one, timeout_s)
        if not verdict.ok:
            untouched = ", ".join(c.key for c in changes[number:]) or "none"
            raise ServiceError(
                f"{one.key}: {verdict.reason}; stopped after {number - 1} of {len(changes)} "
                f"rolled out, not touched: {untouched} (to undo {one.key}: kubectl -n "
                f"{one.namespace} rollout undo deployment/{one.name})"
            )
        print(f"{one.key}: {verdict.reason} ({number}/{len(changes)})", flush=True)


def _roll(apps: Any, settings: Settings, one: Change, timeout_s: float | None) -> Verification:
    """Patch the Deployment, then watch it until its rollout completed or failed."""
    patched = apps.patch_namespaced_deployment(
        one.name, one.namespace, list(one.patch), _content_type=JSON_PATCH
    )
    deadline = patched.spec.progress_deadline_seconds or DEFAULT_PROGRESS_DEADLINE_S
    timeout = deadline + DEADLINE_MARGIN_S if timeout_s is None else timeout_s
    try:
        return wait_until(
            apps.list_namespaced_deployment,
            rolled_out(int(patched.metadata.generation or 0)),
            timeout_s=timeout,
            retry=Retry(settings.execute.api_retry_s),
            what=f"the rollout of {one.key}",
            namespace=one.namespace,
            field_selector=f"metadata.name={one.name}",
        )
    except ActionFailed as err:
        return Verification(False, str(err))
