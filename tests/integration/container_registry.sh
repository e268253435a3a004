#!/usr/bin/env bash
# container_registry: registry images in Slurm steps (issue 42) against real
# parts on loopback — Debian's docker-registry twice (plain HTTP without auth;
# TLS with a test CA and htpasswd auth), images pushed by skopeo from OCI
# layouts built here (a multi-arch index among them), a 2-node local cluster:
# `srun -N2 --container-image=127.0.0.1:PORT#test/app:1` pulls once for both
# nodes, PYXIS_CONTAINER_IMAGE and sbatch --container-image take references, an unchanged tag is not pulled again and a moved one is, enroot's
# credentials as the user, wrong credentials / missing tag / no linux/amd64 /
# a corrupted blob (a test proxy flips a byte) / a bad reference each one
# line, the registry killed mid-pull leaves no partial cache entry and a retry
# completes, the cloud guide's `enroot import` conversion job,
# ENROOT_MAX_PROCESSORS as mksquashfs's -processors (a bad value one line), and as nobody:
# another user's credentials unread, a symlinked .credentials or cache entry
# refused, the cache root's.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_setup.inc"
. "$(dirname "$0")/registry.inc"
D=$T_DIR
chmod 755 "$D"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
for tool in docker-registry skopeo htpasswd openssl; do
    command -v $tool >/dev/null || { echo "1..0 # SKIP $tool is not installed (scripts/setup)"; exit 0; }
done

# --- two registries --------------------------------------------------------
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=mtc-test-ca -keyout "$D/ca.key" \
    -out "$D/ca.crt" >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$D/srv.key" -out "$D/srv.csr" \
    >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1\n' >"$D/san.ext"
openssl x509 -req -in "$D/srv.csr" -CA "$D/ca.crt" -CAkey "$D/ca.key" -CAcreateserial -days 2 \
    -extfile "$D/san.ext" -out "$D/srv.crt" >/dev/null 2>&1
htpasswd -Bbn alice 'pa55-w0rd' >"$D/htpasswd" 2>/dev/null
PA=$(free_port) PB=$(free_port)
reg_config rega 127.0.0.1 "$PA" tls
reg_config regb 127.0.0.1 "$PB"
check "a registry with TLS and htpasswd auth" reg_start rega 127.0.0.1 "$PA" https
check "a registry over plain HTTP, no auth" reg_start regb 127.0.0.1 "$PB" http
run_or_stop $? "$D/regb.log"

# --- images: OCI layouts made here, pushed with skopeo ------------------------
R=$D/rootfs
run_rootfs "$R" sh cat echo ls true
tar -C "$R" -cf "$D/base.tar" .
oci_layout "$D/v1" v1 amd64 && oci_layout "$D/v2" v2 amd64 && oci_layout "$D/multi" multi "arm64 amd64" &&
    oci_layout "$D/armonly" armonly arm64 && oci_layout "$D/corrupt" corrupt amd64 &&
    oci_layout "$D/slow" slow amd64 && EVIL=1 oci_layout "$D/evil" evil amd64
run_or_stop $? /dev/null
PLAIN=(--dest-tls-verify=false)
mkdir -p "$D/certs" && cp "$D/ca.crt" "$D/certs/ca.crt"
check "skopeo pushes test/app:1, a multi-arch index and an arm64-only index" \
    bash -c "$(declare -f reg_push); D='$D'; reg_push $D/v1 127.0.0.1:$PB/test/app:1 ${PLAIN[*]} &&
        reg_push $D/multi 127.0.0.1:$PB/test/multi:1 ${PLAIN[*]} &&
        reg_push $D/armonly 127.0.0.1:$PB/test/armonly:1 ${PLAIN[*]} &&
        reg_push $D/evil 127.0.0.1:$PB/test/evil:1 ${PLAIN[*]} &&
        reg_push $D/v1 127.0.0.1:$PA/test/app:1 --dest-cert-dir=$D/certs --dest-creds=alice:pa55-w0rd"
run_or_stop $? "$D/push.log"

