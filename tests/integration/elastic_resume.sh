#!/usr/bin/env bash
# elastic_resume: the plain resume of powered-down nodes right after a
# create, again and again (issue 48): 20 create -> `srun -N3` -> delete
# cycles of examples/local-3node.json with an elastic pool (min 1, max 3;
# elastic_resume.inc); each srun runs on the 3 nodes, its job started
# within 10 s of the resumed nodes' slurmds starting. Slurm 22.05 takes a
# resumed node only when the boot time it reports is at or after the resume
# request: the resumed slurmd is `slurmd -b` (its own start is the boot);
# before, a time namespace booted "now" counted slurmd's start-up too, and
# most such runs hung until ResumeTimeout. elastic_repower.sh resumes the
# nodes of one cluster again and again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/elastic_resume.inc"

CYCLES=${CYCLES:-20}
start_mtcd || { nok "mtcd started"; done_testing; }
t_extra_cleanup() { delete_all_clusters; }

# --- create -> srun -N3 -> delete, CYCLES times ---
T0=$SECONDS worked=0 lates=
for i in $(seq "$CYCLES"); do
    C=er$i
    if ! mtc cluster create -f "$T_DIR/spec.json" --id "$C" >"$T_DIR/create.out" 2>&1; then
        nok "cycle $i: cluster created"
        sed 's/^/# /' "$T_DIR/create.out"
        mtc cluster delete "$C" >/dev/null 2>&1
        continue
    fi
    eval "$(mtc env "$C")"
    resume_run "$C"
    lates+=" $LATE"
    if [ "$RAN" = 3 ] && fast; then worked=$((worked + 1)); fi
    check "cycle $i: srun -N3 right after the create ran on the 3 nodes, ${LATE} s after the resumed slurmds started (job start; <= $START_S)" \
        eval '[ "$RAN" = 3 ] && fast'
    [ -n "$WHY" ] && diag "$WHY"
    check "cycle $i: cluster deleted" eval 'mtc cluster delete "$C" >/dev/null'
done
diag "create cycles: $worked of $CYCLES worked in $((SECONDS - T0)) s; s from the slurmds' start to the job's start:$lates"

done_testing
