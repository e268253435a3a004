// app: the console's views over mtcd's public API (same routes, roles and
// one-line google.rpc errors as the CLI). Hash routes: #/clusters,
// #/clusters/ID, #/experiments, #/runs/CLUSTER/JOB, #/models, #/endpoints.
// The DOM is built with textContent only (no innerHTML of API data).
"use strict";
const P = "/v1beta1/projects/local/locations/local";
const CL = P + "/modelDevelopmentClusters";
let role = "viewer", timers = [];

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of kids.flat()) if (c !== null && c !== undefined)
    e.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  return e;
}
function table(cols, rows, rowAttrs) {
  return el("table", {}, el("tr", {}, cols.map((c) => el("th", {}, c[0]))),
    rows.map((r) => el("tr", rowAttrs ? rowAttrs(r) : {}, cols.map((c) => el("td", {}, c[1](r))))));
}
function stateSpan(s) { return el("span", { class: "state-" + (s || "") }, s || "-"); }
const canEdit = () => role === "editor" || role === "admin";

// Every API call: the session cookie rides along; a state-changing one
// carries the CSRF header. Throws an Error with the API's one-line message.
async function api(method, path, body) {
  const opts = { method, credentials: "same-origin", headers: {} };
  if (method !== "GET") opts.headers["X-MTC-CSRF"] = "1";
  if (body !== undefined) { opts.headers["Content-Type"] = "application/json"; opts.body = JSON.stringify(body); }
  const r = await fetch(path, opts);
  if (r.status === 401) { location.replace("/"); throw new Error("session expired"); }
  const j = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error((j.error && j.error.message) || ("HTTP " + r.status));
  return j;
}
async function waitOp(op) {
  for (let i = 0; i < 600 && op && op.name && !op.done; i++) {
    await new Promise((res) => setTimeout(res, 1000));
    op = await api("GET", "/v1beta1/" + op.name);
  }
  if (op && op.error) throw new Error(op.error.message);
  return op;
}
function show(...nodes) { document.getElementById("view").replaceChildren(...nodes.filter((x) => x)); }
function every(ms, fn) { fn(); timers.push(setInterval(fn, ms)); }

// --- clusters ---------------------------------------------------------------
async function clustersView() {
  const list = el("div", { id: "cluster-list" });
  const refresh = async () => {
    const j = await api("GET", CL);
    const items = j.modelDevelopmentClusters || [];
    list.replaceChildren(items.length ? table([
      ["Cluster", (c) => el("a", { href: "#/clusters/" + c.name.split("/").pop() }, c.name.split("/").pop())],
      ["State", (c) => stateSpan(c.clusterStatus && c.clusterStatus.state)],
      ["Nodes", (c) => String(((c.clusterStatus || {}).nodesStatus || []).length)],
      ["Created", (c) => c.createTime || ""],
    ], items) : el("p", { class: "muted" }, "No clusters yet."));
  };
  show(el("h1", {}, "Clusters"), list, canEdit() ? await createForm(refresh) : null);
  every(3000, () => refresh().catch(() => {}));
}

// Which form field an API error names (its message starts with the field path).
function fieldOf(msg) {
  if (/minNodeCount|maxNodeCount|scalingSpec|node count/i.test(msg)) return "nodes";
  if (/machineType|machineSpec/.test(msg)) return "machine";
  if (/partitions|defaultPartitionId/.test(msg)) return "partition";
  if (/loginNodePoolId/.test(msg)) return "login";
  if (/modelDevelopmentClusterId|cluster id|\bid\b/i.test(msg)) return "id";
  return "general";
}

