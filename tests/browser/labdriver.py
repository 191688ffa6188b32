"""Drive a notebook in JupyterLab, in headless Chromium, the way a student would, and report what looks wrong.

The pieces, used by test_notebooks_in_lab.py:

- `LabServer`: JupyterLab on 127.0.0.1 with an empty token, serving a temporary copy of the notebooks, with
  autosave, news and update checks off (`overrides.json` in a temporary settings folder) and cells always
  attached to the page (windowing off), so nothing the test does can reach the real notebooks.
- `MemoryMonitor`: the peak resident memory of the kernel and its children, polled from psutil.
- `open_and_run`: open a notebook, check it opens clean, Run All, wait for every cell, then check outputs,
  figures, widgets (moving each slider, pressing each button) and bertviz views; returns a report whose
  `problems` list says which cell, figure or widget failed and why.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Outputs a student should never see: 0.09999999999999999, 1.9999999999999998, 5.000000000000001.
FLOAT_NOISE = re.compile(r"\d\.\d*?(?:9{10,}|0{10,}[1-9])")

# The type-your-own boxes of lmlib.course.type_your_own (the CSS class is type_your_own.TYPE_CLASS).
TYPED_BOXES = ".lmlib-type-your-own input, .lmlib-type-your-own textarea"
TYPED_MESSAGE = "⚠"   # type_your_own.MESSAGE: what such a view shows instead of a result

# How long an interactive view may take to redraw after a slider moves or a button is pressed.
WIDGET_RESPONSE_S = 8.0
# How long a whole notebook may take between Run All and its last cell.
RUN_TIMEOUT_S = 300.0
# How many decades a log axis may extend beyond its data, and how far (in multiples of the data's own scale) a
# linear axis may: more means something (an annotation, a zero) stretched it and flattened the curve.
LOG_AXIS_SLACK_DECADES = 2.0
LINEAR_AXIS_SLACK = 10.0

# Console messages that do not come from the notebook's outputs and do not affect what a student sees.
TOLERATED_CONSOLE = [
    # Our own request routing aborts anything not on 127.0.0.1; the abort is recorded (and asserted) separately.
    (re.compile(r"net::ERR_FAILED|net::ERR_BLOCKED_BY_CLIENT"), "a request to another host, aborted by the test"),
    # Lab asks the server for optional endpoints (language servers, translations, workspaces) that may be absent.
    (re.compile(r"Failed to load resource: the server responded with a status of 404"),
     "an optional JupyterLab endpoint that this server does not provide"),
    # plotly.js's window-resize handler still fires for a figure that an interactive view has just replaced
    # with a new one; the old div is gone, nothing on screen changes.
    (re.compile(r"Resize must be passed a displayed plot div element"),
     "plotly resizing a figure an interactive view has already replaced"),
]


def find_chromium() -> str | None:
    """Chromium (or Chrome) from CHROMIUM, /usr/bin/chromium or PATH; None when there is none."""
    for candidate in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def keep_local(page, blocked: list[str]) -> None:
    """Let ``page`` reach only 127.0.0.1 (and data:/blob: URLs): any other request is aborted and its URL appended to
    ``blocked``, so a test can fail on it by name."""
    def route(r):
        if r.request.url.startswith(("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:")):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare_root(tmp: Path) -> Path:
    """A copy of the notebooks and their figures (the committed results they read come with lmlib)."""
    root = tmp / "root"
    shutil.copytree(REPO / "notebooks", root / "notebooks",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    return root


OVERRIDES = {
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
    # Every cell stays in the page, so every figure and widget is rendered and measurable without scrolling.
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
}


class LabServer:
    """JupyterLab serving `root` on 127.0.0.1 with an empty token; kernels inherit `env`."""

    def __init__(self, root: Path, tmp: Path, env: dict[str, str]):
        self.root, self.port = root, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        settings = tmp / "app-settings"
        settings.mkdir(parents=True, exist_ok=True)
        (settings / "overrides.json").write_text(json.dumps(OVERRIDES, indent=2))
        for sub in ("user-settings", "workspaces", "jupyter-config", "runtime"):
            (tmp / sub).mkdir(exist_ok=True)
        env = {**env, "JUPYTER_CONFIG_DIR": str(tmp / "jupyter-config"), "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
               "JUPYTER_PLATFORM_DIRS": "1"}
        cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser",
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
               "--IdentityProvider.token=", "--ServerApp.password=", "--ServerApp.terminals_enabled=False",
               "--ServerApp.disable_check_xsrf=True",   # lets the test shut kernels down through the REST API
               f"--ServerApp.root_dir={root}",
               f"--LabApp.app_settings_dir={settings}", f"--LabApp.user_settings_dir={tmp / 'user-settings'}",
               f"--LabApp.workspaces_dir={tmp / 'workspaces'}", "--LabApp.expose_app_in_browser=True",
               "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        self.log = open(tmp / "jupyterlab.log", "wb")
        self.proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 90
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}; see {tmp / 'jupyterlab.log'}")
            with contextlib.suppress(OSError):
                if self.api("GET", "/api/status") is not None:
                    return
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer on {self.url} within 90 s; see {tmp / 'jupyterlab.log'}")

    def api(self, method: str, path: str):
        req = urllib.request.Request(self.url + path, method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else {}

    def shutdown_kernels(self) -> None:
        """Shut every session and kernel down, and wait until no kernel process is left."""
        for session in self.api("GET", "/api/sessions"):
            self.api("DELETE", f"/api/sessions/{session['id']}")
        for kernel in self.api("GET", "/api/kernels"):
            self.api("DELETE", f"/api/kernels/{kernel['id']}")
        import psutil

        deadline = time.time() + 20
        while time.time() < deadline:
            with contextlib.suppress(psutil.Error):
                if not any("ipykernel" in " ".join(c.cmdline()) for c in psutil.Process(self.proc.pid).children()):
                    return
            time.sleep(0.2)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.shutdown_kernels()
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


class MemoryMonitor:
    """Peak RSS (bytes) of the notebook's kernel and the processes it starts, polled every 0.2 s.

    Set `kernel_id` once the kernel is known: only the server's child whose command line names that kernel's
    connection file is counted (with its children); until then every kernel below the server is.
    """

    def __init__(self, server_pid: int):
        import psutil

        self._psutil, self._server = psutil, psutil.Process(server_pid)
        self.kernel_id: str | None = None
        self.peak, self.at_peak, self._stop = 0, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _kernel_processes(self):
        for child in self._server.children():
            with contextlib.suppress(self._psutil.Error):
                cmd = " ".join(child.cmdline())
                if "ipykernel" in cmd and (self.kernel_id is None or self.kernel_id in cmd):
                    yield child
                    yield from child.children(recursive=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            total, seen = 0, []
            with contextlib.suppress(self._psutil.Error):
                for child in self._kernel_processes():
                    with contextlib.suppress(self._psutil.Error):
                        rss = child.memory_info().rss
                        total += rss
                        seen.append(f"{child.pid} {' '.join(child.cmdline()[1:3])[:80]}: {rss / 2**20:.0f} MB")
            if total > self.peak:
                self.peak, self.at_peak = total, seen
            self._stop.wait(0.2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)


# ---------------------------------------------------------------------------------------------------------------
# JavaScript run in the page. `panel()` is the open notebook (JupyterLab exposes its app as window.jupyterapp).

_PANEL = "const panel = window.jupyterapp.shell.currentWidget;"

JS_READY = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.context || !panel.context.isReady) return null;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return {status: kernel ? kernel.status : 'none', dirty: panel.context.model.dirty,
          kernelName: panel.sessionContext.kernelDisplayName};
}"""

