"""The Python side of tools/gpu/check.sh: references computed in the same run as frugal's
figures, with torch alone (the GPU machine's python3 has no other package). Each subcommand
prints one JSON object on stdout.

  weights A.pt B.pt            max |a - b| over every tensor of two exported state dicts
  losses A.jsonl B.jsonl       max |a - b| and max relative difference of the logged losses
  scaler METRICS.jsonl INIT GROWTH_INTERVAL
                               torch.amp.GradScaler on this machine's device, fed an inf
                               gradient at exactly the steps frugal found one: its scales and
                               skipped steps against frugal's (metrics.jsonl, one record a step)
  memory MODEL_JSON BATCH STEPS  torch.cuda.max_memory_allocated of frugal's GPT in Python
                               (bench/python/frugal_models.py), fp32, AdamW (per-parameter, as
                               LibTorch's), over STEPS steps
  snapshot FILE                loads frugal's allocator snapshot with torch.cuda._memory_viz
  serve                        answers the subcommands above read from stdin, one a line, its
                               arguments separated by tabs, one JSON line each (an exception
                               is {"error": ...}): check.sh's comparisons share one torch import
"""
import json
import math
import os
import pickle
import sys

# torch is imported by the subcommands that need it: its import costs seconds (check.sh asks
# the CPU-side comparisons of one long-lived `serve` process).


def records(path):
    with open(path) as f:
        return [r for r in (json.loads(line) for line in f if line.strip()) if "loss" in r and "step" in r]


def weights(a, b):
    import torch
    sa, sb = torch.load(a, map_location="cpu"), torch.load(b, map_location="cpu")
    if sorted(sa) != sorted(sb):
        return {"error": f"different names: {sorted(set(sa) ^ set(sb))[:5]}"}
    diff = max((sa[k].double() - sb[k].double()).abs().max().item() if sa[k].numel() else 0.0
               for k in sa)
    return {"max_abs_diff": diff, "tensors": len(sa),
            "elements": sum(t.numel() for t in sa.values())}


def losses(a, b):
    ra, rb = records(a), records(b)
    la = {r["step"]: r["loss"] for r in ra}
    lb = {r["step"]: r["loss"] for r in rb}
    steps = sorted(set(la) & set(lb))
    if not steps:
        return {"error": "no common logged step"}
    abs_d = max(abs(la[s] - lb[s]) for s in steps)
    rel_d = max(abs(la[s] - lb[s]) / max(abs(lb[s]), 1e-30) for s in steps)
    return {"max_abs_diff": abs_d, "max_rel_diff": rel_d, "steps": len(steps),
            "final_a": la[steps[-1]], "final_b": lb[steps[-1]]}


def scaler(path, init_scale, growth_interval):
    import torch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    recs = records(path)
    p = torch.ones(4, device=device, requires_grad=True)
    opt = torch.optim.SGD([p], lr=1.0)
    s = torch.amp.GradScaler(device, init_scale=float(init_scale),
                             growth_interval=int(growth_interval))
    mismatches, skipped_python, skipped_frugal = [], 0, 0
    for r in recs:
        opt.zero_grad()
        # The scaled gradient is finite unless frugal found inf/nan in this step.
        g = torch.full((4,), math.inf if r["skipped"] else 1.0, device=device)
        s.scale((p * g).sum()).backward()  # p.grad = g x the scale
        before = p.detach().clone()
        s.step(opt)
        s.update()
        stepped = not torch.equal(before, p.detach())
        skipped_python += not stepped
        skipped_frugal += bool(r["skipped"])
        # frugal logs the scale after the step's update, as s.get_scale() is now.
        if stepped == bool(r["skipped"]) or s.get_scale() != r["loss_scale"]:
            mismatches.append({"step": r["step"], "frugal_scale": r["loss_scale"],
                               "python_scale": s.get_scale(), "frugal_skipped": r["skipped"],
                               "python_skipped": not stepped})
    return {"steps": len(recs), "skipped_frugal": skipped_frugal,
            "skipped_python": skipped_python, "mismatches": mismatches[:5],
            "final_scale_python": s.get_scale(), "device": device}


def memory(model_json, batch, steps):
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "bench", "python"))
    from frugal_models import Gpt  # noqa: E402
    c = json.loads(model_json)
    torch.manual_seed(0)
    model = Gpt(c).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    T, V = c["block_size"], c["vocab_size"]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(int(steps)):
        seq = torch.randint(0, V, (int(batch), T + 1), device="cuda")
        logits = model(seq[:, :T])
        loss = torch.nn.functional.cross_entropy(logits.view(-1, V), seq[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return {"peak_bytes": torch.cuda.max_memory_allocated(),
            "n_params": sum(p.numel() for p in model.parameters())}


def snapshot(path):
    from torch.cuda import _memory_viz
    with open(path, "rb") as f:
        snap = pickle.load(f)
    html = _memory_viz.trace_plot(snap)
    segments = snap.get("segments", [])
    traces = sum(len(t) for t in snap.get("device_traces", []))
    return {"segments": len(segments), "trace_events": traces, "html_bytes": len(html)}


COMMANDS = {"weights": weights, "losses": losses, "scaler": scaler, "memory": memory,
            "snapshot": snapshot}


def answer(cmd, args):
    try:
        if cmd not in COMMANDS:
            return {"error": f"unknown subcommand {cmd!r}"}
        return COMMANDS[cmd](*args)
    except Exception as e:  # the row's failure, said in its cell, not the table's
        return {"error": f"{type(e).__name__}: {e}"}


def serve():
    for line in sys.stdin:
        parts = line.rstrip("\n").split("\t")
        print(json.dumps(answer(parts[0], parts[1:])), flush=True)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "serve":
        serve()
        return
    result = answer(cmd, args)
    print(json.dumps(result))
    sys.exit(1 if "error" in result else 0)


if __name__ == "__main__":
    main()
