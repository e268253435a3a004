#!/usr/bin/env bash
# train_formats: independent python3 readers (stdlib only) check the TensorBoard event file
# (record framing, masked CRC32C, Event protobuf scalars) and the safetensors file (header,
# padding, offsets, file size) that the trainer's writers produce.
. "$(dirname "$0")/lib.sh"

out=$T_DIR/samples
mkdir -p "$out"
if "$B/tests/test_train_formats" "$out" >/dev/null; then ok "C writers produce sample files"
else nok "C writers produce sample files"; fi

cat > "$T_DIR/readers.py" <<'PY'
import json, os, socket, struct, sys, glob

def crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t
TABLE = crc_table()

def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = TABLE[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

def masked(b):
    c = crc32c(b)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def varint(b, i):
    v = s = 0
    while True:
        x = b[i]; i += 1
        v |= (x & 0x7F) << s; s += 7
        if x < 0x80:
            return v, i

def fields(b):
    """Decode one protobuf message into [(field, wiretype, value)]."""
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v = b[i:i + 8]; i += 8
        elif wt == 5:
            v = b[i:i + 4]; i += 4
        elif wt == 2:
            n, i = varint(b, i); v = b[i:i + n]; i += n
        else:
            raise ValueError("wire type %d" % wt)
        out.append((f, wt, v))
    if i != len(b):
        raise ValueError("message overrun")
    return out

def read_events(path):
    data = open(path, "rb").read()
    i, events = 0, []
    while i < len(data):
        head = data[i:i + 8]
        (n,) = struct.unpack("<Q", head)
        (hc,) = struct.unpack("<I", data[i + 8:i + 12])
        assert hc == masked(head), "length crc at %d" % i
        body = data[i + 12:i + 12 + n]
        (dc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        assert len(body) == n and dc == masked(body), "data crc at %d" % i
        events.append(fields(body))
        i += 16 + n
    return events

def tboard(d):
    files = glob.glob(os.path.join(d, "events.out.tfevents.*"))
    assert len(files) == 1, files
    name = os.path.basename(files[0]).split(".")
    assert len(name[3]) == 10 and name[3].isdigit(), name
    assert ".".join(name[4:]) == socket.gethostname(), name
    ev = read_events(files[0])
    first = dict((f, v) for f, _, v in ev[0])
    assert first[3] == b"brain.Event:2", first
    wall = struct.unpack("<d", first[1])[0]
    assert abs(wall - int(name[3])) < 5, (wall, name[3])
    scalars = {}
    for e in ev[1:]:
        d = {f: v for f, _, v in e}
        step = d.get(2, 0)
        for f, _, val in fields(d[5]):
            assert f == 1
            v = {g: x for g, _, x in fields(val)}
            scalars.setdefault(v[1].decode(), []).append((step, struct.unpack("<f", v[2])[0]))
    return scalars

def safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0, "header not padded to 8"
    raw = data[8:8 + n]
    h = json.loads(raw.decode("utf-8"))
    assert raw.rstrip(b" ") == raw.strip(), "padding must be trailing spaces"
    assert h.pop("__metadata__") == {"format": "pt"}
    assert list(h) == sorted(h), "header keys sorted"
    size = {"F32": 4, "BF16": 2, "F16": 2}
    end = 0
    for name, t in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, e = t["data_offsets"]
        assert b == end, "gap before %s" % name
        cnt = 1
        for s in t["shape"]:
            cnt *= s
        assert e - b == cnt * size[t["dtype"]], name
        end = e
    assert 8 + n + end == len(data), "file size"
    z = h["zeta.weight"]["data_offsets"][0] + 8 + n
    return h, struct.unpack("<6f", data[z:z + 24])

what, arg = sys.argv[1], sys.argv[2]
if what == "tb":
    s = tboard(arg)
    assert sorted(s) == ["train/loss", "train/lr"], s
    assert [st for st, _ in s["train/loss"]] == [1, 2, 3, 4, 5]
    assert all(abs(v - 10.0 / st) < 1e-5 for st, v in s["train/loss"]), s
    assert abs(s["train/lr"][-1][1] - 0.005) < 1e-7
    print("tb ok", s["train/loss"])
else:
    h, z = safetensors(arg)
    assert h["zeta.weight"]["shape"] == [2, 3] and z == (1, 2, 3, 4, 5, 6), (h, z)
    assert h["mid.bf16"]["dtype"] == "BF16"
    print("safetensors ok", sorted(h))
PY

check "python reader: TensorBoard CRCs valid, scalars decode" python3 "$T_DIR/readers.py" tb "$out"
check "python reader: safetensors header, offsets and size valid" \
    python3 "$T_DIR/readers.py" st "$out/model.safetensors"

# The reader must catch a flipped byte in a record.
ev=$(ls "$out"/events.out.tfevents.*)
python3 -c "
import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[60]^=1; open(p,'wb').write(b)" "$ev"
if python3 "$T_DIR/readers.py" tb "$out" >/dev/null 2>&1; then nok "corrupted event file detected"
else ok "corrupted event file detected"; fi
done_testing
