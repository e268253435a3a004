#!/usr/bin/env bash
# image: `mtc image import` of an OCI layout (directory and tarball), a
# docker-save archive and a root directory — whiteouts applied, config in
# /etc/environment and /.mtc/image.json; `mtc image inspect` (digest = sha256
# of the file); `mtc image build-trainer` runs mtc-train and a shell in a
# chroot; every bad input fails with one line and leaves nothing behind.
. "$(dirname "$0")/lib.sh"
D=$T_DIR
export TMPDIR=$D/tmp   # where mtc image works: must be empty after every run
mkdir -p "$TMPDIR"

sha() { sha256sum "$1" | cut -d' ' -f1; }
# blob FILE → copies FILE into $LAYOUT/blobs/sha256/<hex>, prints the hex
blob() { local h; h=$(sha "$1"); mkdir -p "$LAYOUT/blobs/sha256"; cp "$1" "$LAYOUT/blobs/sha256/$h"; echo "$h"; }

# --- the two layers -----------------------------------------------------
mkdir -p "$D/l1/etc" "$D/l1/opt/data" "$D/l1/work" "$D/l2/etc" "$D/l2/opt/data"
echo one >"$D/l1/etc/hello.txt"
echo gone >"$D/l1/etc/remove-me"
echo old >"$D/l1/opt/data/old1"
echo old >"$D/l1/opt/data/old2"
: >"$D/l2/etc/.wh.remove-me"           # deletes a file of layer 1
: >"$D/l2/opt/data/.wh..wh..opq"       # replaces the directory's contents
echo new >"$D/l2/opt/data/new1"
echo two >"$D/l2/etc/added"
tar -C "$D/l1" -cf "$D/layer1.tar" .
tar -C "$D/l2" -cf "$D/layer2.tar" .
gzip -c "$D/layer2.tar" >"$D/layer2.tar.gz"
config() { # config JSON with the diff_ids of the two layers
    cat <<EOF
{"architecture":"amd64","os":"linux",
 "config":{"Env":["PATH=/usr/bin:/bin","GREETING=hello"],"WorkingDir":"/work",
           "Entrypoint":["/bin/sh","-c"],"Cmd":["echo hi"]},
 "rootfs":{"type":"layers","diff_ids":["sha256:$(sha "$D/layer1.tar")","sha256:$(sha "$D/layer2.tar")"]}}
EOF
}
config >"$D/config.json"

# make_oci DIR LAYER... — an OCI image layout with these layer files
make_oci() {
    LAYOUT=$1; shift
    mkdir -p "$LAYOUT"
    local c ls="" l h m
    c=$(blob "$D/config.json")
    for l in "$@"; do
        h=$(blob "$l")
        ls="$ls${ls:+,}{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar$(case $l in *.gz) echo +gzip ;; esac)\",\"digest\":\"sha256:$h\",\"size\":$(stat -c %s "$l")}"
    done
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[%s]}' \
        "$c" "$(stat -c %s "$D/config.json")" "$ls" >"$D/manifest.blob"
    m=$(blob "$D/manifest.blob")
    printf '{"imageLayoutVersion":"1.0.0"}' >"$LAYOUT/oci-layout"
    printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"}}]}' \
        "$m" "$(stat -c %s "$D/manifest.blob")" >"$LAYOUT/index.json"
}
make_oci "$D/oci" "$D/layer1.tar" "$D/layer2.tar.gz"
tar -C "$D/oci" -cf "$D/oci.tar" .

# docker save: <config hex>.json, <hex>/layer.tar, manifest.json
mkdir -p "$D/docker"
ch=$(sha "$D/config.json"); cp "$D/config.json" "$D/docker/$ch.json"
l1=$(sha "$D/layer1.tar"); l2=$(sha "$D/layer2.tar")
mkdir -p "$D/docker/$l1" "$D/docker/$l2"
cp "$D/layer1.tar" "$D/docker/$l1/layer.tar"; cp "$D/layer2.tar" "$D/docker/$l2/layer.tar"
printf '[{"Config":"%s.json","RepoTags":["test:1"],"Layers":["%s/layer.tar","%s/layer.tar"]}]' \
    "$ch" "$l1" "$l2" >"$D/docker/manifest.json"
