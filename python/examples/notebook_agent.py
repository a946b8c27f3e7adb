#!/usr/bin/env python3
"""A stateful analysis agent on a started sandbox, using only the SDK: it
uploads a CSV, runs notebook cells that keep their variables (pandas when the
image has it, plain Python otherwise), gets a chart back as PNG bytes (a
cell's rich results: matplotlib when present, else a bar chart the cell draws
itself through the display protocol's _repr_png_), downloads the result file
the cells wrote, and prints a summary. The cells are what a model would write
after seeing what the image holds; swap plan() for your model.

    python3 examples/notebook_agent.py                 # the 'default' image
    python3 examples/notebook_agent.py --rootfs DIR    # any root filesystem
    python3 examples/notebook_agent.py --out DIR       # where the results go

What the image lacks is said and skipped: without pandas the cells use the
csv module, without matplotlib the chart is drawn in plain Python, and
without python3 at all (a busybox root filesystem) the totals are computed by
a shell command and there is no chart.
"""
import argparse
import json
import os
import sys
import tempfile

import nsbox

SALES = """city,month,units
Lisbon,1,120
Oslo,1,80
Quito,1,200
Lisbon,2,135
Oslo,2,95
Quito,2,180
Lisbon,3,150
Oslo,3,70
Quito,3,210
Lisbon,4,160
Oslo,4,110
Quito,4,190
"""
DATA = "/tmp/work/sales.csv"     # inside the sandbox
RESULT = "/tmp/work/totals.csv"

# What each cell prints last: the totals as JSON, the same for every path.
REPORT = "print(json.dumps({'rows': rows_n, 'totals': totals}))"

# A bar chart as PNG without matplotlib: an object with _repr_png_, shown
# with display() (the IPython display protocol the context follows).
PLAIN_CHART = '''
import struct, zlib

class BarChart:
    def __init__(self, values, width=320, height=200):
        self.values, self.width, self.height = list(values.values()), width, height

    def _repr_png_(self):
        w, h, top = self.width, self.height, max(self.values) or 1
        bar = w // (2 * len(self.values) + 1)
        rows = []
        for y in range(h):
            row = bytearray(b"\\xff" * (3 * w))
            for i, v in enumerate(self.values):
                if h - y <= v * (h - 10) // top:
                    x = bar * (2 * i + 1)
                    row[3 * x:3 * (x + bar)] = b"\\x33\\x66\\xcc" * bar
            rows.append(b"\\x00" + bytes(row))

        def chunk(kind, data):
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        return (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))

display(BarChart(totals))
'''

# Without python3: the same totals (cities in the order they first appear)
# with nothing but a POSIX shell's read and arithmetic.
SHELL_TOTALS = r'''
f=%s; out=%s; cities=""
{ read -r head; while IFS=, read -r city month units; do
	case " $cities " in *" $city "*) ;; *) cities="$cities $city" ;; esac
done; } <"$f"
echo city,units >"$out"
for c in $cities; do
	t=0
	{ read -r head; while IFS=, read -r city month units; do
		[ "$city" = "$c" ] && t=$((t + units))
	done; } <"$f"
	echo "$c,$t" >>"$out"
done
cat "$out"
''' % (DATA, RESULT)


def plan(has):
    """The cells, given what the image has: (title, code, wanted output)."""
    if has["pandas"]:
        load = ("import json\nimport pandas as pd\ndf = pd.read_csv(%r)\nrows_n = len(df)\ndf.head(3)" % DATA)
        total = ("by_city = df.groupby('city', sort=False)['units'].sum()\n"
                 "totals = {k: int(v) for k, v in by_city.items()}\n" + REPORT)
        save = "by_city.to_csv(%r)\nprint('wrote', %r)" % (RESULT, RESULT)
    else:
        load = ("import csv, json\nwith open(%r, newline='') as f:\n    rows = list(csv.DictReader(f))\n"
                "rows_n = len(rows)\nrows[:3]" % DATA)
        total = ("totals = {}\nfor r in rows:\n    totals[r['city']] = totals.get(r['city'], 0) + int(r['units'])\n"
                 + REPORT)
        save = ("with open(%r, 'w') as f:\n    f.write('city,units\\n')\n"
                "    f.writelines('%%s,%%d\\n' %% kv for kv in totals.items())\nprint('wrote', %r)" % (RESULT, RESULT))
    if has["matplotlib"]:
        chart = ("import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(4, 2.5))\n"
                 "ax.bar(list(totals), list(totals.values()))\nax.set_title('units per city')\n"
                 "fig.tight_layout()   # left open: the cell returns it as a PNG")
    else:
        chart = PLAIN_CHART
    return [("load the CSV", load), ("totals per city", total), ("chart", chart), ("save the totals", save)]