# --- a cluster ---------------------------------------------------------------
check "2-node cluster" run_cluster creg
run_or_stop $? "$D/create.out"
CDIR=$MTC_HOME/clusters/creg
CACHE=$CDIR/images
check "plugstack.conf gives the plugin mtc, the cluster's image cache and its limit" \
    grep -q " pull=.*/bin/mtc cache=$CACHE cachegb=200" "$CDIR/etc/plugstack.conf"
export ENROOT_ALLOW_HTTP=1 # registry B speaks plain HTTP (enroot's variable)
pulls() { local n; n=$(grep -c -- " $1\$" "$CACHE/pulls.log" 2>/dev/null); echo "${n:-0}"; }

APP="127.0.0.1:$PB#test/app:1"
out=$(srun -N2 --container-image="$APP" cat /etc/app-version 2>"$D/first.err")
check "srun -N2 of a registry image runs on both nodes" test "$(grep -c '^v1 amd64$' <<<"$out")" = 2 ||
    cat "$D/first.err"
check "the two nodes' first use pulled once" test "$(pulls "$APP")" = 1
check "mtc image cache list shows it, root's and read-only to users" \
    bash -c "mtc image cache list -c creg | grep -q ' $APP\$' &&
             test \"\$(stat -c %U:%a '$CACHE'/images/*.sqsh)\" = root:644"
check "the image's environment (its config's Env)" \
    test "$(srun --container-image="$APP" sh -c 'echo $APP')" = v1
check "a second job reuses the cached image (no pull)" test "$(pulls "$APP")" = 1
check "PYXIS_CONTAINER_IMAGE takes a reference" \
    test "$(PYXIS_CONTAINER_IMAGE="docker://$APP" srun cat /etc/app-version)" = "v1 amd64"

JB=$(sbatch --parsable --container-image="$APP" -o "$D/batch.out" --wrap 'cat /etc/app-version')
check "#SBATCH --container-image=REF: the batch script runs in the registry image" \
    wait_for 60 grep -qx "v1 amd64" "$D/batch.out" || cat "$D/batch.out"
# the tag moves: resolved at each start, so the next step pulls the new image
D1=sha256:$(skopeo inspect --raw --tls-verify=false "docker://127.0.0.1:$PB/test/app:1" | sha256sum | cut -d' ' -f1)
reg_push "$D/v2" "127.0.0.1:$PB/test/app:1" "${PLAIN[@]}"
check "a moved tag is pulled again at the next start" \
    test "$(srun --container-image="$APP" cat /etc/app-version)" = "v2 amd64"
check "two pulls of the moved tag, two images cached" \
    bash -c "test $(pulls "$APP") = 2 && test \$(ls '$CACHE'/images/*.sqsh | wc -l) = 2"
check "@sha256: pins the first image" \
    test "$(srun --container-image="127.0.0.1:$PB#test/app@$D1" cat /etc/app-version)" = "v1 amd64"

# --- bad input: one line each, naming the image -----------------------------
one_err() { # TEXT CMD... : fails with exactly one "error: mtc:" line holding TEXT
    local text=$1 out rc
    shift
    out=$("$@" 2>&1); rc=$?
    [ $rc -ne 0 ] && [ "$(grep -c 'error: mtc:' <<<"$out")" = 1 ] &&
        grep 'error: mtc:' <<<"$out" | grep -qF -- "$text" || { echo "# got: $out"; return 1; }
}
# the job's ENROOT_MAX_PROCESSORS reaches the pull (a bad one: one line)
check "ENROOT_MAX_PROCESSORS=x on a pull: one line naming it" \
    one_err "ENROOT_MAX_PROCESSORS=x: not a number of processors" \
    env ENROOT_MAX_PROCESSORS=x srun --container-image="127.0.0.1:$PB#test/multi:1" true
check "a multi-arch index: the linux/amd64 manifest (ENROOT_MAX_PROCESSORS=1)" \
    test "$(ENROOT_MAX_PROCESSORS=1 srun --container-image="127.0.0.1:$PB#test/multi:1" cat /etc/app-version)" = "multi amd64"