tar -C "$D/docker" -cf "$D/docker.tar" .

tmp_empty() { [ -z "$(ls -A "$TMPDIR")" ]; }

# --- imports --------------------------------------------------------------
check_image() { # NAME IMAGE
    local n=$1 img=$2 list
    list=$(unsquashfs -l "$img" 2>&1)
    check "$n: layer 1's file" grep -qx 'squashfs-root/etc/hello.txt' <<<"$list"
    check "$n: layer 2's file" grep -qx 'squashfs-root/etc/added' <<<"$list"
    check "$n: .wh.remove-me deleted layer 1's file" bash -c '! grep -q "etc/remove-me" <<<"$1"' _ "$list"
    check "$n: opaque directory: lower contents gone, upper kept" \
        bash -c '! grep -q "opt/data/old" <<<"$1" && grep -qx squashfs-root/opt/data/new1 <<<"$1"' _ "$list"
    check "$n: no whiteout files in the image" bash -c '! grep -q "\.wh\." <<<"$1"' _ "$list"
    check "$n: /etc/environment holds the config's Env" \
        bash -c '[ "$(unsquashfs -cat "$1" /etc/environment)" = "$(printf "PATH=/usr/bin:/bin\nGREETING=hello")" ]' _ "$img"
    unsquashfs -cat "$img" /.mtc/image.json >"$D/$n.json" 2>&1
    check "$n: /.mtc/image.json holds the config" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["env"] == ["PATH=/usr/bin:/bin", "GREETING=hello"], j
assert j["workingDir"] == "/work" and j["entrypoint"] == ["/bin/sh", "-c"] and j["cmd"] == ["echo hi"], j
assert j["source"] == sys.argv[2] and j["created"].endswith("Z"), j' "$D/$n.json" "$3"
    check "$n: the work directory is gone" tmp_empty
}
mtc image import "$D/oci" -o "$D/oci-dir.sqsh" >"$D/out" 2>&1
check "import OCI layout directory" test $? = 0 -a -s "$D/oci-dir.sqsh"
check_image oci-dir "$D/oci-dir.sqsh" "$D/oci"
mtc image import "$D/oci.tar" -o "$D/oci-tar.sqsh" >"$D/out" 2>&1
check "import OCI layout tarball" test $? = 0 -a -s "$D/oci-tar.sqsh"
check_image oci-tar "$D/oci-tar.sqsh" "$D/oci.tar"
mtc image import "$D/docker.tar" -o "$D/docker.sqsh" >"$D/out" 2>&1
check "import docker-save archive" test $? = 0 -a -s "$D/docker.sqsh"
sed 's/^/# /' "$D/out"
check_image docker "$D/docker.sqsh" "$D/docker.tar"
check "no .sqsh.tmp left" bash -c '! ls "$1"/*.tmp 2>/dev/null | grep -q .' _ "$D"

# a root directory: its /etc/environment kept as it is
mkdir -p "$D/rootfs/etc" "$D/rootfs/usr/bin"
printf 'FOO=bar\nBAZ="q x"\n' >"$D/rootfs/etc/environment"
echo x >"$D/rootfs/usr/bin/tool"
mtc image import "$D/rootfs" -o "$D/dir.sqsh" >"$D/out" 2>&1
check "import a root directory" test $? = 0 -a -s "$D/dir.sqsh"
check "directory: /etc/environment kept as is" \
    bash -c '[ "$(unsquashfs -cat "$1" /etc/environment)" = "$(printf "FOO=bar\nBAZ=\"q x\"")" ]' _ "$D/dir.sqsh"
check "directory: image.json env from /etc/environment" \
    bash -c 'unsquashfs -cat "$1" /.mtc/image.json | python3 -c "import json,sys; assert json.load(sys.stdin)[\"env\"] == [\"FOO=bar\", \"BAZ=q x\"]"' _ "$D/dir.sqsh"
check "directory: the user's tree untouched" test ! -e "$D/rootfs/.mtc"

