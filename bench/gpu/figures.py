"""The GPU benchmark's figures (bench/gpu/rows.sh), from frugal's metrics and the Python side's
JSON, each missing piece said in words instead of failing the table:

  frugal METRICS.jsonl                JSON: median step time, tokens/s, peak and resident bytes
                                      (the first 5 steps left out: warm-up)
  cells MODEL_JSON EAGER.json RUN.json [REF.json]
                                      RESULT <tab> RUN's cell <tab> REF's cell: MEASURED, or FAIL
                                      naming the missing file (EAGER gives the matmul rate and
                                      parameter count MFU needs)
  offload OFFLOAD.json DEVICE.json    RESULT <tab> cell <tab> cell: step time <= 1.5x
"""
import json
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def frugal(metrics):
    with open(metrics) as f:
        recs = [json.loads(l) for l in f if '"loss"' in l]
    recs = recs[5:] if len(recs) > 5 else recs
    return {"median_step_s": statistics.median(r["step_time_s"] for r in recs),
            "tokens_per_s": statistics.median(r["tokens_per_s"] for r in recs),
            "peak_bytes": max(r.get("mem_allocated_peak_bytes", 0) for r in recs),
            "resident_bytes": statistics.median(r.get("mem_allocated_bytes", 0) for r in recs),
            "steps": len(recs)}


def describe(fig, c, eager):
    tok = fig.get("tokens_per_s")
    parts = [f"step {fig['median_step_s'] * 1e3:.1f} ms"]
    if tok:
        parts.append(f"{tok:,.0f} tok/s")
        if eager and eager.get("matmul_tflops") and eager.get("n_params"):
            T, L, d = c["block_size"], c["n_layer"], c["n_embd"]
            # Matmul FLOPs per token (forward + backward): 6 per parameter that multiplies (all
            # but the position embedding; the tied token embedding is the output projection)
            # + attention.
            flops = 6 * (eager["n_params"] - T * d) + 12 * L * d * T
            parts.append(f"MFU {tok * flops / (eager['matmul_tflops'] * 1e12):.1%}")
    if fig.get("peak_bytes"):
        parts.append(f"peak {fig['peak_bytes'] / 2**30:.2f} GiB")
    return ", ".join(parts)


def cells(model_json, eager_path, run_path, ref_path=None):
    c = json.loads(model_json)
    eager, run = load(eager_path), load(run_path)
    ref = load(ref_path) if ref_path else None
    if run is None:
        return ["FAIL (no figures: " + run_path.rsplit("/", 1)[-1] + " missing)", "-", "-"]
    a = describe(run, c, eager)
    if ref_path and ref is None:
        return ["FAIL (reference: " + ref_path.rsplit("/", 1)[-1] + " missing)", a, "-"]
    return ["MEASURED", a, describe(ref, c, eager) if ref else "-"]


def offload(offload_path, device_path):
    off, dev = load(offload_path), load(device_path)
    if off is None or dev is None:
        missing = [p.rsplit("/", 1)[-1] for p, v in ((offload_path, off), (device_path, dev)) if v is None]
        return ["FAIL (no figures: " + ", ".join(missing) + " missing)", "-", "-"]
    ratio = off["median_step_s"] / dev["median_step_s"]
    return ["PASS" if ratio <= 1.5 else "FAIL",
            f"step {ratio:.2f}x the device-only step; resident {off['resident_bytes'] / 2**30:.2f} GiB",
            f"device-only: step {dev['median_step_s'] * 1e3:.1f} ms, resident {dev['resident_bytes'] / 2**30:.2f} GiB"]


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "frugal":
        print(json.dumps(frugal(*args)))
    elif cmd == "cells":
        print("\t".join(cells(*args)))
    elif cmd == "offload":
        print("\t".join(offload(*args)))
    else:
        sys.exit(f"figures.py: unknown subcommand {cmd!r}")


if __name__ == "__main__":
    main()