JS_PROGRESS = """() => {
  """ + _PANEL + """
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  const prompts = Array.from(panel.node.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt'))
    .map(p => p.textContent.trim());
  return {status: kernel ? kernel.status : 'none',
          waiting: prompts.filter(p => p.includes('*')).length,
          unnumbered: prompts.filter(p => !/\\[\\d+\\]/.test(p)).length,
          cells: prompts.length,
          errors: panel.node.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"]').length};
}"""

# Every stderr/error output, every output's text (for float noise), every plotly figure's size, titles and
# axes, every bertviz view, widget labels and text inputs. Cells are numbered as in the .ipynb (from 0).
JS_INSPECT = r"""() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = Array.from(panel.node.querySelectorAll('.jp-Notebook .jp-Cell'));
  const where = el => {
    const cell = el.closest('.jp-Cell');
    const prompt = cell ? cell.querySelector('.jp-InputArea-prompt') : null;
    return {cell: cells.indexOf(cell), prompt: prompt ? prompt.textContent.trim() : ''};
  };
  const out = {stderr: [], texts: [], plots: [], bertviz: [], labels: [], inputs: [], widgetErrors: []};
  for (const el of panel.node.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"]'))
    out.stderr.push({...where(el), text: el.innerText.slice(-3000)});
  for (const el of panel.node.querySelectorAll('.jp-OutputArea-output')) {
    if (el.closest('.js-plotly-plot') || el.parentElement.closest('.jp-OutputArea-output')) continue;
    // Source listings (show_source: syntax-highlighted code) quote the library, comments included; they are
    // not numbers computed for the student, so they are left out of the float-noise check.
    let text = el.innerText;
    for (const h of el.querySelectorAll('.highlight')) text = text.replace(h.innerText, '');
    out.texts.push({...where(el), text});
    if (/Error displaying widget|Error rendering|Javascript Error/.test(el.innerText))
      out.widgetErrors.push({...where(el), text: el.innerText.slice(0, 300)});
  }
  const isNum = v => typeof v === 'number' && isFinite(v);
  panel.node.querySelectorAll('.js-plotly-plot').forEach((plot, index) => {
    const r = plot.getBoundingClientRect();
    const fl = plot._fullLayout || {};
    const info = {...where(plot), index, inWidget: !!plot.closest('.widget-output'), width: r.width,
                  height: r.height, titles: [], axes: []};
    const txt = t => (t && typeof t === 'object') ? (t.text || '') : (t || '');
    info.titles.push(txt(fl.title));
    for (const a of (fl.annotations || [])) info.titles.push(txt(a.text));
    for (const t of (plot._fullData || [])) if (t.name) info.titles.push(String(t.name));
    const extent = {};
    const add = (axis, v) => {
      if (!isNum(v)) return;
      const e = extent[axis] || (extent[axis] = {min: Infinity, max: -Infinity, minPos: Infinity});
      e.min = Math.min(e.min, v); e.max = Math.max(e.max, v);
      if (v > 0) e.minPos = Math.min(e.minPos, v);
    };
    const each = (arr, f) => { if (arr && arr.length !== undefined) for (let i = 0; i < arr.length; i++) f(arr[i]); };
    for (const t of (plot._fullData || [])) {
      if (t.visible !== true || !['scatter', 'scattergl', 'bar'].includes(t.type)) continue;
      const xa = 'xaxis' + (t.xaxis || 'x').slice(1), ya = 'yaxis' + (t.yaxis || 'y').slice(1);
      let xs = t.x, ys = t.y;
      if (!xs && ys) xs = Array.from({length: ys.length}, (_, i) => (t.x0 || 0) + i * (t.dx || 1));
      if (!ys && xs) ys = Array.from({length: xs.length}, (_, i) => (t.y0 || 0) + i * (t.dy || 1));
      each(xs, v => add(xa, v)); each(ys, v => add(ya, v));
      if (t.type === 'bar') add(t.orientation === 'h' ? xa : ya, 0);
    }
    for (const key of Object.keys(fl).filter(k => /^[xy]axis\d*$/.test(k))) {
      const ax = fl[key];
      info.titles.push(txt(ax.title));
      info.axes.push({name: key, type: ax.type, range: ax.range ? Array.from(ax.range) : null,
                      data: extent[key] || null});
    }
    out.plots.push(info);
  });
  for (const el of panel.node.querySelectorAll('[id^="bertviz-"]')) {
    if (!/^bertviz-[0-9a-f]+$/.test(el.id)) continue;
    const svg = el.querySelector('svg');
    out.bertviz.push({...where(el), id: el.id, svg: !!svg, drawn: svg ? svg.querySelectorAll('rect, path, line, text').length : 0});
  }
  for (const el of panel.node.querySelectorAll('.widget-label')) {
    if (!el.textContent.trim() || el.clientWidth === 0) continue;
    if (el.scrollWidth > el.clientWidth + 1)
      out.labels.push({...where(el), text: el.textContent.trim(), scrollWidth: el.scrollWidth, clientWidth: el.clientWidth});
  }
  const canvas = document.createElement('canvas').getContext('2d');
  for (const el of panel.node.querySelectorAll('.jupyter-widgets input[type="text"], .jupyter-widgets textarea')) {
    if (el.clientWidth === 0 || !el.value) continue;
    const cs = getComputedStyle(el);
    canvas.font = cs.font;
    const room = el.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    const need = canvas.measureText(el.value).width;
    if (need > room + 1 || el.scrollWidth > el.clientWidth + 1)
      out.inputs.push({...where(el), value: el.value, need: Math.round(need), room: Math.round(room)});
  }
  // Source listings (show_source) per cell, numbered as `cells`: syntax-highlighted blocks in its outputs.
  out.listings = cells.map(cell => cell.querySelectorAll('.jp-OutputArea-output .highlight').length);
  // Images in rendered markdown per cell: where each points (as Lab resolved it) and whether it drew.
  out.images = cells.map(cell => !cell.classList.contains('jp-MarkdownCell') ? [] :
    Array.from(cell.querySelectorAll('.jp-RenderedMarkdown img')).map(img => {
      const r = img.getBoundingClientRect();
      let src = img.getAttribute('src') || '';
      try { src = decodeURIComponent(src); } catch (e) {}
      return {src, complete: img.complete, natural: img.naturalWidth, width: r.width, height: r.height};
    }));
  return out;
}"""