# --- inspect --------------------------------------------------------------
mtc image inspect "$D/oci-dir.sqsh" >"$D/insp" 2>&1
check "inspect: exit 0" test $? = 0
sed 's/^/# /' "$D/insp"
check "inspect: digest is sha256 of the file" grep -qx "digest      sha256:$(sha "$D/oci-dir.sqsh")" "$D/insp"
check "inspect: size in bytes" grep -q "^size        $(stat -c %s "$D/oci-dir.sqsh") bytes (" "$D/insp"
check "inspect: env, workingDir, entrypoint" bash -c \
    'grep -q "GREETING=hello" "$1" && grep -qx "workingDir  /work" "$1" && grep -qx "entrypoint  \[\"/bin/sh\",\"-c\"\]" "$1"' _ "$D/insp"
mtc image inspect --json "$D/oci-dir.sqsh" >"$D/insp.json" 2>&1
check "inspect --json" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["digest"] == "sha256:" + sys.argv[2] and j["size"] == int(sys.argv[3]), j
assert j["env"] == ["PATH=/usr/bin:/bin", "GREETING=hello"] and j["workingDir"] == "/work", j
assert j["entrypoint"] == ["/bin/sh", "-c"] and j["cmd"] == ["echo hi"] and j["source"] and j["created"], j' \
    "$D/insp.json" "$(sha "$D/oci-dir.sqsh")" "$(stat -c %s "$D/oci-dir.sqsh")"

# --- bad input: exit non-zero, one line naming the problem, nothing left ---
# fails NAME WANT OUT -- ARGS: mtc image ARGS fails with WANT in its one line
fails() {
    local n=$1 want=$2 out=$3; shift 4
    local msg rc
    msg=$(mtc image "$@" 2>&1); rc=$?
    [ "$rc" != 0 ] || { nok "$n: exit 0"; return; }
    [ "$(wc -l <<<"$msg")" = 1 ] && grep -qF -- "$want" <<<"$msg" || { nok "$n: message: $msg"; return; }
    [ -z "$out" ] || [ ! -e "$out" ] && [ ! -e "$out.tmp" ] || { nok "$n: left $out"; return; }
    tmp_empty || { nok "$n: left a work directory: $(ls "$TMPDIR")"; return; }
    ok "$n: $msg"
}
fails "missing source" "$D/nope.tar: No such file" "$D/bad.sqsh" -- import "$D/nope.tar" -o "$D/bad.sqsh"
head -c 3000 /dev/urandom >"$D/junk.bin"
fails "not a tar archive" "$D/junk.bin: not a tar archive: tar: This does not look like a tar archive" "$D/bad.sqsh" -- import "$D/junk.bin" -o "$D/bad.sqsh"
mkdir -p "$D/plain"; tar -C "$D/rootfs" -cf "$D/plain.tar" .
fails "a tar that is no image" "no index.json or manifest.json" "$D/bad.sqsh" -- import "$D/plain.tar" -o "$D/bad.sqsh"
cp -r "$D/oci" "$D/oci-missing"; rm "$D/oci-missing/blobs/sha256/$l1"
fails "manifest names a missing blob" "sha256:$l1, which is not in the image" "$D/bad.sqsh" -- import "$D/oci-missing" -o "$D/bad.sqsh"
cp -r "$D/oci" "$D/oci-tamper"; echo x >>"$D/oci-tamper/blobs/sha256/$l1"
fails "layer digest mismatch" "layer 1: digest mismatch: the manifest says sha256:$l1" "$D/bad.sqsh" -- import "$D/oci-tamper" -o "$D/bad.sqsh"
cp -r "$D/docker" "$D/docker-tamper"; echo x >>"$D/docker-tamper/$l2/layer.tar"
fails "docker layer digest mismatch (diff_ids)" "digest mismatch" "$D/bad.sqsh" -- import "$D/docker-tamper" -o "$D/bad.sqsh"
python3 - "$D/evil.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    data = b"pwned\n"
    ti = tarfile.TarInfo("etc/../../escaped.txt"); ti.size = len(data)
    t.addfile(ti, io.BytesIO(data))
