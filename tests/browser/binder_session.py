"""A Binder session's environment for the tests' kernels, with a watch on their network access and peak memory.

Binder starts JupyterLab through binder/start, which chooses the teach preset and sets the Hugging Face Hub offline.
The JupyterLab browser test (test_notebooks_in_lab.py) starts its Lab server with that environment, and so does
tests/test_binder.py for notebooks 09-11 where no browser test runs. Two changes make it a test:

- the Hub variables binder/start sets are taken out again, so that a notebook that would download real weights by
  default is seen trying (that binder/start sets them is test_binder.py's first test);
- a sitecustomize module, first on PYTHONPATH, watches every Python process of the session except the Jupyter
  server itself: it records and refuses each name lookup or connection that is not to this machine (the kernel's
  own channels are ZeroMQ sockets on 127.0.0.1, outside Python's socket module; a download needs a lookup first,
  so even a machine without internet sees the attempt), and when the process exits it records its peak resident
  memory, which polling could miss.

Each line of the log is "<pid> watching <how the process was started>", "<pid> refused <event and address>" or
"<pid> peak_rss_bytes <n>"; `read_log` turns it into a `SessionLog`.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
START = REPO / "binder" / "start"
HUB_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
LOG_VARIABLE = "LMLIB_TEST_NETWORK_LOG"

SITECUSTOMIZE = '''
import atexit
import os
import resource
import sys

_LOG = os.environ.get("LMLIB_TEST_NETWORK_LOG")
_LOCAL = {None, "", "localhost", "127.0.0.1", "::1", "0.0.0.0", b"localhost", b"127.0.0.1", b"::1"}
_ARGV = getattr(sys, "orig_argv", sys.argv)


def _write(line):
    with open(_LOG, "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()} {line}\\n")


def _refuse(what):
    _write(f"refused {what}")
    raise OSError(f"network access refused by the tests' Binder session (tests/browser/binder_session.py): {what}")


def _hook(event, args):
    if event in ("socket.getaddrinfo", "socket.gethostbyname") and args[0] not in _LOCAL:
        _refuse(f"{event} {args[0]!r}")
    elif event == "socket.connect" and isinstance(args[1], tuple) and args[1][0] not in _LOCAL:
        _refuse(f"{event} {args[1]!r}")


def _peak():
    _write(f"peak_rss_bytes {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == 'darwin' else 1024)}")


if _LOG and _ARGV[1:3] != ["-m", "jupyter"]:  # the Jupyter server is not a notebook: its own requests are its own
    sys.addaudithook(_hook)
    atexit.register(_peak)
    _write("watching " + " ".join(_ARGV[1:4]).replace("\\n", " ")[:200])
'''


def start_environment(base: dict[str, str]) -> dict[str, str]:
    """The environment binder/start hands to the process it starts (it ends with `exec "$@"`)."""
    run = subprocess.run(["bash", str(START), "env", "-0"], env=base, capture_output=True, timeout=30)
    if run.returncode != 0:
        raise RuntimeError(f"binder/start failed: {run.stderr.decode()[-500:]}")
    return dict(entry.split("=", 1) for entry in run.stdout.decode().split("\0") if "=" in entry)


def session_environment(folder: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """binder/start's environment over `base` (default os.environ, less real-weight requests and proxies, so that
    any request resolves its own host), without the Hub variables, with the watch installed and logging to
    folder/network.log. A preset chosen in `base` stays, as binder/start keeps it."""
    base = {k: v for k, v in (os.environ if base is None else base).items()
            if k not in (*HUB_VARIABLES, *PROXY_VARIABLES, "LMLIB_REAL_WEIGHTS")}
    env = start_environment(base)
    for variable in HUB_VARIABLES:
        env.pop(variable, None)
    hook = folder / "hook"
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    env.update(PYTHONPATH=os.pathsep.join([str(hook), *filter(None, [env.get("PYTHONPATH")])]),
               **{LOG_VARIABLE: str(folder / "network.log")})
    return env


@dataclass
class SessionLog:
    kernels: list[int] = field(default_factory=list)       # pids of the watched kernels
    refused: list[str] = field(default_factory=list)       # "<event> <address>" of each refused network access
    kernel_peak_bytes: int = 0                             # the largest peak RSS a watched kernel recorded
    kernels_without_peak: list[int] = field(default_factory=list)

    def problems(self) -> list[str]:
        """What a Binder session would get wrong, in words (empty when all is well)."""
        problems = [f"network: the kernel reached for the network in a Binder session: {r}" for r in self.refused]
        if not self.kernels:
            problems.append("network: no kernel was watched (the session's sitecustomize did not run in the kernel), "
                            "so the network and memory checks prove nothing")
        problems += [f"memory: kernel {pid} exited without recording its peak memory (killed rather than shut "
                     "down?)" for pid in self.kernels_without_peak]
        return problems


def read_log(path: Path) -> SessionLog:
    log, peaks, lines = SessionLog(), {}, path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    for line in lines:
        pid, what, rest = (line.split(" ", 2) + [""])[:3]
        if what == "watching" and "ipykernel_launcher" in rest:
            log.kernels.append(int(pid))
        elif what == "refused":
            log.refused.append(rest)
        elif what == "peak_rss_bytes":
            peaks[int(pid)] = int(rest)
    log.kernel_peak_bytes = max((peaks[pid] for pid in log.kernels if pid in peaks), default=0)
    log.kernels_without_peak = [pid for pid in log.kernels if pid not in peaks]
    return log