# The interactive views: top-level widgets with at least one control, and what they drive: the Output widgets
# inside them (interact, interactive_output in a VBox), or else the cell's other outputs (controls that update
# display handles with `observe`).
JS_MARK_VIEWS = r"""() => {
  const TYPED = '.lmlib-type-your-own input, .lmlib-type-your-own textarea';
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = Array.from(panel.node.querySelectorAll('.jp-Notebook .jp-Cell'));
  const views = [];
  let n = 0;
  for (const out of panel.node.querySelectorAll('.jp-Cell .jp-OutputArea-output')) {
    if (out.parentElement.closest('.jp-OutputArea-output')) continue;     // nested inside another output
    const root = out.querySelector(':scope > .jupyter-widgets, :scope > .widget-container, :scope > .lm-Widget.jupyter-widgets');
    const widget = root || (out.querySelector('.jupyter-widgets') ? out : null);
    if (!widget) continue;
    const id = 'lab-test-view-' + (n++);
    widget.setAttribute('data-lab-test-view', id);
    const cell = out.closest('.jp-Cell');
    const controls = {
      sliders: Array.from(widget.querySelectorAll('.widget-slider')).map(s => {
        const label = s.querySelector('.widget-label');
        return label ? label.textContent.trim() : '';
      }),
      buttons: Array.from(widget.querySelectorAll('button.jupyter-button')).map(b => b.textContent.trim()),
      texts: widget.querySelectorAll('input, select, textarea').length,
      // type-your-own boxes (lmlib.course.type_your_own): the test types the second example in each placeholder
      typed: Array.from(widget.querySelectorAll(TYPED)).map(el => el.getAttribute('placeholder') || ''),
    };
    const own = widget.querySelectorAll('.widget-output').length;
    const beside = Array.from(cell.querySelectorAll('.jp-OutputArea-output'))
      .filter(o => !o.parentElement.closest('.jp-OutputArea-output') && !o.querySelector('.jupyter-widgets')).length;
    views.push({id, cell: cells.indexOf(cell), outputs: own || beside, drives: own ? 'its Output widget' : 'the cell\'s outputs',
                ...controls});
  }
  return views;
}"""

