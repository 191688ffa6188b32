"""What a benchmark result records about the machine it ran on: CPU, cores, versions and the load.

Ratios measured on a shared 2-core machine mean little without the load beside them, so every speed result
stores both (read by the notebooks that quote the ratios).
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import torch


def machine(*libraries: str) -> dict:
    """CPU model, cores, torch and Python versions, and the versions of ``libraries`` (module names)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": cpu, "cores": os.cpu_count(), "torch": torch.__version__, "python": platform.python_version()}
    for name in libraries:
        info[name] = __import__(name).__version__
    return info


def load() -> dict:
    """The 1-, 5- and 15-minute load averages and the `uptime` line, now."""
    one, five, fifteen = os.getloadavg()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"load_1m": round(one, 2), "load_5m": round(five, 2), "load_15m": round(fifteen, 2), "uptime": uptime}
