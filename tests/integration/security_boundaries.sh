#!/usr/bin/env bash
# security_boundaries: what an editor cannot make root do, and what a job
# cannot see (issue 47, findings 4, 5, 6 and 10). mtcd runs as root with a
# canary secret in its environment. An editor's spec naming the accounting
# database, a pool's hosts or spare hosts, ssh, the controller or
# installPackages is 403 naming each such field, and nothing is stored (no
# ssh is tried: the check comes before anything connects); an admin's spec
# with the database passes that check. A log rule with a nested quantifier
# (the issue's ReDoS rule) or a back-reference is refused at submit in one
# line. A job of a token bound to a Unix user runs with that user's login
# environment (HOME, USER, LOGNAME, SHELL from passwd, PATH from login.defs)
# and nothing of mtcd's; an admin's job (root) gets root's login environment,
# without the canary either.
. "$(dirname "$0")/lib.sh"
D=$T_DIR

if [ "$(id -u)" != 0 ]; then
    check "security_boundaries needs root (it creates a Unix user and runs mtcd as root)" false
    done_testing
fi
U1=mtcb$$a
USERS=()
drop_users() {
    for u in "${USERS[@]}"; do userdel "$u" 2>/dev/null; groupdel "$u" 2>/dev/null; done
}
t_extra_cleanup() { delete_all_clusters; drop_users; }
useradd -M -N -g nogroup -d "/home/$U1" -s /bin/sh "$U1" && USERS+=("$U1")
check "a Unix user made (home /home/$U1, shell /bin/sh)" test ${#USERS[@]} = 1
UG1=$(id -u "$U1"):$(id -g "$U1")
chmod 0755 "$D"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
CANARY=mtcd-secret-$$-$RANDOM
export MTC_CANARY_SECRET=$CANARY
check "mtcd starts as root with a canary in its environment" start_mtcd --listen 127.0.0.1:$PORT
unset MTC_CANARY_SECRET
check "  mtcd's environment holds the canary (so the job's check below can fail)" \
    grep -qz "^MTC_CANARY_SECRET=$CANARY\$" "/proc/$MTCD_PID/environ"
ED=$(mtc token create --name sb-ed --role editor | head -1)
AD=$(mtc token create --name sb-ad --role admin | head -1)
T1=$(mtc token create --name sb-u1 --role editor --user "$U1" | head -1)
check "an editor, an admin and a token bound to $U1" bash -c "[ -n '$ED' ] && [ -n '$AD' ] && [ -n '$T1' ]"

# --- root-only fields (findings 4 and 10) ------------------------------------------
printf 'user=slurm\npassword=pw-%s\n' $$ >"$D/cred"
chmod 0644 "$D/cred" # others may read it: an admin's create fails on it, after the API
python3 - "$ROOT/examples/local-2node.json" "$D" "$U1" "$UG1" <<'PY'
import json, sys
base, d, u, ug = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4]
db = json.loads(json.dumps(base))
db["orchestratorSpec"]["slurmSpec"]["accounting"] = {"enabled": True, "database": {
    "host": "127.0.0.1", "port": 3306, "credentialsFile": d + "/cred"}}
json.dump(db, open(d + "/db.json", "w"))
pool = {"id": "gpu", "machineSpec": {"machineType": "host"}, "scalingSpec": {"minNodeCount": 1},
        "hosts": ["127.0.0.2"]}
json.dump({"nodePools": [pool]}, open(d + "/hosts1.json", "w"))
pool = dict(pool, spareHosts=["127.0.0.3"])
json.dump({"nodePools": [pool], "ssh": {"keyFile": "/root/.ssh/id_ed25519", "port": 2222},
           "controller": {"address": "127.0.0.1"}, "installPackages": True},
          open(d + "/hosts.json", "w"))
jobs = json.loads(json.dumps(base))
uid, gid = ug.split(":")
jobs["users"] = [{"name": u, "uid": int(uid), "gid": int(gid)}]
json.dump(jobs, open(d + "/spec.json", "w"))
PY
tcp "$ED" POST "$CLUSTERS?modelDevelopmentClusterId=ed1" "$(cat "$D/db.json")"
check "editor: the accounting database block is 403 naming it, one line" \
    one_line_error 403 "orchestratorSpec.slurmSpec.accounting.database: only an admin may set or change this field" PERMISSION_DENIED
diag "$BODY"
tcp "$ED" POST "$CLUSTERS?modelDevelopmentClusterId=ed2" "$(cat "$D/hosts1.json")"
check "editor: a pool on hosts is 403 naming nodePools[0].hosts" \
    one_line_error 403 "nodePools[0].hosts: only an admin may set or change this field" PERMISSION_DENIED
tcp "$ED" POST "$CLUSTERS?modelDevelopmentClusterId=ed2" "$(cat "$D/hosts.json")"
check "editor: hosts, spareHosts, ssh, controller, installPackages: 403 naming each" \
    one_line_error 403 "nodePools[0].hosts, nodePools[0].spareHosts, ssh, controller, installPackages: only an admin may set or change these fields" PERMISSION_DENIED
diag "$BODY"
check "  nothing was stored (cluster ed1 not found)" gone "cluster ed1 not found" -- mtc cluster get ed1
check "  nor ed2" gone "cluster ed2 not found" -- mtc cluster get ed2
check "  and no ssh was tried (mtcd's log names neither host)" \
    bash -c "! grep -qE '127\.0\.0\.[23]' '$MTC_HOME/log/mtcd.log'"
