"""Elements per second of torch.optim.AdamW(fused=True) and (foreach=True) on N fp32
parameters, median of REPS steps after warm-up; and of the optimizer phase of a training step
with clipping (torch.nn.utils.clip_grad_norm_ to 1.0, then the fused step); one JSON line.
python_adamw.py N REPS"""
import json
import sys
import time

import torch


def rate(n, reps, clip=False, **kw):
    p = torch.randn(n).requires_grad_(True)
    p.grad = torch.randn(n)
    opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01, **kw)

    def phase():
        if clip:  # the gradient norm is sqrt(n) or, once clipped, 1 + 1e-6: it always clips
            torch.nn.utils.clip_grad_norm_([p], 1.0)
        opt.step()

    for _ in range(2):
        phase()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        phase()
        times.append(time.perf_counter() - t)
    times.sort()
    return n / times[len(times) // 2]


n, reps = int(sys.argv[1]), int(sys.argv[2])
print(json.dumps({"torch_fused": rate(n, reps, fused=True), "torch_foreach": rate(n, reps, foreach=True),
                  "torch_fused_clip": rate(n, reps, clip=True, fused=True), "threads": torch.get_num_threads()}))
