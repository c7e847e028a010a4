"""python -m cucore doctor [--json]: what this machine offers cucore.

The report is libcucore's (cucore.pathfinder.doctor()), the same one the CLI's
`cucore doctor` prints, in the same words; this works from a wheel that ships
no CLI.
"""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cucore", description="cucore's Python module")
    sub = parser.add_subparsers(dest="command", required=True)
    doctor = sub.add_parser("doctor", help="what this machine offers cucore (components, devices, NVML, verdict)")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        import cucore

        report = cucore.pathfinder.doctor()
        sys.stdout.write(report.json() if args.json else report.text())
        return report.exit_status
    return 2


if __name__ == "__main__":
    sys.exit(main())
