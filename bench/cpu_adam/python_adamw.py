"""Elements per second of torch.optim.AdamW(fused=True) and (foreach=True) on N fp32
parameters, median of REPS steps after warm-up; one JSON line.   python_adamw.py N REPS"""
import json
import sys
import time

import torch


def rate(n, reps, **kw):
    p = torch.randn(n).requires_grad_(True)
    p.grad = torch.randn(n)
    opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01, **kw)
    for _ in range(2):
        opt.step()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t)
    times.sort()
    return n / times[len(times) // 2]


n, reps = int(sys.argv[1]), int(sys.argv[2])
print(json.dumps({"torch_fused": rate(n, reps, fused=True), "torch_foreach": rate(n, reps, foreach=True),
                  "threads": torch.get_num_threads()}))