check "no linux/amd64 entry: one line" \
    one_err "127.0.0.1:$PB#test/armonly:1: the manifest list has no linux/amd64 entry" \
    srun --container-image="127.0.0.1:$PB#test/armonly:1" true
check "a tag that does not exist: one line" \
    one_err "test/app:9: no such tag or digest in the registry 127.0.0.1:$PB" \
    srun --container-image="127.0.0.1:$PB#test/app:9" true
check "a layer that breaks the import rules: one line naming the image and the member" \
    one_err "127.0.0.1:$PB#test/evil:1: layer 2: member \"../escaped\" leaves the image's root" \
    srun --container-image="127.0.0.1:$PB#test/evil:1" true
DEAD=$(free_port)
check "a refused connection: one line" \
    one_err "cannot reach the registry 127.0.0.1:$DEAD: connection refused" \
    srun --container-image="127.0.0.1:$DEAD#test/app:1" true
check "a space in the reference: refused by srun in one line" \
    one_err "a space or control character" srun --container-image="127.0.0.1:$PB#test/a pp:1" true
check "'..' in the reference: refused in one line" \
    one_err "'..' in the reference" srun --container-image="127.0.0.1:$PB#test/../app:1" true

# --- TLS + auth: enroot's credentials, as the user ---------------------------
mkdir -p "$D/cfg" && chmod 700 "$D/cfg"
echo 'pa55-w0rd' >"$D/cfg/secret" && chmod 600 "$D/cfg/secret"
printf 'machine 127.0.0.1 login alice password $(cat %s/cfg/secret)\n' "$D" >"$D/cfg/.credentials"
chmod 600 "$D/cfg/.credentials"
SEC="127.0.0.1:$PA#test/app:1"
export SSL_CERT_FILE=$D/ca.crt
# registry A is reached over verified TLS only: no ENROOT_ALLOW_HTTP there
tls() { env -u ENROOT_ALLOW_HTTP "$@"; }
check "TLS + htpasswd: enroot's .credentials (\$(cmd) evaluated) let the pull in" \
    test "$(tls ENROOT_CONFIG_PATH=$D/cfg srun --container-image="$SEC" cat /etc/app-version)" = "v1 amd64"
mkdir -p "$D/bad" && printf 'machine 127.0.0.1 login alice password WRONG-s3cret\n' >"$D/bad/.credentials"
chmod 600 "$D/bad/.credentials"
out=$(tls ENROOT_CONFIG_PATH=$D/bad srun --container-image="127.0.0.1:$PA#test/app:1" true 2>&1)
check "wrong credentials: one line naming the registry and that credentials were used" \
    bash -c "test \$(grep -c 'error: mtc:' <<<'$out') = 1 &&
             grep -q 'the registry 127.0.0.1:$PA refused access (401/403; credentials were used' <<<'$out'"
check "… and never the secret" bash -c "! grep -q 'WRONG-s3cret' <<<'$out'"
check "no credentials: one line saying none were found" \
    one_err "refused access (401/403; no credentials were found" \
    tls ENROOT_CONFIG_PATH=$D/none srun --container-image="127.0.0.1:$PA#test/other:1" true
chmod 622 "$D/bad/.credentials"
check "a credentials file another user can write: refused, naming it" \
    one_err "credentials file $D/bad/.credentials can be written by another user: refused" \
    tls ENROOT_CONFIG_PATH=$D/bad srun --container-image="127.0.0.1:$PA#test/other:1" true