async function createForm(refresh) {
  const archs = await (await fetch("/console/architectures.json")).json();
  const errs = {};
  const field = (key, label, input) => {
    errs[key] = el("span", { class: "field-error", id: "err-" + key });
    return el("label", {}, label, " ", input, errs[key]);
  };
  errs.general = el("p", { class: "error", id: "err-general" });
  const id = el("input", { id: "new-id", placeholder: "my-cluster" });
  const arch = el("select", { id: "new-arch" },
    el("option", { value: "" }, "step by step (below)"),
    archs.map((a) => el("option", { value: a.id }, a.title)));
  const pool = el("input", { id: "new-pool", value: "cpu" });
  const machine = el("input", { id: "new-machine", value: "local" });
  const nodes = el("input", { id: "new-nodes", type: "number", value: "2" });
  const part = el("input", { id: "new-partition", value: "cpu" });
  const login = el("input", { id: "new-login", value: "login" });
  const spec = () => {
    const a = archs.find((x) => x.id === arch.value);
    if (a) return JSON.parse(JSON.stringify(a.spec));
    const n = Number(nodes.value);
    return {
      nodePools: [
        { id: pool.value, machineSpec: { machineType: machine.value }, scalingSpec: { minNodeCount: n, maxNodeCount: n } },
        { id: login.value, machineSpec: { machineType: machine.value }, scalingSpec: { minNodeCount: 1, maxNodeCount: 1 } }],
      orchestratorSpec: { slurmSpec: { loginNodePoolId: login.value,
        partitions: [{ id: part.value, nodePoolIds: [pool.value] }], defaultPartitionId: part.value } },
    };
  };
  const submit = async (ev) => {
    ev.preventDefault();
    for (const e of Object.values(errs)) e.textContent = "";
    const btn = document.getElementById("create-btn");
    btn.disabled = true;
    try {
      const op = await api("POST", CL + "?modelDevelopmentClusterId=" + encodeURIComponent(id.value), spec());
      refresh();
      await waitOp(op);
    } catch (e) {
      (errs[fieldOf(e.message)] || errs.general).textContent = e.message;
    } finally { btn.disabled = false; refresh(); }
  };
  return el("form", { class: "card", id: "create-form", onsubmit: submit },
    el("h2", {}, "Create a cluster"),
    field("id", "Cluster id", id),
    el("label", {}, "Reference architecture ", arch),
    el("fieldset", {}, el("legend", {}, "Step by step"),
      field("pool", "Compute pool id", pool), field("machine", "Machine type", machine),
      field("nodes", "Node count", nodes), field("partition", "Partition id", part),
      field("login", "Login pool id", login)),
    el("button", { id: "create-btn", type: "submit" }, "Create"), errs.general);
}

async function clusterView(id) {
  const head = el("div", {}), nodes = el("div", {}), events = el("div", {}), jobs = el("div", {});
  const queue = el("div", { id: "slurm-jobs" });
  const err = el("p", { class: "error", id: "cluster-error" });
  let cl = null;
  const refresh = async () => {
    cl = await api("GET", CL + "/" + id);
    const st = cl.clusterStatus || {};
    head.replaceChildren(el("p", {}, "State: ", el("span", { id: "cluster-state", class: "state-" + st.state }, st.state || "-")));
    nodes.replaceChildren(table([
      ["Node", (n) => n.instanceName || ""], ["Pool", (n) => n.nodePoolId || ""],
      ["Slurm state", (n) => stateSpan(n.slurmState || n.state)], ["Node state", (n) => n.nodeState || ""],
      ["Health", (n) => stateSpan(n.health)], ["Last failing check", (n) => (n.failingCheck ? n.failingCheck + ": " + (n.failingReason || "") : "")],
      ["Remediation", (n) => n.remediation || ""],
      ["Last health scan", (n) => { const h = n.lastHealthScan; return h ? el("span", { title: h.time + " (" + h.checks + ")" }, stateSpan(h.state), h.reason ? " " + h.reason : "") : ""; }],
    ], st.nodesStatus || []));
    events.replaceChildren(table([["Time", (e) => e.eventTime], ["Node", (e) => e.nodeName || ""],
      ["Event", (e) => e.description || ""]], (cl.clusterEvents || []).slice(-30).reverse()));
    const j = await api("GET", CL + "/" + id + "/trainingJobs");
    jobs.replaceChildren(jobTable(id, (j.trainingJobs || []).filter((x) => x.state === "RUNNING" || x.state === "PENDING")));
    // every job in the cluster's Slurm, mtc's or not, and why the waiting ones wait
    const q = await api("GET", CL + "/" + id + "/slurmJobs").catch((e) => ({ error: e.message }));
    queue.replaceChildren(q.error ? el("p", { class: "muted" }, q.error) : slurmTable(q.slurmJobs || []));
  };
  const scale = async () => {
    const pools = JSON.parse(JSON.stringify(cl.nodePools || []));
    for (const p of pools) {
      const input = document.getElementById("scale-" + p.id);
      if (input && input.value !== "") p.scalingSpec = { minNodeCount: Number(input.value), maxNodeCount: Number(input.value) };
    }
    err.textContent = "";
    try { await waitOp(await api("PATCH", CL + "/" + id + "?updateMask=nodePools", { nodePools: pools })); }
    catch (e) { err.textContent = e.message; }
    refresh();
  };
  const del = async () => {
    if (!confirm("Delete cluster " + id + " and its nodes?")) return;
    try { await api("DELETE", CL + "/" + id); location.hash = "#/clusters"; }
    catch (e) { err.textContent = e.message; }
  };
  await refresh();
  const edit = canEdit() ? el("section", { class: "card" }, el("h2", {}, "Node counts"),
    (cl.nodePools || []).map((p) => el("label", {}, p.id + " ",
      el("input", { id: "scale-" + p.id, type: "number", value: (p.scalingSpec || {}).minNodeCount }))),
    el("button", { id: "scale-btn", type: "button", onclick: scale }, "Update node counts"),
    el("button", { id: "delete-btn", type: "button", onclick: del }, "Delete cluster")) : null;
  show(el("h1", {}, "Cluster " + id), head, err, el("h2", {}, "Nodes"), nodes, edit,
    el("h2", {}, "Running jobs"), jobs, el("h2", {}, "Slurm queue"), queue, el("h2", {}, "Events"), events);
  timers.push(setInterval(() => refresh().catch((e) => { err.textContent = e.message; }), 3000));
}

