#!/usr/bin/env python3
"""torch_ref: an independent PyTorch (float64, CPU) implementation of the decoder families
mtc-train trains -- GPT-2, Llama 3, Gemma 2, Gemma 3 -- written from the published
architecture descriptions (the GPT-2 paper and HF modeling code's documented behaviour, the
Llama 3 and Gemma 2/3 reports), not from our C. test_train_reference.c writes, per model, a
directory with the model in HF safetensors + config.json, the logits and the gradient of the
mean token cross-entropy our trainer computed, and runs this script once on all of them (torch
takes seconds to import); it recomputes both from the exported weights and compares: logits
<= 1e-4 and every parameter's gradient <= 1e-3, relative to the largest magnitude of the
reference tensor. Output, per directory: "NAME<TAB>ok|FAIL<TAB>summary", then for a failure
"NAME<TAB>#<TAB>mismatch" lines naming the tensor and its worst element.
Exit 0: all equal; 1: a mismatch; 77: no torch here (skip)."""
import json
import math
import struct
import sys

try:
    import torch
except ImportError:
    print("torch is not installed (Debian: apt-get install python3-torch)", file=sys.stderr)
    sys.exit(77)

DT = torch.float64


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", name
        a, b = t["data_offsets"]
        buf = bytearray(data[base + a : base + b])
        out[name] = torch.frombuffer(buf, dtype=torch.float32).reshape(t["shape"]).to(DT)
    return out


def rms_norm(x, w, eps, plus_one):
    # Llama: x / rms(x) * w ; Gemma: x / rms(x) * (1 + w)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * ((1.0 + w) if plus_one else w)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def inv_freq(hd, theta, cfg=None, linear=None):
    f = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=DT) / hd))
    if cfg is not None and cfg.get("rope_scaling") and cfg["rope_scaling"].get("rope_type") == "llama3":
        # Llama 3.1: long wavelengths divided by factor, short kept, smooth blend between
        rs = cfg["rope_scaling"]
        factor, lo, hi, orig = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / f
        smooth = (orig / wavelen - lo) / (hi - lo)
        scaled = torch.where(wavelen > orig / lo, f / factor, f)
        mid = (wavelen <= orig / lo) & (wavelen >= orig / hi)
        f = torch.where(mid, (1 - smooth) * f / factor + smooth * f, scaled)
    if linear:
        f = f / linear
    return f


def rope(x, freqs):
    # x (B, nh, T, hd), rotate_half layout: pairs (i, i + hd/2)
    T, hd = x.shape[2], x.shape[3]
    ang = torch.arange(T, dtype=DT)[:, None] * freqs[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)
    sin = torch.cat([ang.sin(), ang.sin()], -1)
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    rot = torch.cat([-x2, x1], -1)
    return x * cos + rot * sin


def attention(q, k, v, scale, softcap=None, window=None):
    # q (B,H,T,hd), k,v (B,KV,T,hd): grouped-query heads share k,v
    H, KV, T = q.shape[1], k.shape[1], q.shape[2]
    k = k.repeat_interleave(H // KV, dim=1)
    v = v.repeat_interleave(H // KV, dim=1)
    s = (q @ k.transpose(-1, -2)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    allowed = j <= i
    if window:
        allowed = allowed & (j > i - window)
    s = s.masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, -1) @ v


def gpt2(cfg, W, x):
    B, T = x.shape
    C, nh = cfg["n_embd"], cfg["n_head"]
    hd = C // nh
    h = W["transformer.wte.weight"][x] + W["transformer.wpe.weight"][:T]
    ln = lambda t, p: torch.nn.functional.layer_norm(t, (C,), W[p + ".weight"], W[p + ".bias"], cfg["layer_norm_epsilon"])
    for l in range(cfg["n_layer"]):
        p = "transformer.h.%d." % l
        a = ln(h, p + "ln_1")
        qkv = a @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]  # Conv1D: (in, out)
        q, k, v = [t.view(B, T, nh, hd).transpose(1, 2) for t in qkv.split(C, -1)]
        o = attention(q, k, v, 1.0 / math.sqrt(hd)).transpose(1, 2).reshape(B, T, C)
        h = h + o @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        m = ln(h, p + "ln_2")
        m = gelu_tanh(m @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"])
        h = h + m @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
    h = ln(h, "transformer.ln_f")
    return h @ W["transformer.wte.weight"].T


def decoder(cfg, W, x, gemma):
    """Llama 3 (gemma=0), Gemma 2 (2), Gemma 3 (3)."""
    B, T = x.shape
    C, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or C // H
    eps = cfg["rms_norm_eps"]
    norm = lambda t, name: rms_norm(t, W[name], eps, gemma > 0)
    h = W["model.embed_tokens.weight"][x]
    if gemma:
        h = h * torch.tensor(C ** 0.5, dtype=torch.float32).to(DT)  # the normalizer, in fp32
    scale = (cfg["query_pre_attn_scalar"] ** -0.5) if gemma else hd ** -0.5
    softcap = cfg.get("attn_logit_softcapping") if gemma == 2 else None
    if gemma == 3:
        f_global = inv_freq(hd, cfg["rope_theta"], linear=(cfg.get("rope_scaling") or {}).get("factor"))
        f_local = inv_freq(hd, cfg["rope_local_base_freq"])
    else:
        f_global = f_local = inv_freq(hd, cfg["rope_theta"], cfg if not gemma else None)
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        if gemma == 2:
            local = l % 2 == 0
        elif gemma == 3:
            local = (l + 1) % cfg["sliding_window_pattern"] != 0
        else:
            local = False
        window = cfg["sliding_window"] if local else None
        a = norm(h, p + "input_layernorm.weight")
        q = (a @ W[p + "self_attn.q_proj.weight"].T).view(B, T, H, hd).transpose(1, 2)
        k = (a @ W[p + "self_attn.k_proj.weight"].T).view(B, T, KV, hd).transpose(1, 2)
        v = (a @ W[p + "self_attn.v_proj.weight"].T).view(B, T, KV, hd).transpose(1, 2)
        if gemma == 3:
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps, True)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps, True)
        fr = f_local if local else f_global
        q, k = rope(q, fr), rope(k, fr)
        o = attention(q, k, v, scale, softcap, window).transpose(1, 2).reshape(B, T, H * hd)
        o = o @ W[p + "self_attn.o_proj.weight"].T
        if gemma:
            h = h + norm(o, p + "post_attention_layernorm.weight")
            m = norm(h, p + "pre_feedforward_layernorm.weight")
        else:
            h = h + o
            m = norm(h, p + "post_attention_layernorm.weight")
        g = m @ W[p + "mlp.gate_proj.weight"].T
        u = m @ W[p + "mlp.up_proj.weight"].T
        act = gelu_tanh(g) if gemma else torch.nn.functional.silu(g)
        m = (act * u) @ W[p + "mlp.down_proj.weight"].T
        h = h + (norm(m, p + "post_feedforward_layernorm.weight") if gemma else m)
    h = norm(h, "model.norm.weight")
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    logits = h @ head.T
    cap = cfg.get("final_logit_softcapping") if gemma == 2 else None
    if cap:
        logits = cap * torch.tanh(logits / cap)
    return logits