JS_VIEW_STATE = r"""(id) => {
  const root = document.querySelector(`[data-lab-test-view="${id}"]`);
  if (!root) return null;
  let outputs = Array.from(root.querySelectorAll('.widget-output'));
  if (!outputs.length) {
    const cell = root.closest('.jp-Cell');
    outputs = Array.from(cell.querySelectorAll('.jp-OutputArea-output'))
      .filter(o => !o.parentElement.closest('.jp-OutputArea-output') && !o.querySelector('.jupyter-widgets'));
  }
  let h = 0, text = '';
  const mix = s => { for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0; };
  const texts = [];
  for (const o of outputs) {
    const t = o.innerText; mix(t);
    for (const p of o.querySelectorAll('.js-plotly-plot')) {
      const title = p._fullLayout && p._fullLayout.title ? p._fullLayout.title.text : '';
      texts.push(title || '');
      mix(title || '');
      for (const tr of (p.data || [])) for (const k of ['x', 'y', 'z', 'text'])
        if (tr[k] !== undefined) mix(JSON.stringify(tr[k], (key, v) => ArrayBuffer.isView(v) ? Array.from(v) : v) || '');
    }
    texts.push(t);
    text += t;
  }
  const drawn = o => o.innerText.trim().length > 0 || !!o.querySelector('.js-plotly-plot, svg, img, canvas');
  const nonEmpty = outputs.map(o => o.classList.contains('widget-output')
    ? o.querySelectorAll('.jp-OutputArea-output').length > 0 && drawn(o) : drawn(o));
  const plots = outputs.flatMap(o => Array.from(o.querySelectorAll('.js-plotly-plot'))).map(p => {
    const r = p.getBoundingClientRect(); return [r.width, r.height]; });
  const bad = '[data-mime-type="application/vnd.jupyter.stderr"], [data-mime-type="application/vnd.jupyter.error"]';
  const stderr = [root, ...outputs].flatMap(o => Array.from(o.querySelectorAll(bad)))
    .concat(outputs.filter(o => o.matches(bad)))
    .map(e => e.innerText.slice(-3000));
  return {hash: h, nonEmpty, texts, plots, stderr};
}"""


JS_MODEL = "() => window.jupyterapp.shell.currentWidget.context.model.toJSON()"

# What JupyterLab itself writes into every notebook it opens, whatever the file holds, and which sets the dirty
# flag on every notebook: the kernel's language_info, each cell's run-time `trusted` flag, and the PNG snapshot
# that plotly's renderer stores beside every figure it draws. Anything else that differs from the file was
# changed by loading it (missing cell ids, an old nbformat, a kernelspec that does not match).
_LAB_WRITES = {"language_info"}