// The cluster's Slurm queue (GET …/slurmJobs): one row a job, id slurm-job-ID.
function slurmTable(items) {
  return items.length ? table([
    ["Job", (q) => q.jobId], ["Name", (q) => q.name], ["User", (q) => q.user],
    ["Account", (q) => q.account || "-"], ["QoS", (q) => q.qos || "-"], ["State", (q) => stateSpan(q.state)],
    ["Nodes", (q) => String(q.nodeCount) + (q.nodes ? " (" + q.nodes + ")" : "")],
    ["Time", (q) => q.time], ["Pending reason", (q) => (q.state === "PENDING" ? q.reason || "" : "")],
  ], items, (q) => ({ id: "slurm-job-" + q.jobId, class: "slurm-job" })) : el("p", { class: "muted" }, "No jobs in Slurm's queue.");
}

// --- experiments -------------------------------------------------------------
function jobTable(cluster, jobs) {
  return jobs.length ? table([
    ["Run", (j) => el("a", { href: "#/runs/" + cluster + "/" + j.id, class: "run-link" }, j.runId || j.id)],
    ["Recipe", (j) => (typeof j.recipe === "string" ? j.recipe : "")],
    ["Cluster", () => cluster], ["State", (j) => stateSpan(j.state)],
    ["Restarts", (j) => String(j.restartCount || 0)], ["Created", (j) => j.createTime || ""],
  ], jobs) : el("p", { class: "muted" }, "None.");
}
async function experimentsView() {
  const body = el("div", { id: "experiments" });
  show(el("h1", {}, "Experiments"), body);
  every(5000, async () => {
    const cls = (await api("GET", CL)).modelDevelopmentClusters || [];
    const parts = [];
    for (const c of cls) {
      const id = c.name.split("/").pop();
      const j = await api("GET", CL + "/" + id + "/trainingJobs").catch(() => ({}));
      if ((j.trainingJobs || []).length) parts.push(el("h2", {}, id), jobTable(id, j.trainingJobs));
    }
    body.replaceChildren(...(parts.length ? parts : [el("p", { class: "muted" }, "No training jobs yet.")]));
  });
}

const SERIES = [["loss", "loss"], ["val_loss", "val loss"], ["tokens_per_s", "tokens/s"], ["mfu", "MFU"]];
async function runView(cluster, job) {
  const path = CL + "/" + cluster + "/trainingJobs/" + job;
  const status = el("div", { id: "run-status" }), log = el("pre", { class: "log", id: "run-log" });
  const ckpts = el("div", {}), charts = {};
  const grid = el("div", { class: "charts" });
  for (const [key, label] of SERIES) {
    const canvas = el("canvas", { id: "chart-" + key, "data-points": "0" });
    grid.appendChild(el("div", {}, canvas));
    charts[key] = new Chart(canvas, {
      type: "line",
      data: { labels: [], datasets: [{ label, data: [], borderColor: "#1d3557", pointRadius: 0, tension: 0.1 }] },
      options: { animation: false, parsing: false, scales: { x: { type: "linear", title: { display: true, text: "step" } } } },
    });
  }
  show(el("h1", {}, "Run " + job), status, grid, el("h2", {}, "Checkpoints"), ckpts, el("h2", {}, "Log"), log);
  let after = -1;
  every(2000, async () => {
    const [j, m] = await Promise.all([api("GET", path), api("GET", path + ":metrics?afterStep=" + after)]);
    // goodput and early-problem alerts: the trainingJob's "progress" (docs/observability.md)
    const pr = j.progress || {};
    const goodput = typeof pr.goodput === "number" ? el("span", {}, " · goodput ",
      el("span", { id: "run-goodput" }, (100 * pr.goodput).toFixed(1) + "%"),
      " · steps lost ", String(pr.stepsLost || 0), " · repeated ", String(pr.stepsRepeated || 0)) : null;
    const alert = pr.alertMessage ? el("p", { class: "error", id: "run-alert" }, pr.alertMessage) : null;
    // where the time went since submission: the parts sum to the total (docs/any-framework.md)
    const b = pr.breakdown;
    const parts = ["queue", "startup", "productive", "checkpoint", "lost", "restart", "hang"];
    const time = b ? el("p", { class: "muted", id: "run-time" }, "Time " + b.totalSeconds.toFixed(1) + " s: " +
      parts.map((k) => k + " " + b[k + "Seconds"].toFixed(1)).join(" · ")) : null;
    status.replaceChildren(el("p", {}, "State: ", el("span", { id: "run-state", class: "state-" + j.state }, j.state),
      " · restarts ", el("span", { id: "run-restarts" }, String(j.restartCount || 0)),
      " · Slurm job ", j.slurmJobId || "-", " · ", j.experimentName || "", goodput),
      ...(time ? [time] : []), ...(alert ? [alert] : []));
    for (const p of m.points || []) {
      after = Math.max(after, p.step);
      for (const [key] of SERIES) if (typeof p[key] === "number") charts[key].data.datasets[0].data.push({ x: p.step, y: p[key] });
    }
    for (const [key] of SERIES) {
      charts[key].update();
      charts[key].canvas.setAttribute("data-points", String(charts[key].data.datasets[0].data.length));
    }
    log.textContent = m.logTail || "";
    log.scrollTop = log.scrollHeight;
    ckpts.replaceChildren((m.checkpoints || []).length ? el("ul", {}, m.checkpoints.map((c) => el("li", {}, c))) : el("p", { class: "muted" }, "None yet."));
  });
}

