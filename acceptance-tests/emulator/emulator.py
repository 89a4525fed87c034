"""Local AWS emulator for hpcforge: moto in-process behind our own WSGI middleware.

Start it through ./serve (which picks the venv's python). See README.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from types import FrameType

from werkzeug.serving import make_server


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="serve", description="Local AWS emulator (moto + hpcforge gaps).")
    parser.add_argument("--port", type=int, required=True, help="TCP port to listen on; 0 picks a free one")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port-file", help="write the port number to this file once listening")
    parser.add_argument("--fsx-create-delay", type=float, default=1.0, metavar="SECONDS", help="CREATING -> AVAILABLE")
    parser.add_argument("--fsx-update-delay", type=float, default=1.0, metavar="SECONDS", help="UPDATING -> AVAILABLE")
    parser.add_argument("--fsx-delete-delay", type=float, default=1.0, metavar="SECONDS", help="DELETING -> gone")
    parser.add_argument(
        "--snapshot-delay", type=float, default=1.0, metavar="SECONDS", help="snapshot pending -> completed"
    )
    parser.add_argument("--image-delay", type=float, default=1.0, metavar="SECONDS", help="image pending -> available")
    parser.add_argument("--seed", type=int, default=0, help="seed of the RNG behind ratio fault rules")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    parser.add_argument(
        "--boot-instances", action="store_true",
        help="boot a real machine (systemd-nspawn) per EC2 instance from its AMI's disk; needs root",
    )
    parser.add_argument(
        "--machine-budget", type=int, default=None, metavar="N",
        help="boot mode: machines at once (default: memory / 384 MiB, at most 64); past it launches get "
        "InsufficientInstanceCapacity",
    )
    parser.add_argument(
        "--block-store-mib", type=int, default=None, metavar="MIB",
        help="EBS direct APIs: snapshot block data kept in memory (default 1024); past it only checksums are kept, "
        "and an image whose blocks were not kept cannot boot",
    )
    parser.add_argument(
        "--no-host-routes", action="store_true",
        help="boot mode: route no VPC's CIDR from the host (as for one that overlaps a network the host uses): "
        "each VPC's client side is then a namespace, the instances' ClientNamespace in /_emulator/instances",
    )
    parser.add_argument(
        "--boot-dir", default="/var/tmp/hpcemu", metavar="DIR",
        help="boot mode: where machines, disks and shared file systems live (default /var/tmp/hpcemu)",
    )
    args = parser.parse_args(argv)
    if args.machine_budget is not None and args.machine_budget < 1:
        parser.error("--machine-budget must be at least 1")
    if args.block_store_mib is not None and args.block_store_mib < 1:
        parser.error("--block-store-mib must be at least 1")
    if not 0 <= args.port <= 65535:
        parser.error("--port must be between 0 and 65535")
    for name in ("fsx_create_delay", "fsx_update_delay", "fsx_delete_delay", "snapshot_delay", "image_delay"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must not be negative")
    return args


def write_port_file(path: str, port: int) -> None:
    """Writes atomically, so a reader polling for the file never sees it half written."""
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(f"{port}\n")
    os.replace(temporary, path)


def start_boot_mode(args: argparse.Namespace, app: object) -> object | None:
    """Checks what boot mode needs, removes what crashed runs left, installs the machines."""
    import boot
    import volumes
    from machines import MachineManager, default_budget

    missing = boot.missing_prerequisites()
    if missing:
        print(f"emulator: --boot-instances needs: {', '.join(missing)}", file=sys.stderr)
        return None
    for stale in boot.clean_stale(args.boot_dir):
        print(f"emulator: removed what an earlier run left: {stale}", file=sys.stderr)
    manager = MachineManager(args.boot_dir, args.machine_budget or default_budget(), app, not args.no_host_routes)
    boot.install(manager)
    volumes.install(manager)
    return manager


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.INFO if args.verbose else logging.WARNING)

    # moto is heavy to import; do it only once the arguments are known to be good.
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app

    import ebs
    import ec2
    import ec2_events
    import fsx
    import secrets_manager
    import service_quotas
    import ssm_tiers
    from config import CONFIG
    from faults import FAULTS
    from middleware import EmulatorMiddleware

    CONFIG.update(
        {
            "fsx_create_delay_s": args.fsx_create_delay,
            "fsx_update_delay_s": args.fsx_update_delay,
            "fsx_delete_delay_s": args.fsx_delete_delay,
            "snapshot_delay_s": args.snapshot_delay,
            "image_delay_s": args.image_delay,
            "seed": args.seed,
        }
    )
    FAULTS.reseed(args.seed)
    if args.block_store_mib is not None:
        ebs.BUDGET.limit = args.block_store_mib << 20
    fsx.install()
    ec2.install()
    ec2_events.install()
    ebs.install()
    secrets_manager.install()
    service_quotas.install()
    ssm_tiers.install()
    app = EmulatorMiddleware(DomainDispatcherApplication(create_backend_app))
    manager = None
    if args.boot_instances:
        manager = start_boot_mode(args, app)
        if manager is None:
            return 2
    try:
        server = make_server(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)
    except OSError as err:
        print(f"emulator: cannot listen on {args.host}:{args.port}: {err}", file=sys.stderr)
        return 1

    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    serving = threading.Thread(target=server.serve_forever, name="emulator-server", daemon=True)
    serving.start()

    port = server.server_port
    if args.port_file:
        write_port_file(args.port_file, port)
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"emulator listening on http://{host}:{port}", flush=True)

    stop.wait()
    if manager is not None:
        manager.close()
    server.shutdown()
    server.server_close()
    serving.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
