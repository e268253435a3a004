# gpt2_hf.py: a custom task's program that trains a tiny GPT-2 with PyTorch
# (its own code, Hugging Face's layout: Conv1D weights (in, out), tied
# embeddings, gelu_new) on a generated corpus, byte-level BPE tokenized with
# a dozen merges, and saves it the way save_pretrained does with the slow
# GPT2Tokenizer: config.json (n_inner null), model.safetensors (written by
# hand: Debian 12's torch has no safetensors package), vocab.json +
# merges.txt, plus a file that is no model's (not registered). Progress rows
# go to MTC_METRICS_FILE; MTC_RUN_DIR/result.json gets the greedy completion
# of --prompt computed here from the saved float32 weights in float64, which
# mtc-serve must reproduce, and the smallest top-1/top-2 logit margin on the
# way. Run by tests/integration/run_custom_register.sh.
import argparse
import json
import math
import os
import random
import re
import struct
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--export", required=True, help="the HF directory to write (relative: to cwd)")
p.add_argument("--steps", type=int, default=150)
p.add_argument("--prompt", default="the cat")
p.add_argument("--tokens", type=int, default=12)
a = p.parse_args()
torch.manual_seed(7)
random.seed(7)
torch.set_default_dtype(torch.float64)


def bytes_to_unicode():
    """GPT-2's map of the 256 bytes onto printable characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


B2U = bytes_to_unicode()
U2B = {u: b for b, u in B2U.items()}
MERGES = [("t", "h"), ("th", "e"), ("Ġ", "the"), ("a", "t"), ("Ġ", "c"), ("Ġc", "at"),
          ("Ġ", "s"), ("Ġs", "at"), ("Ġ", "m"), ("Ġm", "at"), ("a", "n"), ("Ġ", "a")]
VOCAB = {B2U[b]: b for b in range(256)}
for x, y in MERGES:
    VOCAB[x + y] = len(VOCAB)
EOT = len(VOCAB)
VOCAB["<|endoftext|>"] = EOT
RANK = {m: i for i, m in enumerate(MERGES)}
ID2TOK = {i: t for t, i in VOCAB.items()}
# GPT-2's pre-tokenizer, for ASCII text (\p{L} = letters, \p{N} = digits)
PRE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def bpe(piece):
    w = [B2U[b] for b in piece.encode()]
    while len(w) > 1:
        r, i = min((RANK.get((w[i], w[i + 1]), 1 << 30), i) for i in range(len(w) - 1))
        if r == 1 << 30:
            break
        w[i:i + 2] = [w[i] + w[i + 1]]
    return [VOCAB[t] for t in w]


def encode(text):
    return [i for piece in PRE.findall(text) for i in bpe(piece)]


def decode(ids):
    return bytes(U2B[c] for i in ids for c in ID2TOK[i]).decode("utf-8", "replace")


# the model: GPT-2's tensors under Hugging Face's names
V, C, L, H, T = len(VOCAB), 32, 2, 2, 64
shapes = {"transformer.wte.weight": (V, C), "transformer.wpe.weight": (T, C),
          "transformer.ln_f.weight": (C,), "transformer.ln_f.bias": (C,)}
for l in range(L):
    h = f"transformer.h.{l}."
    shapes.update({h + "ln_1.weight": (C,), h + "ln_1.bias": (C,),
                   h + "attn.c_attn.weight": (C, 3 * C), h + "attn.c_attn.bias": (3 * C,),
                   h + "attn.c_proj.weight": (C, C), h + "attn.c_proj.bias": (C,),
                   h + "ln_2.weight": (C,), h + "ln_2.bias": (C,),
                   h + "mlp.c_fc.weight": (C, 4 * C), h + "mlp.c_fc.bias": (4 * C,),
                   h + "mlp.c_proj.weight": (4 * C, C), h + "mlp.c_proj.bias": (C,)})
P = {}
for k, s in shapes.items():
    if k.endswith("ln_1.weight") or k.endswith("ln_2.weight") or k.endswith("ln_f.weight"):
        P[k] = torch.ones(s)
    elif k.endswith("bias"):
        P[k] = torch.zeros(s)
    else:
        P[k] = 0.08 * torch.randn(s)
    P[k].requires_grad_(True)


def gelu_new(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(P, ids):  # ids (B, t) -> logits (B, t, V)
    B, t = ids.shape
    ln = lambda x, n: torch.nn.functional.layer_norm(x, (C,), P[n + ".weight"], P[n + ".bias"], 1e-5)
    x = P["transformer.wte.weight"][ids] + P["transformer.wpe.weight"][:t]
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    for l in range(L):
        h = f"transformer.h.{l}."
        qkv = ln(x, h + "ln_1") @ P[h + "attn.c_attn.weight"] + P[h + "attn.c_attn.bias"]
        q, k, v = (z.view(B, t, H, C // H).transpose(1, 2) for z in qkv.split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, t, C)
        x = x + y @ P[h + "attn.c_proj.weight"] + P[h + "attn.c_proj.bias"]
        m = gelu_new(ln(x, h + "ln_2") @ P[h + "mlp.c_fc.weight"] + P[h + "mlp.c_fc.bias"])
        x = x + m @ P[h + "mlp.c_proj.weight"] + P[h + "mlp.c_proj.bias"]
    return ln(x, "transformer.ln_f") @ P["transformer.wte.weight"].T


words = "the cat sat on a mat while dogs ran far from home and birds sang".split()
text = " ".join(" ".join(random.choice(words) for _ in range(random.randint(4, 10))) + "."
                for _ in range(600))
data = torch.tensor(encode(text))
opt = torch.optim.Adam(P.values(), lr=1e-2)
metrics = open(os.environ["MTC_METRICS_FILE"], "a")
for step in range(1, a.steps + 1):
    t0 = time.time()
    at = torch.randint(0, len(data) - 33, (16,))
    batch = torch.stack([data[i:i + 33] for i in at])
    logits = forward(P, batch[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 0 or step == a.steps:
        print(f"step {step} loss {loss.item():.6f}", flush=True)
        metrics.write(json.dumps({"step": step, "loss": loss.item(), "step_time_s": time.time() - t0}) + "\n")
        metrics.flush()

# save_pretrained's layout, float32
out = a.export
os.makedirs(out, exist_ok=True)
W = {k: v.detach().to(torch.float32).contiguous() for k, v in P.items()}
header, blobs, off = {}, [], 0
for k in sorted(W):
    b = W[k].numpy().tobytes()
    header[k] = {"dtype": "F32", "shape": list(W[k].shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
header["__metadata__"] = {"format": "pt"}
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
config = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
          "bos_token_id": EOT, "embd_pdrop": 0.1, "eos_token_id": EOT, "initializer_range": 0.02,
          "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": T, "n_embd": C, "n_head": H,
          "n_inner": None, "n_layer": L, "n_positions": T, "resid_pdrop": 0.1,
          "scale_attn_weights": True, "summary_type": "cls_index", "summary_use_proj": True,
          "torch_dtype": "float32", "transformers_version": "4.40.0", "use_cache": True,
          "vocab_size": V}
json.dump(config, open(os.path.join(out, "config.json"), "w"), indent=2)
json.dump(VOCAB, open(os.path.join(out, "vocab.json"), "w"), ensure_ascii=False)
with open(os.path.join(out, "merges.txt"), "w") as f:
    f.write("#version: 0.2\n" + "".join(f"{x} {y}\n" for x, y in MERGES))
json.dump({"model_max_length": T, "tokenizer_class": "GPT2Tokenizer", "eos_token": "<|endoftext|>"},
          open(os.path.join(out, "tokenizer_config.json"), "w"))
open(os.path.join(out, "training_args.bin"), "wb").write(b"not a model file")

# greedy completion from the saved weights, as a server would compute it
Q = {k: v.to(torch.float64) for k, v in W.items()}
ids, margin = encode(a.prompt), float("inf")
with torch.no_grad():
    for _ in range(a.tokens):
        top = forward(Q, torch.tensor([ids]))[0, -1].topk(2)
        margin = min(margin, (top.values[0] - top.values[1]).item())
        if top.indices[0].item() == EOT:
            break
        ids.append(top.indices[0].item())
done = decode(ids[len(encode(a.prompt)):])
assert done.isascii(), f"the completion is not ASCII: {done!r}"
json.dump({"prompt": a.prompt, "completion": done, "promptTokens": len(encode(a.prompt)),
           "minMargin": margin, "finalLoss": loss.item()},
          open(os.path.join(os.environ["MTC_RUN_DIR"], "result.json"), "w"))
print(f"exported {out}: greedy {a.prompt!r} -> {done!r} (smallest margin {margin:.4f})", flush=True)