def _normalize(value):
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            return "".join(value)
        return [_normalize(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def changes_on_open(disk: dict, model: dict) -> list[str]:
    """What differs between the file and the notebook JupyterLab holds right after opening it."""
    disk, model = _normalize(disk), _normalize(model)
    changes = []
    for key in ("nbformat", "nbformat_minor"):
        if disk.get(key) != model.get(key):
            changes.append(f"{key} {disk.get(key)} -> {model.get(key)}")
    for key in sorted(set(disk.get("metadata", {})) | set(model.get("metadata", {})) - _LAB_WRITES):
        if key in _LAB_WRITES:
            continue
        if disk["metadata"].get(key) != model["metadata"].get(key):
            changes.append(f"metadata.{key} {json.dumps(disk['metadata'].get(key))[:120]} -> "
                           f"{json.dumps(model['metadata'].get(key))[:120]}")
    if len(disk.get("cells", [])) != len(model.get("cells", [])):
        changes.append(f"{len(disk.get('cells', []))} cells in the file, {len(model.get('cells', []))} after opening")
    for i, (a, b) in enumerate(zip(disk.get("cells", []), model.get("cells", []))):
        a = {**a, "metadata": {k: v for k, v in a.get("metadata", {}).items() if k != "trusted"}}
        b = {**b, "metadata": {k: v for k, v in b.get("metadata", {}).items() if k != "trusted"}}
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key) and not (key == "outputs" and _same_outputs(a.get(key), b.get(key))):
                changes.append(f"cell {i} {key} changed")
    return changes


def _same_outputs(a, b) -> bool:
    """Outputs equal up to key order, ignoring the PNG snapshot plotly's renderer adds beside each figure it draws."""

    def strip(outputs):
        outputs = [dict(o) for o in outputs or []]
        for o in outputs:
            data = o.get("data")
            if isinstance(data, dict) and "application/vnd.plotly.v1+json" in data:
                o["data"] = {k: v for k, v in data.items() if k != "image/png"}
        return json.dumps(outputs, sort_keys=True)

    return strip(a) == strip(b)


@dataclass
class Report:
    notebook: str
    problems: list[str] = field(default_factory=list)
    run_s: float | None = None
    open_s: float | None = None
    widgets_s: float | None = None
    peak_rss_mb: float | None = None
    figures: int = 0
    widget_views: int = 0
    interactions: int = 0
    dirty_on_open: bool | None = None
    slowest_response_s: float = 0.0
    noise_seen: set = field(default_factory=set, repr=False)
    bertviz_views: int = 0
    images: int = 0
    blocked_requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    tolerated_console: list[str] = field(default_factory=list)
    screenshots: list[str] = field(default_factory=list)
    executed: dict | None = field(default=None, repr=False)   # the notebook as JupyterLab holds it after Run All

    def add(self, where: str, what: str) -> None:
        self.problems.append(f"{where}: {what}")

    def add_noise(self, where: str, noise: str, what: str = "output") -> None:
        """Float noise, each distinct snippet once (a title shows up as output text, figure title and widget)."""
        seen = self.noise_seen
        key = re.sub(r"\s+", " ", FLOAT_NOISE.search(noise).group(0))
        if key not in seen:
            seen.add(key)
            self.add(where, f"float noise in the {what}: ...{noise}...")


def expected_listings(notebook: dict) -> dict[int, int]:
    """Per code cell that calls show_source (numbered as in the .ipynb, from 0): how many listings it shows.

    Each call displays one listing wherever it stands in its cell; calls are counted in the cell's code, not in
    its comments or strings.
    """
    import ast

    expected = {}
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        code = "\n".join("pass" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        calls = sum(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "show_source"
                    for n in ast.walk(tree))
        if calls:
            expected[index] = calls
    return expected


def check_listings(expected: dict[int, int], shown: list[int]) -> list[tuple[int, str]]:
    """(cell, problem) for each cell whose show_source calls did not each show one listing."""
    problems = []
    for cell, calls in sorted(expected.items()):
        n = shown[cell] if cell < len(shown) else 0
        if n != calls:
            problems.append((cell, f"{calls} show_source call(s) showed {n} source listing(s); each call must show "
                                   f"its code once, wherever it stands in the cell"))
    return problems


# A markdown image: ![alt](path "title") or <img src="path">.
_IMAGE_REF = re.compile(r"""!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+["'][^"']*["'])?\s*\)|<img\s[^>]*?src=["']([^"']+)["']""")


def expected_images(notebook: dict) -> dict[int, list[str]]:
    """Per markdown cell that shows images (numbered as in the .ipynb, from 0): the paths its markdown refers to."""
    expected = {}
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "markdown":
            refs = [a or b for a, b in _IMAGE_REF.findall("".join(cell["source"]))]
            if refs:
                expected[index] = refs
    return expected


def check_images(expected: dict[int, list[str]], shown: list[list[dict]]) -> list[tuple[int, str]]:
    """(cell, problem) for each referenced image that is not drawn in its rendered markdown cell: no <img> for it,
    or one that loaded nothing (naturalWidth 0: a missing file or not an image) or takes no space on the page."""
    problems = []
    for cell, refs in sorted(expected.items()):
        images = shown[cell] if cell < len(shown) else []
        for ref in refs:
            name = ref.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
            found = [i for i in images if i["src"].split("?")[0].endswith("/" + name) or i["src"].split("?")[0] == name]
            if not found:
                problems.append((cell, f"image {ref}: the rendered markdown has no <img> for it"))
            elif not all(i["natural"] > 0 for i in found):
                problems.append((cell, f"image {ref} did not render (naturalWidth 0: the file is missing or is not an "
                                       f"image the browser can draw)"))
            elif not all(i["width"] >= 2 and i["height"] >= 2 for i in found):
                size = ", ".join(f"{i['width']:.0f}x{i['height']:.0f}" for i in found)
                problems.append((cell, f"image {ref} is drawn at {size} px (not visible)"))
    return problems


JS_IMAGES_SETTLED = """() => Array.from(document.querySelectorAll('.jp-RenderedMarkdown img')).every(img => img.complete)"""


def _where(item: dict) -> str:
    return f"cell {item['cell']} {item.get('prompt', '')}".strip()


def _brief(text: str, limit: int = 400) -> str:
    """An output's gist: for a traceback its first and last lines (the exception), else its beginning."""
    lines = [line.rstrip() for line in (text or "").strip().splitlines() if line.strip()]
    if len(lines) > 4 and any("Traceback" in line or "Error" in line for line in lines[:3]):
        return (" | ".join(lines[-2:]))[-limit:]
    return " | ".join(lines)[:limit]


def _noise(text: str) -> str | None:
    m = FLOAT_NOISE.search(text or "")
    if not m:
        return None
    start = max(0, m.start() - 30)
    return (text[start:m.end() + 10]).replace("\n", " ")


def _check_axis(axis: dict) -> str | None:
    data, rng, kind = axis.get("data"), axis.get("range"), axis.get("type")
    if not data or not rng or kind not in ("linear", "log") or len(rng) != 2:
        return None
    r0, r1 = sorted(float(v) for v in rng)
    if kind == "log":
        if data["minPos"] == float("inf") or data["minPos"] is None:
            return None
        import math

        lo, hi = math.log10(data["minPos"]), math.log10(data["max"])
        tol = 0.02 * (hi - lo) + 1e-6
        if r0 > lo + tol or r1 < hi - tol:
            return (f"log axis range 10^{r0:.2f}..10^{r1:.2f} cuts off its data "
                    f"({data['minPos']:.3g}..{data['max']:.3g})")
        if lo - r0 > LOG_AXIS_SLACK_DECADES or r1 - hi > LOG_AXIS_SLACK_DECADES:
            return (f"log axis range 10^{r0:.2f}..10^{r1:.2f} spans {max(lo - r0, r1 - hi):.1f} decades beyond its "
                    f"data ({data['minPos']:.3g}..{data['max']:.3g}); something other than the data stretches it")
        return None
    lo, hi = data["min"], data["max"]
    tol = 0.02 * (hi - lo) + 1e-9 * max(abs(lo), abs(hi), 1.0)
    if r0 > lo + tol or r1 < hi - tol:
        return f"axis range {r0:.4g}..{r1:.4g} cuts off its data ({lo:.4g}..{hi:.4g})"
    scale = max(hi - lo, abs(lo), abs(hi))
    if scale > 0 and max(lo - r0, r1 - hi) > LINEAR_AXIS_SLACK * scale:
        return (f"axis range {r0:.4g}..{r1:.4g} exceeds its data ({lo:.4g}..{hi:.4g}) by more than "
                f"{LINEAR_AXIS_SLACK:g}x the data's scale")
    return None


def _check_plot(plot: dict, label: str, report: Report) -> None:
    if plot["width"] < 10 or plot["height"] < 10:
        report.add(label, f"plotly figure has size {plot['width']:.0f}x{plot['height']:.0f} px (not drawn)")
    for axis in plot["axes"]:
        problem = _check_axis(axis)
        if problem:
            report.add(label, f"{axis['name']}: {problem}")
    for title in plot["titles"]:
        noise = _noise(title)
        if noise:
            report.add_noise(label, noise, "figure's title or labels")


def _wait_for_run(page, report: Report) -> None:
    start = time.perf_counter()
    stable, started = 0, False
    while True:
        state = page.evaluate(JS_PROGRESS)
        # The stored notebook already shows numbered prompts: finished means the run has been seen under way
        # (a prompt showing [*] or the kernel busy) and is over. A run too quick to be seen counts after 15 s.
        started = started or state["waiting"] > 0 or state["status"] == "busy" or time.perf_counter() - start > 15
        done = started and state["status"] == "idle" and state["waiting"] == 0 and (
            state["unnumbered"] == 0 or state["errors"] > 0)
        stable = stable + 1 if done else 0
        if stable >= 3:
            break
        if time.perf_counter() - start > RUN_TIMEOUT_S:
            report.add("run", f"not finished after {RUN_TIMEOUT_S:.0f} s: kernel {state['status']}, "
                              f"{state['waiting']} cells waiting, {state['unnumbered']} of {state['cells']} unnumbered")
            break
        page.wait_for_timeout(250)
    report.run_s = round(time.perf_counter() - start, 1)
    state = page.evaluate(JS_PROGRESS)
    if state["unnumbered"]:
        report.add("run", f"{state['unnumbered']} of {state['cells']} code cells have no execution number after Run All")


def _wait_idle(page, timeout_s: float = 30.0) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if page.evaluate("() => { const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;"
                         " return k && k.status; }") == "idle":
            return
        page.wait_for_timeout(100)


def _wait_for_change(page, view_id: str, before: int) -> tuple[dict | None, float]:
    """Wait until the view's outputs differ from `before` and have settled (same for 0.4 s, kernel idle)."""
    start = time.perf_counter()
    last, since = None, None
    while time.perf_counter() - start < WIDGET_RESPONSE_S:
        page.wait_for_timeout(100)
        state = page.evaluate(JS_VIEW_STATE, view_id)
        if state is None:
            return None, time.perf_counter() - start
        if state["hash"] == before or not all(state["nonEmpty"]):
            last, since = None, None
            continue
        if last is not None and state["hash"] == last["hash"]:
            if time.perf_counter() - since >= 0.4:
                _wait_idle(page, 5)
                return page.evaluate(JS_VIEW_STATE, view_id), time.perf_counter() - start
        else:
            last, since = state, time.perf_counter()
    return None, time.perf_counter() - start


def _check_view_state(state: dict, label: str, report: Report) -> None:
    for text in state["stderr"]:
        report.add(label, f"error or stderr output in the view: {_brief(text)}")
    for text in state["texts"]:
        if TYPED_MESSAGE in text:   # a type-your-own view that says why it shows no result
            report.add(label, f"the view shows a message instead of a result: {_brief(text)}")
        noise = _noise(text)
        if noise:
            report.add_noise(label, noise, "view's output")
    for w, h in state["plots"]:
        if w < 10 or h < 10:
            report.add(label, f"figure in the view has size {w:.0f}x{h:.0f} px (not drawn)")


def _exercise_views(page, report: Report, shots: Path) -> set[int]:
    """Move every slider and press every button of every interactive view; returns the cells that hold views."""
    views = page.evaluate(JS_MARK_VIEWS)
    report.widget_views = len(views)
    for number, view in enumerate(views):
        root = page.locator(f'[data-lab-test-view="{view["id"]}"]')
        label = f"cell {view['cell']}, widget {number + 1}"
        box = root.bounding_box()
        if not box or box["width"] < 2 or box["height"] < 2:
            report.add(label, "widget is not rendered (no visible element)")
            continue
        interactive = view["outputs"] > 0 and (view["sliders"] or view["buttons"] or view["texts"])
        if view["outputs"]:
            state = page.evaluate(JS_VIEW_STATE, view["id"])
            if not all(state["nonEmpty"]):
                report.add(label, f"the interactive view's output ({view['drives']}) is empty after Run All "
                                  "(a figure returned but never displayed, or a callback that failed silently?)")
            _check_view_state(state, label, report)
        if interactive:
            controls = [("slider", i, name) for i, name in enumerate(view["sliders"])]
            controls += [("button", i, name) for i, name in enumerate(view["buttons"])]
            controls += [("text box", i, example) for i, example in enumerate(view["typed"])]
            for kind, i, name in controls:
                what = f"{kind} '{name}'" if name else f"{kind} {i + 1}"
                before = page.evaluate(JS_VIEW_STATE, view["id"])["hash"]
                if kind == "slider":
                    handle = root.locator(".widget-slider").nth(i).locator(".noUi-handle").first
                    now, top = handle.get_attribute("aria-valuenow"), handle.get_attribute("aria-valuemax")
                    key = "ArrowLeft" if now is not None and top is not None and float(now) >= float(top) else "ArrowRight"
                    handle.focus()
                    handle.press(key)
                    action = key
                elif kind == "text box":
                    if not name:
                        report.add(label, f"type-your-own box {i + 1} has no example to type (its placeholder is empty)")
                        continue
                    what = f"text box {i + 1}"
                    box = root.locator(TYPED_BOXES).nth(i)
                    box.fill(name)
                    box.press("Enter")
                    box.blur()   # a Text with continuous_update=False sends its value on Enter or on blur
                    action = f"typing {name!r}"
                else:
                    root.locator("button.jupyter-button").nth(i).click()
                    action = "a click"
                report.interactions += 1
                state, took = _wait_for_change(page, view["id"], before)
                report.slowest_response_s = round(max(report.slowest_response_s, took), 1)
                if state is None:
                    report.add(label, f"{what}: the output did not change within {WIDGET_RESPONSE_S:.0f} s after {action}")
                    _wait_idle(page, 10)
                    continue
                _check_view_state(state, f"{label}, after moving {what}" if kind == "slider"
                                  else f"{label}, after {action} in {what}" if kind == "text box"
                                  else f"{label}, after pressing {what}", report)
        path = shots / f"cell{view['cell']:02d}_widget{number + 1}.png"
        # The widget with what it drives: its own Output widget, or the whole output area of its cell.
        target = root if view["drives"] == "its Output widget" or not interactive else \
            page.locator(".jp-Notebook .jp-Cell").nth(view["cell"]).locator(".jp-Cell-outputArea")
        if _screenshot(page, target, path):
            report.screenshots.append(f"{shots.name}/{path.name}")
    return {view["cell"] for view in views}


def _screenshot(page, target, path: Path) -> bool:
    """Screenshot one element whole: the notebook scrolls inside the page, so a tall element gets a tall window."""
    size = page.viewport_size
    try:
        box = target.bounding_box(timeout=5000)
        if box and box["height"] > size["height"] - 250:
            page.set_viewport_size({"width": size["width"], "height": min(int(box["height"]) + 300, 5000)})
            page.wait_for_timeout(300)
        target.scroll_into_view_if_needed(timeout=5000)
        target.screenshot(path=str(path), timeout=15000)
        return True
    except Exception:   # a screenshot is for people to look at; failing to take one is not a test failure
        return False
    finally:
        if page.viewport_size != size:
            page.set_viewport_size(size)


class LabPage:
    """One Chromium page with JupyterLab loaded once; notebooks are opened in it one after another, as a student
    opens them from the file browser. Every request is routed: those to another host are aborted and recorded
    on the current notebook's report, as are console errors and uncaught exceptions."""

    def __init__(self, browser, server: LabServer):
        self.server, self.report = server, Report("(JupyterLab start-up)")
        self.context = browser.new_context(viewport={"width": 1366, "height": 900})
        self.page = self.context.new_page()
        self.context.route("**/*", self._route)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda err: self._error(f"uncaught: {err}"))
        self.page.on("websocket", self._websocket)
        self.page.goto(f"{server.url}/lab?reset", timeout=90000)
        self.page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started !== undefined"
                                    " && document.querySelector('.jp-LabShell')", timeout=90000)
        self.page.evaluate("() => window.jupyterapp.started")
        self.startup = self.report

    def _route(self, r):
        host = urllib.parse.urlsplit(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:")) or host in ("127.0.0.1", "localhost"):
            r.continue_()
        else:
            self.report.blocked_requests.append(r.request.url)
            r.abort()

    def _console(self, msg):
        if msg.type == "error":
            self._error(msg.text)

    def _error(self, text: str):
        for pattern, why in TOLERATED_CONSOLE:
            if pattern.search(text):
                self.report.tolerated_console.append(f"{text[:200]} ({why})")
                return
        self.report.console_errors.append(text[:500])

    def _websocket(self, ws):
        if urllib.parse.urlsplit(ws.url).hostname not in ("127.0.0.1", "localhost"):
            self.report.blocked_requests.append(ws.url)

    def close(self):
        self.context.close()

    def close_notebook(self):
        """Close the open notebook without saving (the copy is thrown away anyway) and dismiss any dialog."""
        with contextlib.suppress(Exception):
            self.page.evaluate("""() => { const w = window.jupyterapp.shell.currentWidget;
                if (w && w.context) { w.context.model.dirty = false; w.dispose(); } }""")
        with contextlib.suppress(Exception):
            if self.page.locator(".jp-Dialog").count():
                self.page.keyboard.press("Escape")


def open_and_run(lab_page: LabPage, notebook: str, shots: Path, memory: MemoryMonitor) -> Report:
    """Open notebooks/<notebook> in JupyterLab, Run All, check everything; returns the report."""
    report = Report(notebook)
    lab_page.report = report
    server, page = lab_page.server, lab_page.page
    shots.mkdir(parents=True, exist_ok=True)
    try:
        start = time.perf_counter()
        page.evaluate("(path) => window.jupyterapp.commands.execute('docmanager:open', {path}).then(() => true)",
                      f"notebooks/{notebook}")
        state, deadline = None, time.time() + 90
        while time.time() < deadline:
            state = page.evaluate(JS_READY)
            if state and state["status"] == "idle" or page.locator(".jp-Dialog").count():
                break   # ready, or a dialog (e.g. "Select Kernel") waits for the student: reported below
            page.wait_for_timeout(250)
        if page.locator(".jp-Dialog").count():
            text = " ".join(page.locator(".jp-Dialog").first.inner_text().split())[:200]
            report.add("open", f"a dialog appeared on opening: {text!r}")
            return report
        if not state or state["status"] != "idle":
            report.add("open", f"the notebook did not open with an idle kernel within 90 s (state: {state})")
            return report
        page.wait_for_timeout(1000)   # let anything that edits the document on load do so
        state = page.evaluate(JS_READY)
        report.open_s = round(time.perf_counter() - start, 1)
        memory.kernel_id = page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.id")
        report.dirty_on_open = bool(state["dirty"])
        if state["dirty"]:
            changes = changes_on_open(json.loads((server.root / "notebooks" / notebook).read_text(encoding="utf-8")),
                                      page.evaluate(JS_MODEL))
            if changes:
                report.add("open", "the notebook has unsaved changes right after opening, before running: "
                                   + "; ".join(changes[:5]))
        page.click('.lm-MenuBar-itemLabel:text-is("Run")')
        page.click('.lm-Menu-item[data-command="runmenu:run-all"]')
        _wait_for_run(page, report)
        report.executed = page.evaluate(JS_MODEL)   # before the widgets move: what nbval's checks read
        with contextlib.suppress(Exception):   # images still loading are judged as they are after 10 s
            page.wait_for_function(JS_IMAGES_SETTLED, timeout=10000)

        found = page.evaluate(JS_INSPECT)
        for item in found["stderr"]:
            report.add(_where(item), f"error or stderr output: {_brief(item['text'])}")
        for item in found["widgetErrors"]:
            report.add(_where(item), f"widget or script failed to render: {item['text'].strip()}")
        on_disk = json.loads((server.root / "notebooks" / notebook).read_text(encoding="utf-8"))
        for cell, problem in check_listings(expected_listings(on_disk), found["listings"]):
            report.add(f"cell {cell}", problem)
        report.images = sum(len(images) for images in found["images"])
        for cell, problem in check_images(expected_images(on_disk), found["images"]):
            report.add(f"cell {cell}", problem)
        for item in found["texts"]:
            noise = _noise(item["text"])
            if noise:
                report.add_noise(_where(item), noise)
        report.figures = len(found["plots"])
        for plot in found["plots"]:
            if plot["inWidget"]:
                label = f"{_where(plot)}, figure {plot['index'] + 1} (in a widget)"
            else:
                label = f"{_where(plot)}, figure {plot['index'] + 1}"
            _check_plot(plot, label, report)
        report.bertviz_views = len(found["bertviz"])
        for number, view in enumerate(found["bertviz"]):
            if not view["svg"] or view["drawn"] == 0:
                report.add(_where(view), f"bertviz view {view['id']} drew nothing (no SVG content)")
            path = shots / f"cell{view['cell']:02d}_bertviz{number + 1}.png"
            if _screenshot(page, page.locator(f"#{view['id']}"), path):
                report.screenshots.append(f"{shots.name}/{path.name}")
        for item in found["labels"]:
            report.add(_where(item), f"widget label {item['text']!r} is cut off "
                                     f"({item['scrollWidth']} px of text in {item['clientWidth']} px)")
        for item in found["inputs"]:
            report.add(_where(item), f"text input does not show its whole value {item['value']!r} "
                                     f"(needs {item['need']} px, has {item['room']} px)")

        wstart = time.perf_counter()
        view_cells = _exercise_views(page, report, shots)
        # Figures redrawn by the widgets: sizes, axes and titles again.
        for plot in page.evaluate(JS_INSPECT)["plots"]:
            if plot["inWidget"] or plot["cell"] in view_cells:
                _check_plot(plot, f"{_where(plot)}, figure {plot['index'] + 1} (after the controls moved)", report)
        report.widgets_s = round(time.perf_counter() - wstart, 1)
    finally:
        lab_page.close_notebook()
    # The same problem found twice (a figure checked before and after its widget moved) is listed once.
    report.problems = list(dict.fromkeys(report.problems))
    return report
