"""`tributary cluster up|down|status`: a Spark cluster and PostgreSQL server on this machine (`infra.deploy`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from infra.deploy import local_cluster, standalone
from infra.errors import TributaryError
from infra.settings import Settings


def _folder(args: argparse.Namespace, settings: Settings) -> Path:
    return Path(args.dir).expanduser() if args.dir else settings.home / "cluster"


def _up(args: argparse.Namespace, settings: Settings) -> int:
    folder = _folder(args, settings)
    cluster = local_cluster.up(folder, workers=args.workers, cores=args.cores, memory=args.memory)
    print(
        f"ok  Spark master {cluster.master} with {len(cluster.worker_uis)} workers (web UI http://127.0.0.1:{cluster.master_ui})"
    )
    print(f"ok  PostgreSQL on 127.0.0.1:{cluster.postgres_port} (databases tributary, dagster)")
    print(f"use it: source {folder.resolve() / 'env'}   stop it: tributary cluster down")
    return 0


def _down(args: argparse.Namespace, settings: Settings) -> int:
    stopped = local_cluster.down(_folder(args, settings))
    print(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")
    return 0


def _status(args: argparse.Namespace, settings: Settings) -> int:
    folder = _folder(args, settings)
    cluster = local_cluster.load(folder.resolve())
    if cluster is None:
        print(f"no cluster started from {folder}")
        return 1
    state = standalone.master_state(cluster.master_ui) or {}
    print(f"{cluster.master}: {state.get('aliveworkers', 0)} workers alive, {len(state.get('activeapps', []))} apps")
    return 0 if state.get("aliveworkers") == len(cluster.worker_uis) else 1


def _cluster(args: argparse.Namespace, settings: Settings) -> int:
    handler = {"up": _up, "down": _down, "status": _status}.get(args.cluster_command)
    if handler is None:
        raise TributaryError("choose a cluster command: 'tributary cluster up', 'down' or 'status'")
    return handler(args, settings)


def register(
    sub: argparse._SubParsersAction, handlers: dict[str, Callable[[argparse.Namespace, Settings], int]]
) -> None:
    """Add the `cluster` command (`up`, `down`, `status`) and its handler."""
    cluster = sub.add_parser("cluster", help="start/stop a Spark cluster and PostgreSQL on this machine (127.0.0.1)")
    actions = cluster.add_subparsers(dest="cluster_command", required=True)
    up = actions.add_parser(
        "up", help="start a master, workers and PostgreSQL; write <dir>/env for the cluster profile"
    )
    up.add_argument("--workers", type=int, default=2, help="how many workers (default 2)")
    up.add_argument("--cores", type=int, default=1, help="cores each worker offers (default 1)")
    up.add_argument("--memory", default="1500m", help="memory each worker offers to executors (default 1500m)")
    for action in (up, actions.add_parser("down", help="stop what 'up' started"), actions.add_parser("status")):
        action.add_argument("--dir", help="the cluster's folder (default <TRIBUTARY_HOME>/cluster)")
    handlers["cluster"] = _cluster