EOF
make_oci "$D/oci-evil" "$D/layer1.tar" "$D/evil.tar"
fails "layer member with .." "leaves the image's root" "$D/bad.sqsh" -- import "$D/oci-evil" -o "$D/bad.sqsh"
check "nothing written outside the root" bash -c '! find "$1" -name escaped.txt | grep -q .' _ "$D/.."
python3 - "$D/link1.tar" "$D/link2.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    ti = tarfile.TarInfo("etc"); ti.type = tarfile.SYMTYPE; ti.linkname = "/tmp"
    t.addfile(ti)
with tarfile.open(sys.argv[2], "w") as t:
    data = b"pwned\n"
    ti = tarfile.TarInfo("etc/through-link.txt"); ti.size = len(data)
    t.addfile(ti, io.BytesIO(data))
EOF
make_oci "$D/oci-link" "$D/link1.tar" "$D/link2.tar"
fails "layer writing through a lower layer's symlink" "goes through the symlink /etc" "$D/bad.sqsh" -- import "$D/oci-link" -o "$D/bad.sqsh"
check "nothing written through the symlink" test ! -e /tmp/through-link.txt
# links (issue 26): a hard link's target, like a member's name, never passes
# through a symlink or leaves the root — root importing a user's archive must
# not pack a file only root may read. secdemo is root's, mode 0700.
mkdir -p "$D/secdemo" && echo top-secret >"$D/secdemo/secret" && chmod 700 "$D/secdemo"
python3 - "$D" <<'EOF'
import io, sys, tarfile
d = sys.argv[1]
def sym(t, name, target):
    ti = tarfile.TarInfo(name); ti.type = tarfile.SYMTYPE; ti.linkname = target; t.addfile(ti)
def hard(t, name, target):
    ti = tarfile.TarInfo(name); ti.type = tarfile.LNKTYPE; ti.linkname = target; t.addfile(ti)
def layer(name, *members):
    with tarfile.open(f"{d}/{name}.tar", "w") as t:
        for m in members: m(t)
layer("lk-sym", lambda t: sym(t, "e", f"{d}/secdemo"))           # e -> secdemo
layer("lk-hard", lambda t: hard(t, "x", "e/secret"))              # x => e/secret
layer("lk-both", lambda t: sym(t, "f", f"{d}/secdemo"), lambda t: hard(t, "y", "f/secret"))
layer("lk-dots", lambda t: hard(t, "z", "../../secdemo/secret"))
wh = tarfile.TarInfo("e/.wh.secret"); wh.size = 0
layer("lk-wh", lambda t: t.addfile(wh, io.BytesIO(b"")))          # whiteout of e/secret
layer("lk-ok", lambda t: hard(t, "etc/hello-again", "etc/hello.txt"))  # a lower layer's file
EOF
make_oci "$D/oci-lk1" "$D/layer1.tar" "$D/lk-sym.tar" "$D/lk-hard.tar"
fails "a hard link through a lower layer's symlink" 'member "x" links to "e/secret" through the symlink /e' "$D/bad.sqsh" -- import "$D/oci-lk1" -o "$D/bad.sqsh"
make_oci "$D/oci-lk2" "$D/layer1.tar" "$D/lk-both.tar"
fails "a hard link through its own layer's symlink" 'member "y" links to "f/secret" through the symlink /f' "$D/bad.sqsh" -- import "$D/oci-lk2" -o "$D/bad.sqsh"
make_oci "$D/oci-lk3" "$D/layer1.tar" "$D/lk-dots.tar"
fails "a hard link with .." 'member "z" links to "../../secdemo/secret", outside the image' "$D/bad.sqsh" -- import "$D/oci-lk3" -o "$D/bad.sqsh"
make_oci "$D/oci-lk4" "$D/layer1.tar" "$D/lk-sym.tar" "$D/lk-wh.tar"
fails "a whiteout through a lower layer's symlink" "whiteout of /e/secret goes through a symlink" "$D/bad.sqsh" -- import "$D/oci-lk4" -o "$D/bad.sqsh"
check "the file outside is untouched" test "$(cat "$D/secdemo/secret")" = top-secret
make_oci "$D/oci-lk5" "$D/layer1.tar" "$D/lk-ok.tar"
mtc image import "$D/oci-lk5" -o "$D/lk-ok.sqsh" >/dev/null 2>&1
check "a hard link to a lower layer's file is kept" bash -c \
    'unsquashfs -cat "$1" etc/hello-again 2>/dev/null | grep -qx one' _ "$D/lk-ok.sqsh"
