"""TensorBoard's own server over a folder of frugal's event files: what its HTTP API serves,
and optionally a screenshot of its web page taken by headless Chromium.

Usage: tensorboard_server.py LOGDIR TAG [SCREENSHOT.png]  ->  {
  "runs":    [run, ...]                       /data/runs
  "scalars": {run: [[step, value], ...]}      /data/plugin/scalars/scalars for TAG
  "tags":    {run: [tag, ...]}                /data/plugin/scalars/tags
  "screenshot": {"exit_code": N, "log": "..."}   when a screenshot was asked for
}
The server binds 127.0.0.1 on a free port and is shut down before this exits. TensorBoard's
web page is bundled in the package, so nothing is fetched from outside. Its charts are drawn as
SVG (forceSVG): a headless browser without a GPU draws no WebGL lines.
"""
import json
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

from tensorboard import program


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=30) as r:
        return json.loads(r.read().decode())


def main():
    logdir, tag = sys.argv[1], sys.argv[2]
    shot = sys.argv[3] if len(sys.argv) > 3 else None
    tb = program.TensorBoard()
    tb.configure(argv=[None, "--logdir", logdir, "--host", "127.0.0.1", "--port", "0",
                       "--load_fast", "false", "--reload_interval", "0"])
    server = tb._make_server()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = server.get_url().rstrip("/")
    out = {"runs": [], "scalars": {}, "tags": {}}
    try:
        # The multiplexer loads the folder in the background: wait until the tag is served.
        deadline = time.time() + 60
        while True:
            runs = get(base, "/data/runs")
            tags = get(base, "/data/plugin/scalars/tags")
            if all(tag in tags.get(r, {}) for r in runs) and runs:
                break
            if time.time() > deadline:
                raise SystemExit(f"TensorBoard served no '{tag}' within 60 s: {tags}")
            time.sleep(0.5)
        out["runs"] = runs
        out["tags"] = {r: sorted(t) for r, t in tags.items()}
        for r in runs:
            q = urllib.parse.urlencode({"run": r, "tag": tag})
            out["scalars"][r] = [[s[1], s[2]] for s in get(base, "/data/plugin/scalars/scalars?" + q)]
        if shot:
            # The time-series dashboard, with smoothing off.
            url = base + "/?forceSVG=true&smoothing=0#timeseries"
            p = subprocess.run(
                ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--window-size=1200,800", "--virtual-time-budget=15000", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
                 "--screenshot=" + shot, url],
                capture_output=True, text=True, timeout=120)
            out["screenshot"] = {"exit_code": p.returncode, "log": (p.stdout + p.stderr)[-2000:]}
    finally:
        server.shutdown()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