// --- models and endpoints ----------------------------------------------------
async function modelsView() {
  const j = await api("GET", P + "/models");
  const items = j.models || [];
  const rows = [];
  for (const m of items) {
    const v = await api("GET", "/v1beta1/" + m.name + ":listVersions").catch(() => ({}));
    rows.push(el("h2", {}, m.displayName || m.name.split("/").pop()),
      table([["Version", (x) => x.versionId], ["Aliases", (x) => (x.versionAliases || []).join(", ")],
        ["Created", (x) => x.versionCreateTime || ""],
        ["Lineage", (x) => Object.entries(x.lineage || {}).map(([k, val]) => k + "=" + (typeof val === "object" ? JSON.stringify(val) : val)).join(" · ")]],
      v.models || []));
  }
  show(el("h1", {}, "Models"), ...(rows.length ? rows : [el("p", { class: "muted" }, "No models registered.")]));
}
async function endpointsView() {
  const j = await api("GET", P + "/endpoints");
  const items = j.endpoints || [];
  const parts = items.map((e) => {
    const out = el("pre", { class: "log" }), prompt = el("input", { size: 60, placeholder: "a prompt" });
    const ask = async (ev) => {
      ev.preventDefault();
      try {
        const r = await api("POST", "/v1beta1/" + e.name + "/v1/completions", { prompt: prompt.value, max_tokens: 32 });
        out.textContent = ((r.choices || [])[0] || {}).text || JSON.stringify(r);
      } catch (x) { out.textContent = x.message; }
    };
    return el("section", { class: "card" }, el("h2", {}, e.displayName || e.name.split("/").pop()),
      table([["Model", (d) => d.model || ""], ["Replicas", (d) => JSON.stringify(d.replicas || d.replicaCount || "")],
        ["State", (d) => stateSpan(d.state)]], e.deployedModels || []),
      el("form", { onsubmit: ask }, prompt, el("button", { type: "submit" }, "Send")), out);
  });
  show(el("h1", {}, "Endpoints"), ...(parts.length ? parts : [el("p", { class: "muted" }, "No endpoints.")]));
}

// --- router ------------------------------------------------------------------
async function route() {
  timers.forEach(clearInterval);
  timers = [];
  const h = (location.hash || "#/clusters").slice(2).split("/").map(decodeURIComponent);
  try {
    if (h[0] === "clusters" && h[1]) await clusterView(h[1]);
    else if (h[0] === "experiments") await experimentsView();
    else if (h[0] === "runs" && h[2]) await runView(h[1], h[2]);
    else if (h[0] === "models") await modelsView();
    else if (h[0] === "endpoints") await endpointsView();
    else await clustersView();
  } catch (e) { show(el("p", { class: "error" }, e.message)); }
}
document.getElementById("logout").addEventListener("click", async () => {
  await fetch("/console/logout", { method: "POST", credentials: "same-origin", headers: { "X-MTC-CSRF": "1" } });
  location.replace("/");
});
window.addEventListener("hashchange", route);
fetch("/console/session", { credentials: "same-origin" }).then((r) => r.json()).then((s) => {
  role = s.role || "viewer";
  document.getElementById("who").textContent = role;
  route();
});