tcp "$AD" POST "$CLUSTERS?modelDevelopmentClusterId=ad1" "$(cat "$D/db.json")"
check "admin: the same database block passes the API (200, an operation)" test "$HTTP_STATUS" = 200
OP=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("name", ""))' "$BODY" 2>/dev/null)
out=$(mtc operations wait "$OP" 2>&1)
check "  its create then refuses the credentials file others may read (the provider's check)" \
    grep -q "credentialsFile .*must be a root-owned file that no one else may read" <<<"$out"
diag "$out"
mtc cluster delete ad1 >/dev/null 2>&1

# --- a cluster whose spec lists the user ----------------------------------------------
out=$(mtc cluster create -f "$D/spec.json" --id sb 2>&1)
check "local cluster up, its spec listing $U1 (admin)" bash -c "mtc cluster list | grep -qE '^sb +RUNNING'"
[ $T_LAST -eq 0 ] || { diag "$out"; done_testing; }
eval "$(mtc env sb)"
JOBS=$CLUSTERS/sb/trainingJobs
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read())$1)"; }
custom() { # custom EXPERIMENT COMMAND_JSON [MONITOR_JSON]
    python3 -c 'import json, sys
r = {"task": "custom", "launch": {"command": json.loads(sys.argv[2])}}
if sys.argv[3]: r["monitor"] = json.loads(sys.argv[3])
print(json.dumps({"recipe": r, "nodeCount": 1, "experimentName": sys.argv[1]}))' "$1" "$2" "${3:-}"
}

# --- log rules in linear time (finding 5) ------------------------------------------------
REDOS='(?<step>[0-9]+)|((a*)(a*))*\2\3\4b'
tcp "$T1" POST "$JOBS?trainingJobId=redos" \
    "$(custom redos '["true"]' "$(python3 -c 'import json,sys; print(json.dumps({"log_rules": [{"pattern": sys.argv[1]}]}))' "$REDOS")")"
check "the issue's ReDoS rule: refused at submit, one line naming the nested quantifier" \
    one_line_error 400 "monitor.log_rules[0].pattern: a nested quantifier at character 27"
diag "$BODY"
tcp "$T1" POST "$JOBS?trainingJobId=backref" \
    "$(custom backref '["true"]' '{"log_rules": [{"pattern": "(?<step>[0-9]+) (x)\\2"}]}')"
check "a back-reference: refused at submit, one line naming it" \
    one_line_error 400 "monitor.log_rules[0].pattern: a back-reference"
check_absent "the refused jobs submitted nothing" . -- squeue -h

# --- jobs get their user's environment, nothing of mtcd's (finding 6) ----------------
want_path() { # login.defs' ENV_SUPATH (root) or ENV_PATH, as login(1) sets PATH
    local p
    p=$(sed -n "s/^$1[[:space:]]\+\(PATH=\)\?\([^[:space:]]*\).*/\2/p" /etc/login.defs 2>/dev/null | head -1)
    echo "${p:-$2}"
}
UPATH=$(want_path ENV_PATH /usr/local/bin:/usr/bin:/bin)
RPATH=$(want_path ENV_SUPATH /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
ENVCMD='["sh", "-c", "env | sed s/^/env:/"]'
tcp "$T1" POST "$JOBS?trainingJobId=envu" "$(custom envu "$ENVCMD")"
check "$U1's job printing its environment: 200" test "$HTTP_STATUS" = 200
UTD=$(field '["taskDir"]' <<<"$BODY") USJ=$(field '["slurmJobId"]' <<<"$BODY")
api POST "$JOBS?trainingJobId=envr" "$(custom envr "$ENVCMD")"
check "an admin's job (root) printing its environment: 200" test "$HTTP_STATUS" = 200
RTD=$(field '["taskDir"]' <<<"$BODY") RSJ=$(field '["slurmJobId"]' <<<"$BODY")
printed() { grep -q '^env:SLURM_JOB_ID=' "$1" 2>/dev/null && grep -q '^env:PATH=' "$1"; }
check "  both printed it" wait_for 120 bash -c "$(declare -f printed); printed '$UTD/$USJ.log' && printed '$RTD/$RSJ.log'"
has() { grep -qx "env:$2" "$1"; }
UL=$UTD/$USJ.log RL=$RTD/$RSJ.log
diag "$U1's job: $(grep -c '^env:' "$UL") variables: $(sed -n 's/^env:\([A-Za-z_0-9]*\)=.*/\1/p' "$UL" | grep -v '^SLURM' | tr '\n' ' ')"
check "$U1's job: no trace of mtcd's canary" bash -c "! grep -q '$CANARY' '$UL' && ! grep -q '^env:MTC_CANARY_SECRET=' '$UL'"
check "  HOME, USER, LOGNAME, SHELL its own (passwd)" bash -c "$(declare -f has); has '$UL' HOME=/home/$U1 && has '$UL' USER=$U1 && has '$UL' LOGNAME=$U1 && has '$UL' SHELL=/bin/sh"
check "  PATH login's ($UPATH), not mtcd's" bash -c "$(declare -f has); has '$UL' 'PATH=$UPATH'"
check "  SLURM_CONF is the cluster's" bash -c "$(declare -f has); has '$UL' 'SLURM_CONF=$SLURM_CONF'"
check "root's job: no trace of the canary either" bash -c "! grep -q '$CANARY' '$RL'"
check "  HOME=/root, USER=root, PATH root's login PATH ($RPATH)" bash -c "$(declare -f has); has '$RL' HOME=/root && has '$RL' USER=root && has '$RL' 'PATH=$RPATH'"
done_testing
