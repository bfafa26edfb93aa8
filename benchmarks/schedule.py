"""A tier's training hours from per-job hours: one device, jobs one after another; and one node
of `node_gpus` devices (single-device jobs longest first onto the least busy device; a job of g
devices takes the g least busy, its one-device time divided by g). No torch: step_time.py and
tools/times.py (the times README and docs state) share it."""

from __future__ import annotations


def node_hours(jobs: list[tuple[float, int]], node_gpus: int) -> dict:
    """{jobs, one_device_h, node_h, node_gpus} for (hours on one device, devices asked) jobs."""
    one = sum(h for h, _ in jobs)
    busy = [0.0] * node_gpus
    for hours, gpus in sorted(jobs, reverse=True):
        if gpus > 1:  # a multi-device job on the g least busy: it starts when all are free
            g = min(gpus, node_gpus)
            free = sorted(range(node_gpus), key=busy.__getitem__)[:g]
            start = max(busy[i] for i in free)
            for i in free:
                busy[i] = start + hours / g
        else:
            i = min(range(node_gpus), key=busy.__getitem__)
            busy[i] += hours
    return {"jobs": len(jobs), "one_device_h": one, "node_h": max(busy), "node_gpus": node_gpus}