def streamed(prefix, stream):
    """An output callback: each line shown with prefix as it arrives."""
    at_start = [True]

    def show(text):
        for part in text.splitlines(True):
            stream.write((prefix if at_start[0] else "") + part)
            at_start[0] = part.endswith("\n")
        stream.flush()
    return show


def run_cell(ctx, title, code):
    """One cell, its output streamed as it comes; stop on a failed cell."""
    print("--- cell: %s" % title, flush=True)
    r = ctx.run(code, timeout=60, on_stdout=streamed("  | ", sys.stdout), on_stderr=streamed("  ! ", sys.stderr))
    if not r.ok:
        raise SystemExit("cell '%s' failed: %s" % (title, r.error.message if r.error else r.status))
    return r


def notebook(live, ctx, out):
    """The analysis in cells; returns the totals and what was skipped."""
    skipped = []
    probe = ctx.run("import importlib.util, json\n"
                    "print(json.dumps({m: importlib.util.find_spec(m) is not None for m in ('pandas', 'matplotlib')}))")
    has = json.loads(probe.stdout)
    print("the image has: %s" % ", ".join("%s=%s" % (m, "yes" if v else "no") for m, v in has.items()))
    if not has["pandas"]:
        skipped.append("pandas (not in the image): the cells use the csv module")
    if not has["matplotlib"]:
        skipped.append("matplotlib (not in the image): the chart is drawn in plain Python")
    totals = None
    for title, code in plan(has):
        r = run_cell(ctx, title, code)
        if title == "load the CSV":
            kinds = sorted({m for b in r.results for m in b})
            print("  (rich result: %s)" % ", ".join(kinds))
        elif title == "totals per city":
            totals = json.loads(r.stdout.splitlines()[-1])
        elif title == "chart":
            pngs = [b["image/png"] for b in r.results if "image/png" in b]
            if not pngs:
                raise SystemExit("the chart cell returned no image/png")
            with open(os.path.join(out, "chart.png"), "wb") as f:
                f.write(pngs[0])
            print("  (image/png: %d bytes -> %s)" % (len(pngs[0]), os.path.join(out, "chart.png")))
    # The state is the interpreter's: a later cell still sees the first one's.
    print("state kept: a new cell sees rows_n = %s" % ctx.run("rows_n").results[0]["text/plain"])
    return totals, skipped


def shell_fallback(live, why):
    """No Python in the image: the totals by a shell command, no chart."""
    print("no python3 in this root filesystem (%s)" % why)
    r = live.exec(["sh", "-c", SHELL_TOTALS], timeout=60)
    if not r.ok:
        raise SystemExit("the shell fallback failed: %s" % r)
    lines = r.stdout.splitlines()[1:]
    totals = {c: int(t) for c, t in (line.split(",") for line in lines)}
    rows = sum(1 for line in SALES.splitlines()[1:] if line)
    return {"rows": rows, "totals": totals}, ["the code cells and the chart (no python3): totals by a shell command"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--image", default=None, help="image to use (default: 'default')")
    ap.add_argument("--rootfs", help="a root filesystem directory instead of an image")
    ap.add_argument("--out", help="directory for chart.png and totals.csv (default: a new temporary one)")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="notebook-agent-")
    os.makedirs(out, exist_ok=True)
    sandbox = nsbox.Sandbox(a.image, rootfs=a.rootfs, memory="512m", timeout="60s", network="none")

    with sandbox.start() as live:        # ends with the block, and with everything in it
        print("sandbox %s started (nsbox ps lists it while this runs)" % live.name)
        live.files.make_dir("/tmp/work")
        live.files.write(DATA, SALES)     # upload: binary-exact, not through stdout
        print("uploaded %s: %d bytes" % (DATA, live.files.stat(DATA).size))
        try:
            ctx = live.context("python")
        except nsbox.SandboxError as e:
            check = live.exec(["python3", "-V"])
            if check.exit_code != 127:   # python3 is there: the context failed for another reason
                raise
            summary, skipped = shell_fallback(live, e)
        else:
            with ctx:
                summary, skipped = notebook(live, ctx, out)
        # Download what the cells (or the shell) wrote inside.
        listing = ", ".join("%s (%d bytes)" % (f.name, f.size) for f in live.files.list("/tmp/work"))
        print("in /tmp/work: %s" % listing)
        data = live.files.read(RESULT)
        with open(os.path.join(out, "totals.csv"), "wb") as f:
            f.write(data)

    totals = summary["totals"]
    best = max(totals, key=totals.get)
    print("\nsummary: %d rows, %d cities; total units %d; best city %s (%d units)"
          % (summary["rows"], len(totals), sum(totals.values()), best, totals[best]))
    print("downloaded: %s (%d bytes)" % (os.path.join(out, "totals.csv"), len(data)))
    if os.path.exists(os.path.join(out, "chart.png")):
        print("chart: %s" % os.path.join(out, "chart.png"))
    for s in skipped:
        print("skipped: %s" % s)


if __name__ == "__main__":
    main()
