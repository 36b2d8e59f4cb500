"""``tuner onboard`` / ``tuner offboard``: give Deployments the tuner's preferred node affinity,
or take it away. Changing a pod template rolls the workload once, so this is an explicit,
one-time step and never happens during tuning.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner.errors import InputError, ServiceError
from tuner.execute.affinity import with_preference, without_preference
from tuner.execute.marks import Keys
from tuner.settings import Settings, load_settings

JSON_PATCH = "application/json-patch+json"


def add_onboard_parsers(commands: Any) -> None:
    """Register ``onboard`` and ``offboard``."""
    for name, remove, text in (
        ("onboard", False, "add the tuner's preferred node affinity to Deployments (rolls them)"),
        ("offboard", True, "remove the tuner's node affinity from Deployments (rolls them)"),
    ):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--settings", type=Path, help="settings.json (cluster, label prefix)")
        sub.add_argument(
            "--workloads",
            nargs="+",
            metavar="NS/NAME",
            help="Deployments (default: all outside analyse.excluded_namespaces)",
        )
        sub.add_argument("--dry-run", action="store_true", help="print, change nothing")
        sub.set_defaults(run=lambda a, remove=remove: run_onboard(a, remove=remove))


def _parse(text: str) -> tuple[str, str]:
    parts = text.split("/")
    if len(parts) == 3 and parts[1] == "Deployment":
        parts = [parts[0], parts[2]]
    if len(parts) != 2 or not all(parts):
        raise InputError(f"workload {text!r}: expected NAMESPACE/NAME of a Deployment")
    return parts[0], parts[1]


def run_onboard(args: argparse.Namespace, *, remove: bool) -> int:
    """Onboard (or offboard) the selected Deployments; prints one line per Deployment."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from tuner.monitor.kube import api_client, api_refusal

    settings = load_settings(args.settings)
    wanted = [_parse(w) for w in args.workloads or ()]
    with api_client(settings.kubernetes) as api:
        apps = client.AppsV1Api(api)
        try:
            deployments = _selected(apps, settings, wanted)
            verb = "offboard" if remove else "onboard"
            if not args.dry_run and deployments:
                print(
                    f"tuner: {verb}ing changes the pod template: each changed Deployment "
                    "rolls once (its pods are replaced)",
                    file=sys.stderr,
                )
            for deployment in deployments:
                print(_apply(api, apps, settings, deployment, remove=remove, dry=args.dry_run))
        except ApiException as err:
            raise ServiceError(f"kubernetes API: {api_refusal(err)}") from err
    return 0


def _selected(apps: Any, settings: Settings, wanted: list[tuple[str, str]]) -> list[Any]:
    from kubernetes.client.exceptions import ApiException

    if not wanted:
        excluded = settings.analyse.excluded_namespaces
        items = apps.list_deployment_for_all_namespaces().items
        return [d for d in items if d.metadata.namespace not in excluded]
    found = []
    for namespace, name in wanted:
        try:
            found.append(apps.read_namespaced_deployment(name, namespace))
        except ApiException as err:
            if err.status == 404:
                raise InputError(f"deployment {namespace}/{name} not found") from err
            raise
    return found


def _apply(
    api: Any, apps: Any, settings: Settings, deployment: Any, *, remove: bool, dry: bool
) -> str:
    keys = Keys(settings.execute.label_prefix)
    meta = deployment.metadata
    key = f"{meta.namespace}/{meta.name}"
    label = keys.workload_label(meta.namespace, meta.name)
    spec = deployment.spec.template.spec
    current = api.sanitize_for_serialization(spec.affinity) if spec.affinity else None
    edit: Callable[[Any, str], Any] = without_preference if remove else with_preference
    wanted = edit(current, label)
    if wanted == current:
        return f"{key}: already {'offboarded' if remove else 'onboarded'}"
    if dry:
        return f"{key}: would {'remove' if remove else 'add'} the preference for nodes with {label}"
    path = "/spec/template/spec/affinity"
    annotation = "/metadata/annotations/" + keys.onboarded.replace("~", "~0").replace("/", "~1")
    patch: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.resource_version},
        {"op": "remove", "path": path}
        if wanted is None
        else {"op": "add", "path": path, "value": wanted},
    ]
    annotations = meta.annotations or {}
    if remove and keys.onboarded in annotations:
        patch.append({"op": "remove", "path": annotation})
    elif not remove:
        if not annotations:
            patch.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        patch.append({"op": "add", "path": annotation, "value": "true"})
    apps.patch_namespaced_deployment(meta.name, meta.namespace, patch, _content_type=JSON_PATCH)
    done = "removed the preference for" if remove else "now prefers"
    return f"{key}: {done} nodes with {label} (rolling once)"
