# ddp_train.py: a tiny PyTorch DistributedDataParallel training program that
# follows mtc's resume contract (docs/any-framework.md) — what tests run as a
# custom task. The ranks come from torch.distributed's variables (RANK,
# WORLD_SIZE, MASTER_ADDR, MASTER_PORT) over gloo; a global batch of
# --global-batch samples is split evenly among the ranks, so any number of
# ranks trains the same model. It resumes from the newest complete checkpoint
# in MTC_CHECKPOINT_DIR (step_N.pt, written to a temporary name and renamed),
# logs "step N loss X" lines, writes rows {"step", "loss", "step_time_s", "time"} to
# MTC_METRICS_FILE (rank 0; --no-metrics: none; --plain-metrics: step and loss only) and with --tb the loss as
# TensorBoard events in MTC_TENSORBOARD_DIR (encoded here by hand), and at the end the final parameters' sha256 and
# what it was given to MTC_RUN_DIR/result.json. Float64 throughout. A test
# that must act on it while it runs holds it at a step with --hold-file (every
# rank waits there, on every start, until the test removes the file).
import argparse
import glob
import hashlib
import json
import os
import re
import struct
import time

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=20)
p.add_argument("--global-batch", type=int, default=8)
p.add_argument("--ckpt-every", type=int, default=5)
p.add_argument("--lr", type=float, default=0.05)
p.add_argument("--sleep", type=float, default=0.0, help="seconds per step (time to inject faults)")
p.add_argument("--fail-at", type=int, default=-1, help="raise at this step")
p.add_argument("--fail-once", action="store_true", help="--fail-at only on the first start")
p.add_argument("--fail-rank", type=int, default=-1,
               help="with --fail-at: only this rank fails (exit status 1), mid-step, while the "
                    "others wait in a long step (600 s) that only the launcher can end")
p.add_argument("--plain-metrics", action="store_true",
               help="MTC_METRICS_FILE rows of only step and loss (no step_time_s, no time)")
p.add_argument("--tb", action="store_true", help="log the loss as TensorBoard events (rank 0)")
p.add_argument("--no-metrics", action="store_true", help="no MTC_METRICS_FILE rows")
p.add_argument("--hang-at", type=int, default=-1,
               help="the last rank blocks at this step on the first start (a deadlock: no process stops)")
p.add_argument("--hold-file", default="",
               help="from --hold-at on, wait after each step while this file exists")
p.add_argument("--hold-at", type=int, default=1)
a = p.parse_args()


def crc32c(data):
    """CRC-32C (Castagnoli), bit by bit: the events are written here with no
    TensorBoard or TensorFlow code, an independent writer for mtc's reader."""
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(n):
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def record(data):
    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", masked(head)) + data + struct.pack("<I", masked(data))


def scalar_event(step, tag, value):
    """Event{wall_time=1, step=2, summary=5{value=1{tag=1, simple_value=2}}}"""
    t = tag.encode()
    val = b"\x0a" + varint(len(t)) + t + b"\x15" + struct.pack("<f", value)
    summ = b"\x0a" + varint(len(val)) + val
    return b"\x09" + struct.pack("<d", time.time()) + b"\x10" + varint(step) + b"\x2a" + varint(len(summ)) + summ

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", rank=rank, world_size=world)
torch.manual_seed(1234)
torch.set_default_dtype(torch.float64)
assert a.global_batch % world == 0, "the global batch must split evenly among the ranks"
per = a.global_batch // world

# the data: a fixed regression problem every rank makes alike
X = torch.randn(4096, 16)
W_true = torch.randn(16, 1)
Y = X @ W_true + 0.1 * torch.randn(4096, 1)

model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=a.lr)

ck_dir = os.environ["MTC_CHECKPOINT_DIR"]
start = 0
done = sorted(glob.glob(os.path.join(ck_dir, "step_*.pt")),
              key=lambda f: int(re.search(r"step_(\d+)\.pt$", f).group(1)))
if done:
    state = torch.load(done[-1])
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    start = state["step"]
    if rank == 0:
        print(f"resumed from {done[-1]} at step {start} (restart {os.environ.get('MTC_RESTART_COUNT')})", flush=True)

metrics = open(os.environ["MTC_METRICS_FILE"], "a") if rank == 0 and not a.no_metrics else None
tb = None
if rank == 0 and a.tb:
    tb = open(os.path.join(os.environ["MTC_TENSORBOARD_DIR"],
                           f"events.out.tfevents.{int(time.time())}.ddp"), "ab")
    tb.write(record(b"\x09" + struct.pack("<d", time.time()) + b"\x1a\x0dbrain.Event:2"))
for step in range(start + 1, a.steps + 1):
    t0 = time.time()
    if step == a.fail_at and a.fail_rank < 0 and not (a.fail_once and os.environ.get("MTC_RESTART_COUNT", "0") != "0"):
        raise RuntimeError(f"ddp_train: failing at step {step} as asked")
    if step == a.hang_at and rank == world - 1 and os.environ.get("MTC_RESTART_COUNT", "0") == "0":
        time.sleep(1e6)
    lo = ((step - 1) * a.global_batch) % X.shape[0] + rank * per
    x, y = X[lo:lo + per], Y[lo:lo + per]
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(ddp(x), y)
    loss.backward()
    opt.step()
    g = loss.detach().clone()
    dist.all_reduce(g)
    g /= world
    if step == a.fail_at and a.fail_rank >= 0:
        if rank == a.fail_rank:
            print(f"rank {rank}: failing at step {step} as asked", flush=True)
            raise SystemExit(1)
        time.sleep(600)
    if a.sleep:
        time.sleep(a.sleep)
    if rank == 0:
        print(f"step {step} loss {g.item():.12f}", flush=True)
        if metrics:
            row = {"step": step, "loss": g.item()}
            if not a.plain_metrics:
                row.update(step_time_s=time.time() - t0, time=time.time())
            metrics.write(json.dumps(row) + "\n")
            metrics.flush()
        if tb:
            tb.write(record(scalar_event(step, "train/loss", g.item())))
            tb.flush()
        if step % a.ckpt_every == 0 or step == a.steps:
            tmp = os.path.join(ck_dir, f".step_{step}.pt.tmp")
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
            os.rename(tmp, os.path.join(ck_dir, f"step_{step}.pt"))
    while a.hold_file and step >= a.hold_at and os.path.exists(a.hold_file):
        time.sleep(0.1)
    dist.barrier()

if rank == 0:
    h = hashlib.sha256()
    for t in model.state_dict().values():
        h.update(t.numpy().tobytes())
    env = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                          "MASTER_ADDR", "MASTER_PORT", "MTC_CHECKPOINT_DIR",
                                          "MTC_RESTART_COUNT", "MTC_RUN_DIR", "MTC_METRICS_FILE",
                                          "MTC_TENSORBOARD_DIR")}
    with open(os.path.join(os.environ["MTC_RUN_DIR"], "result.json"), "w") as f:
        json.dump({"params_sha256": h.hexdigest(), "start": start, "env": env}, f)
dist.destroy_process_group()