# --- a proxy: a corrupted blob, and the registry killed mid-pull -------------
PP=$(free_port)
python3 - "$PP" "$PB" "$D" <<'PY' >"$D/proxy.log" 2>&1 &
# Forwards to registry B; flips a byte of test/corrupt's blobs; holds
# test/slow's first blob until $D/proxy.release exists (after
# $D/proxy.blob-requested), then forwards it (to a registry that may be dead).
import http.server, os, sys, time, urllib.request, urllib.error
port, up, d = int(sys.argv[1]), sys.argv[2], sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def fwd(self, head):
        if "/test/slow/blobs/" in self.path and not head:
            open(d + "/proxy.blob-requested", "w").close()
            end = time.time() + 600
            while not os.path.exists(d + "/proxy.release") and time.time() < end:
                time.sleep(0.05)
        req = urllib.request.Request("http://127.0.0.1:%s%s" % (up, self.path), method="HEAD" if head else "GET",
                                     headers={"Accept": ", ".join(self.headers.get_all("Accept") or ["*/*"])})
        try:
            r = urllib.request.urlopen(req)
            code, hdrs, body = r.status, r.headers, b"" if head else r.read()
        except urllib.error.HTTPError as e:
            code, hdrs, body = e.code, e.headers, e.read()
        except OSError:
            self.send_response(502); self.send_header("Content-Length", "0"); self.end_headers(); return
        if "/test/corrupt/blobs/" in self.path and len(body) > 100:
            body = body[:50] + bytes([body[50] ^ 1]) + body[51:]
        self.send_response(code)
        for k, v in hdrs.items():
            if k.lower() in ("content-type", "docker-content-digest", "docker-distribution-api-version", "www-authenticate", "content-length") and not (k.lower() == "content-length" and not head):
                self.send_header(k, v)
        if not head:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
    def do_GET(self): self.fwd(False)
    def do_HEAD(self): self.fwd(True)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PY
track_pid $!
check "the test proxy answers" wait_for 10 curl -s -o /dev/null "http://127.0.0.1:$PP/v2/"
reg_push "$D/corrupt" "127.0.0.1:$PB/test/corrupt:1" "${PLAIN[@]}" && reg_push "$D/slow" "127.0.0.1:$PB/test/slow:1" "${PLAIN[@]}"
check "a corrupted blob: refused in one line naming the image" \
    one_err "127.0.0.1:$PP#test/corrupt:1: a blob's digest does not match" \
    srun --container-image="127.0.0.1:$PP#test/corrupt:1" true
check "… and nothing of it in the cache" \
    bash -c "test $(pulls "127.0.0.1:$PP#test/corrupt:1") = 0 && test -z \"\$(ls -A '$CACHE/tmp')\""