fails "unwritable -o (no such directory)" "cannot write $D/no/dir.sqsh" "$D/no/dir.sqsh" -- import "$D/oci" -o "$D/no/dir.sqsh"
fails "-o is a directory" "cannot write $D/oci: it is a directory" "" -- import "$D/oci.tar" -o "$D/oci"
msg=$(mtc image import "$D/oci" 2>&1); rc=$?
check "missing -o: exit 2 naming -o" bash -c '[ "$1" = 2 ] && grep -q "missing -o" <<<"$2"' _ "$rc" "$msg"
fails "inspect a file that is no image" "$D/junk.bin: not a squashfs image" "" -- inspect "$D/junk.bin"
fails "inspect a missing file" "$D/nope.sqsh: No such file" "" -- inspect "$D/nope.sqsh"
check "no temp files left in TMPDIR" tmp_empty

# --- the trainer image ----------------------------------------------------
start=$SECONDS
mtc image build-trainer -o "$D/trainer.sqsh" >"$D/out" 2>&1
check "build-trainer" test $? = 0 -a -s "$D/trainer.sqsh"
diag "build-trainer: $((SECONDS - start)) s, $(stat -c %s "$D/trainer.sqsh") bytes"
sed 's/^/# /' "$D/out"
check "build-trainer: the work directory is gone" tmp_empty
unsquashfs -q -d "$D/tr" "$D/trainer.sqsh" >/dev/null 2>&1
check "trainer image unpacks" test -x "$D/tr/usr/bin/mtc-train"
check "trainer image: image.json entrypoint mtc-train" python3 -c '
import json, sys; assert json.load(open(sys.argv[1]))["entrypoint"] == ["mtc-train"]' "$D/tr/.mtc/image.json"
check "trainer image: PATH in /etc/environment" grep -q '^PATH=.*/usr/bin' "$D/tr/etc/environment"
check "trainer image: /tmp is 1777" test "$(stat -c %a "$D/tr/tmp")" = 1777
check "trainer image: Open MPI components, help, config" \
    test -d "$D/tr/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3" -a -d "$D/tr/usr/share/openmpi" -a -d "$D/tr/etc/openmpi"
if [ "$(id -u)" = 0 ]; then
    chroot "$D/tr" /usr/bin/mtc-train --help >"$D/help" 2>&1
    check "chroot: mtc-train --help runs" test $? = 0 -a -s "$D/help"
    out=$(chroot "$D/tr" /bin/sh -c 'cat /etc/os-release; id -un; ls /; env; cd /tmp && pwd; mkdir /tmp/d && touch /tmp/d/f && ls /tmp/d; true && ! false && echo done' 2>&1)
    check "chroot: sh, cat, id, ls, env, pwd, mkdir, touch, true, false" bash -c \
        'grep -q "^ID=mtc-trainer" <<<"$1" && grep -qx root <<<"$1" && grep -qx /tmp <<<"$1" && grep -qx f <<<"$1" && grep -qx done <<<"$1"' _ "$out"
    # every plugin resolves its libraries inside the image as well as on the host
    bad="" n=0
    for f in $(cd "$D/tr" && find usr/lib/x86_64-linux-gnu/openmpi usr/lib/x86_64-linux-gnu/pmix2 -name '*.so'); do
        h=$(ldd "/$f" 2>&1 | grep -c 'not found')
        c=$(chroot "$D/tr" /lib64/ld-linux-x86-64.so.2 --list "/$f" 2>&1 | grep -c 'not found')
        n=$((n + 1))
        [ "$h" = "$c" ] || bad="$bad $f"
    done
    check "chroot: the $n Open MPI and PMIx plugins find their libraries${bad:+:$bad}" test -z "$bad" -a "$n" -gt 50
else
    skip "chroot checks need root"
fi
done_testing