def compare(name, got, ref, tol, bad):
    got = got.reshape(ref.shape).to(DT)
    err = (got - ref).abs()
    scale = ref.abs().max().item()
    rel = err.max().item() / (scale if scale > 0 else 1.0)
    if not (rel <= tol):  # NaN fails too
        i = int(err.reshape(-1).argmax())
        idx, r = [], i
        for n in reversed(ref.shape):
            idx.insert(0, r % n)
            r //= n
        idx = tuple(idx)
        bad.append("%s: relative error %.3g > %g at %s: ours %.8g, reference %.8g (max |ref| %.3g)"
                   % (name, rel, tol, idx, got.reshape(-1)[i].item(), ref.reshape(-1)[i].item(), scale))
    return rel


def check(d):
    cfg = json.load(open(d + "/model/config.json"))
    io = json.load(open(d + "/io.json"))
    W = load_safetensors(d + "/model/model.safetensors")
    G = load_safetensors(d + "/grads/model.safetensors")
    for t in W.values():
        t.requires_grad_(True)
    B, T = io["B"], io["T"]
    x = torch.tensor(io["x"]).view(B, T)
    y = torch.tensor(io["y"]).view(B, T)
    mt = cfg["model_type"]
    if mt == "gpt2":
        logits = gpt2(cfg, W, x)
    else:
        logits = decoder(cfg, W, x, {"llama": 0, "gemma2": 2, "gemma3_text": 3}[mt])
    V = cfg["vocab_size"]
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1), ignore_index=-1)
    loss.backward()
    with open(d + "/logits.bin", "rb") as f:
        ours = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    bad = []
    worst = {"logits": compare("logits", ours, logits.detach(), 1e-4, bad)}
    if abs(loss.item() - io["loss"]) > 1e-4 * max(1.0, abs(loss.item())):
        bad.append("loss: ours %.8g, reference %.8g" % (io["loss"], loss.item()))
    for name, w in W.items():
        if name not in G:
            bad.append("%s: no gradient in our export" % name)
            continue
        worst[name] = compare(name + " (gradient)", G[name], w.grad, 1e-3, bad)
    if set(G) - set(W):
        bad.append("gradients of tensors the reference does not have: %s" % sorted(set(G) - set(W)))
    name = max(worst, key=worst.get)
    tag = d.rstrip("/").split("/")[-1]
    print("%s\t%s\t%s: %d tensors; loss %.6f; worst relative error %.2g (%s)"
          % (tag, "FAIL" if bad else "ok", mt, len(W), loss.item(), worst[name], name))
    for b in bad:
        print("%s\t#\t%s" % (tag, b))
    return not bad


ok = True
for d in sys.argv[1:]:
    try:
        ok = check(d) and ok
    except Exception as e:  # a missing file, a shape that does not fit: that directory fails
        print("%s\tFAIL\t%s: %s" % (d.rstrip("/").split("/")[-1], type(e).__name__, e))
        ok = False
sys.exit(0 if ok else 1)