SLOW="127.0.0.1:$PP#test/slow:1"
NIMG=$(ls "$CACHE"/images/*.sqsh | wc -l)
srun --container-image="$SLOW" cat /etc/app-version >"$D/slow.out" 2>&1 &
SLOW_PID=$!
track_pid $SLOW_PID
check "a pull reaches its first blob" wait_for 60 test -e "$D/proxy.blob-requested"
kill "$regb_PID" && wait "$regb_PID" 2>/dev/null
touch "$D/proxy.release"
wait $SLOW_PID
check "the registry killed mid-pull: the step fails in one clear line" \
    bash -c "test \$(grep -c 'error: mtc:' '$D/slow.out') -ge 1 && grep -q 'error: mtc: image $SLOW: ' '$D/slow.out'" ||
    cat "$D/slow.out"
check "… leaving no partial entry in the cache" \
    bash -c "test $(pulls "$SLOW") = 0 && test -z \"\$(ls -A '$CACHE/tmp')\" &&
             test \$(ls '$CACHE'/images/*.sqsh | wc -l) = $NIMG"
rm -f "$D/proxy.blob-requested"
check "the registry back: the retry completes" reg_start regb 127.0.0.1 "$PB" http
check "… and the step runs the image" \
    test "$(srun --container-image="$SLOW" cat /etc/app-version)" = "slow amd64"

# --- the cloud guide's conversion job: enroot import in a batch script ------
mkdir -p "$D/uhome"
cat >"$D/convert.sh" <<EOF
#!/bin/bash
DIR=\$(mktemp -d)
echo "machine 127.0.0.1 login alice password \$(cat $D/cfg/secret)" >"\$DIR/.credentials"
chmod 600 "\$DIR/.credentials"
ENROOT_CONFIG_PATH=\$DIR ENROOT_MAX_PROCESSORS=\$(( \$(nproc) / 2 )) enroot import -o \${HOME}/my_app.sqsh docker://alice@$SEC
rc=\$?
rm -rf "\$DIR"
exit \$rc
EOF
chmod 755 "$D/convert.sh"
J=$(tls HOME=$D/uhome sbatch --parsable -o "$D/convert.out" "$D/convert.sh")
check "the conversion job ends COMPLETED" \
    wait_for 120 bash -c "scontrol show job $J 2>/dev/null | grep -q 'JobState=COMPLETED'" ||
    cat "$D/convert.out"
check "enroot import wrote the image" test -s "$D/uhome/my_app.sqsh"
check "srun --container-image= of the result" \
    test "$(srun --container-image="$D/uhome/my_app.sqsh" cat /etc/app-version)" = "v1 amd64"
check "enroot version; enroot list; another subcommand is one line" \
    bash -c "enroot version | grep -qE '^[0-9]+\.[0-9]+' && enroot list &&
             test \"\$(enroot start x 2>&1 | wc -l)\" = 1 && ! enroot start x 2>/dev/null"
mkdir -p "$D/en"
enroot_default() {
    (cd "$D/en" && enroot import "docker://$APP" >/dev/null 2>&1) && test -s "$D/en/test+app+1.sqsh" &&
        out=$(cd "$D/en" && enroot import "docker://$APP" 2>&1 >/dev/null)
    [ $? = 1 ] && [ "$out" = "[ERROR] File already exists: test+app+1.sqsh" ]
}
check "enroot import: enroot's default name, and an existing output is enroot's error, exit 1" \
    enroot_default
check "mtc image import docker://… -o X.sqsh" \
    bash -c "mtc image import docker://$APP -o '$D/cli.sqsh' >/dev/null && test -s '$D/cli.sqsh'"

# ENROOT_MAX_PROCESSORS: the import's mksquashfs gets -processors N (the
# real mksquashfs, its arguments recorded on the way by a script first in PATH)
mkdir -p "$D/wrap"
printf '#!/bin/sh\necho "$*" >>%s/mksq.args\nexec %s "$@"\n' "$D" "$(command -v mksquashfs)" >"$D/wrap/mksquashfs"
chmod 755 "$D/wrap/mksquashfs"
WP="$D/wrap:$PATH"
check "ENROOT_MAX_PROCESSORS=1 mtc image import docker://…: mksquashfs -processors 1" \
    bash -c "PATH='$WP' ENROOT_MAX_PROCESSORS=1 mtc image import docker://$APP -o '$D/p1.sqsh' >/dev/null &&
             test -s '$D/p1.sqsh' && grep -- -noappend '$D/mksq.args' | grep -q -- '-processors 1\( \|\$\)'"
rm -f "$D/mksq.args"
check "ENROOT_MAX_PROCESSORS=2 enroot import: -processors 2" \
    bash -c "cd '$D/en' && PATH='$WP' ENROOT_MAX_PROCESSORS=2 enroot import -o p2.sqsh docker://$APP >/dev/null 2>&1 &&
             test -s p2.sqsh && grep -- -noappend '$D/mksq.args' | grep -q -- '-processors 2\( \|\$\)'"
rm -f "$D/mksq.args"
check "0 or unset: no -processors (every core)" \
    bash -c "PATH='$WP' ENROOT_MAX_PROCESSORS=0 mtc image import docker://$APP -o '$D/p0.sqsh' >/dev/null &&
             PATH='$WP' mtc image import docker://$APP -o '$D/pu.sqsh' >/dev/null &&
             test \$(grep -c -- -noappend '$D/mksq.args') = 2 && ! grep -q -- -processors '$D/mksq.args'"
out=$(ENROOT_MAX_PROCESSORS=two mtc image import docker://$APP -o "$D/pbad.sqsh" 2>&1)
rc=$?
check "ENROOT_MAX_PROCESSORS=two: refused in one line naming it, no image ($out)" \
    bash -c "[ $rc != 0 ] && [ \$(wc -l <<<'$out') = 1 ] && grep -q 'ENROOT_MAX_PROCESSORS=two: not a number of processors' <<<'$out' && ! test -e '$D/pbad.sqsh'"
out=$(ENROOT_MAX_PROCESSORS=-3 mtc image import "$D/en" -o "$D/pbad.sqsh" 2>&1)
check "and for mtc image import of a directory (-3) ($out)" \
    bash -c "[ \$(wc -l <<<'$out') = 1 ] && grep -q 'ENROOT_MAX_PROCESSORS=-3: not a number' <<<'$out' && ! test -e '$D/pbad.sqsh'"

# --- security, as nobody -----------------------------------------------------
mkdir -p "$D/u" && chown nobody "$D/u"
out=$(cd "$D/u" && tls setpriv --reuid=65534 --regid=65534 --clear-groups env ENROOT_CONFIG_PATH="$D/cfg" srun --container-image="$SEC" true 2>&1)
check "nobody naming root's credentials: they are not read (one line), the secret not shown" \
    bash -c "grep -q 'error: mtc: credentials file $D/cfg/.credentials: Permission denied' <<<'$out' &&
             ! grep -q pa55 <<<'$out'" || echo "# got: $out"
asnobody mkdir -p "$D/u/cfg"
asnobody ln -s "$D/cfg/.credentials" "$D/u/cfg/.credentials"
check "a symlinked .credentials: refused" \
    one_err "credentials file $D/u/cfg/.credentials is a symlink: refused" \
    bash -c "cd '$D/u' && env -u ENROOT_ALLOW_HTTP setpriv --reuid=65534 --regid=65534 --clear-groups env ENROOT_CONFIG_PATH='$D/u/cfg' srun --container-image='$SEC' true"
check "nobody runs the cached image (the cache is readable)" \
    test "$(cd "$D/u" && asnobody srun --container-image="$APP" cat /etc/app-version)" = "v2 amd64"
check "nobody cannot write the cache or have root pull for another user" \
    bash -c "! asnobody touch '$CACHE/images/x' 2>/dev/null &&
             ! asnobody mtc image pull '$APP' --cache '$D/u/c' --as 0:0 2>/dev/null"
# a cache entry replaced by a symlink: refused, never followed
mkdir -p "$D/c2"
mtc image pull "$APP" --cache "$D/c2" >/dev/null 2>&1
E=$(ls "$D/c2/images/"*.sqsh)
mv "$E" "$D/moved.sqsh" && ln -s "$D/moved.sqsh" "$E"
out=$(mtc image pull "$APP" --cache "$D/c2" 2>&1)
check "a symlinked cache entry: refused" \
    grep -q "image cache entry $E is not a regular file of the cache's owner: refused" <<<"$out" ||
    echo "# got: $out"

# --- the size limit: LRU eviction of images not in use -----------------------
check "mtc image cache prune --keep-gb 0 evicts what no step holds" \
    bash -c "mtc image cache prune --dir '$CACHE' --keep-gb 0 | grep -q 'removed [1-9]' &&
             test -z \"\$(ls '$CACHE/images/' | grep sqsh)\""
mkdir -p "$D/c3"
mtc image pull "$APP" --cache "$D/c3" >/dev/null 2>&1
E3=$(ls "$D/c3/images/"*.sqsh)
flock -s "$E3" -c "touch '$D/held'; while [ ! -e '$D/unhold' ]; do sleep 0.1; done" &
track_pid $!
wait_for 10 test -e "$D/held"
check "a cache full of images in use: one line naming the image" \
    bash -c "out=\$(mtc image pull '127.0.0.1:$PB#test/multi:1' --cache '$D/c3' --max-gb 0.000001 2>&1);
             test \$? -ne 0 && test \$(wc -l <<<\"\$out\") = 1 &&
             grep -q 'image 127.0.0.1:$PB#test/multi:1: the image cache $D/c3 is full' <<<\"\$out\""
touch "$D/unhold"
out=$(mtc image pull "127.0.0.1:$PB#test/multi:1" --cache "$D/c4" --max-gb 0.000001 2>&1)
too_big() {
    [ "$out" = "mtc: image 127.0.0.1:$PB#test/multi:1: larger than the image cache's limit (1073 bytes)" ] &&
        [ -z "$(find "$D/c4/images" "$D/c4/tmp" -mindepth 1)" ]
}
check "an image larger than the cache's limit: one line, nothing stored" too_big || echo "# got: $out"
done_testing
