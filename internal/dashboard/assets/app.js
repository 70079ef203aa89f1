// modelship dashboard: plain JavaScript, no framework, no network access but this server.
"use strict";

const rows = new Map(); // "namespace/name" -> Row
let detailKey = null;   // "namespace/name" of the page shown, or null for the fleet
let detailTimer = null;

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "style") e.style.cssText = v; // CSSOM, allowed by the page's CSP (no inline styles)
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function ago(t) {
  if (!t) return "";
  const s = Math.max(0, Math.round((Date.now() - new Date(t).getTime()) / 1000));
  if (s < 90) return s + "s ago";
  if (s < 5400) return Math.round(s / 60) + "m ago";
  return Math.round(s / 3600) + "h ago";
}

function weightBar(w) {
  return el("div", { class: "weightbar", "aria-hidden": "true" },
    el("span", { class: "s", style: "width:" + w.stable + "%" }),
    el("span", { class: "c", style: "width:" + w.candidate + "%" }));
}

function replicasText(r) {
  const parts = [];
  for (const c of [r.stable, r.candidate]) {
    if (c) parts.push(c.color + " " + c.ready + "/" + c.replicas);
  }
  return parts.join(", ") || (r.readyReplicas + "/" + r.replicas);
}

// ---- fleet ----

function renderFleet() {
  const body = $("#fleet tbody");
  const keys = [...rows.keys()].sort();
  body.replaceChildren(...keys.map((k) => fleetRow(rows.get(k))));
  $("#fleet-empty").hidden = keys.length > 0;
}

function fleetRow(r) {
  const key = r.namespace + "/" + r.name;
  const w = r.weights || { stable: 0, candidate: 0 };
  return el("tr", { "data-key": key },
    el("td", { "data-field": "namespace" }, r.namespace),
    el("td", { "data-field": "name" }, el("a", { href: "#/" + key }, r.name)),
    el("td", { "data-field": "phase", class: "phase phase-" + r.phase }, r.phase + (r.paused && r.phase !== "Paused" ? " (paused)" : "")),
    el("td", { "data-field": "health", class: "health-" + r.health, title: r.healthMessage }, r.health),
    el("td", { "data-field": "stable" }, r.stable ? r.stable.revision : "–"),
    el("td", { "data-field": "candidate" }, r.candidate ? r.candidate.revision : "–"),
    el("td", { "data-field": "step" }, r.step || "–"),
    el("td", { "data-field": "weights" }, w.stable + "/" + w.candidate, weightBar(w)),
    el("td", { "data-field": "replicas" }, replicasText(r) + (r.desiredReplicas ? " (desired " + r.desiredReplicas + ")" : "")),
    el("td", { "data-field": "gpu" }, r.gpuUtilization ? r.gpuUtilization + "%" : "–"));
}

// ---- live updates ----

function connect() {
  const es = new EventSource("api/stream");
  es.addEventListener("open", () => { $("#live").textContent = "live"; });
  es.addEventListener("error", () => { $("#live").textContent = "reconnecting…"; });
  es.addEventListener("fleet", (e) => {
    rows.clear();
    for (const r of JSON.parse(e.data)) rows.set(r.namespace + "/" + r.name, r);
    renderFleet();
    if (detailKey) scheduleDetail();
  });
  es.addEventListener("change", (e) => {
    const msg = JSON.parse(e.data);
    let touched = false;
    for (const r of msg.rows) {
      const k = r.namespace + "/" + r.name;
      rows.set(k, r);
      if (k === detailKey) touched = true;
    }
    for (const k of msg.deleted) {
      rows.delete(k);
      if (k === detailKey) touched = true;
    }
    renderFleet();
    if (touched) scheduleDetail();
  });
}

// ---- one ModelServer ----

function scheduleDetail() {
  clearTimeout(detailTimer);
  detailTimer = setTimeout(loadDetail, 150);
}

async function loadDetail() {
  const key = detailKey;
  if (!key) return;
  const res = await fetch("api/modelservers/" + key, { headers: { Accept: "application/json" } });
  const body = await res.json();
  if (key !== detailKey) return;
  if (!res.ok) {
    $("#detail-title").textContent = key;
    $("#detail-summary").textContent = body.error || res.statusText;
    renderIfChanged($("#actions"), null, () => []);
    return;
  }
  renderDetail(body);
}

const actionLabels = {
  "pause": ["Pause", "Freeze the rollout where it is (sets spec.paused=true)."],
  "resume": ["Resume", "Let the paused rollout go on (clears spec.paused)."],
  "promote": ["Promote", "Advance the rollout to its next step now."],
  "promote-full": ["Promote fully", "Skip the remaining steps: the candidate takes all traffic and becomes stable."],
  "abort": ["Abort", "Send all traffic back to the stable revision, keeping the candidate for inspection."],
  "rollback": ["Roll back", "Go back to the stable revision."],
};

// renderIfChanged replaces host's children with build() unless what they show (sig, any JSON
// value) is what they already show: the nodes stay, and with them a pending click.
function renderIfChanged(host, sig, build) {
  const s = JSON.stringify(sig);
  if (host.dataset.sig === s) return;
  host.dataset.sig = s;
  host.replaceChildren(...build());
}

function renderDetail(d) {
  const key = d.namespace + "/" + d.name;
  document.title = d.name + " · modelship";
  $("#crumbs").replaceChildren(el("li", {}, el("a", { href: "#/" }, "Fleet")), el("li", { "aria-current": "page" }, key));
  $("#detail-title").textContent = d.name;
  $("#detail-summary").replaceChildren(
    el("span", { class: "phase phase-" + d.phase, "data-field": "phase" }, d.phase),
    " · ", el("span", { class: "health-" + d.health, "data-field": "health" }, d.health), " ",
    el("span", { class: "hint" }, d.healthMessage), d.step ? " · " + d.step : "",
    " · weights ", el("span", { "data-field": "weights" }, d.weights.stable + "/" + d.weights.candidate));

  // The buttons are rebuilt only when what they offer changes: a push that re-renders the page
  // must not swap a button out from under the pointer and lose the user's click.
  // They carry the candidate revision the page shows, so they are rebuilt when it changes too.
  const offered = d.actions.filter((a) => a !== "rollback");
  if (d.actions.includes("rollback") && d.inProgress) offered.push("rollback");
  renderIfChanged($("#actions"), [key, offered, shownCandidate(d)], () => offered.map((a) => a === "rollback"
    ? el("button", { type: "button", "data-action": "rollback", onclick: () => confirmAction(d, "rollback", "") }, "Roll back to stable")
    : el("button", { type: "button", "data-action": a, class: a === "abort" ? "danger" : "",
      onclick: () => confirmAction(d, a, "") }, actionLabels[a][0])));

  $("#steps").replaceChildren(...d.steps.map((s) => el("li", { class: s.state, "data-state": s.state,
    "aria-current": s.state === "current" ? "step" : null },
    "Step " + s.index, el("br"), s.weight + "%", el("span", { class: "visually-hidden" }, " (" + s.state + ")"))));

  const colorRows = [];
  if (d.stable) colorRows.push(["stable", d.stable, d.weights.stable]);
  if (d.candidate) colorRows.push(["candidate", d.candidate, d.weights.candidate]);
  $("#colors tbody").replaceChildren(...colorRows.map(([role, c, w]) => el("tr", { "data-role": role },
    el("td", {}, role), el("td", {}, c.color), el("td", {}, c.revision), el("td", {}, c.image || ""),
    el("td", {}, c.ready + "/" + c.replicas + (c.warm ? " (warm)" : "")), el("td", {}, w + "%"))));

  const ms = d.measurements.length ? d.measurements : d.analysis;
  $("#measurements tbody").replaceChildren(...ms.slice().reverse().map((m) => el("tr", { "data-metric": m.metric },
    el("td", {}, m.step), el("td", {}, m.revision), el("td", {}, m.metric), el("td", {}, m.candidate || "–"),
    el("td", {}, m.stable || "–"), el("td", {}, m.bound || "–"),
    el("td", { class: "verdict-" + m.verdict, title: m.message || "" }, m.verdict), el("td", {}, m.samples || "–"),
    el("td", { title: m.at }, ago(m.at)))));
  $("#measurements-empty").hidden = ms.length > 0;

  chart($("#chart-replicas"), [
    { cls: "blue", points: d.samples.map((s) => [s.at, s.blueReady]) },
    { cls: "green", points: d.samples.map((s) => [s.at, s.greenReady]) },
  ], "replicas");
  if (d.gpuSeries) {
    chart($("#chart-gpu"), [
      { cls: "blue", points: (d.gpuSeries.blue || []).map((p) => [p.at, p.value]) },
      { cls: "green", points: (d.gpuSeries.green || []).map((p) => [p.at, p.value]) },
    ], "%");
    $("#gpu-caption").replaceChildren("From Prometheus, last hour:", el("span", { class: "swatch blue" }), "blue",
      el("span", { class: "swatch green" }), "green");
  } else {
    chart($("#chart-gpu"), [{ cls: "blue", points: d.samples.filter((s) => s.gpuUtilization != null).map((s) => [s.at, s.gpuUtilization]) }], "%");
    $("#gpu-caption").textContent = d.prometheusError ||
      "The autoscaler's reading since this dashboard started (give --prometheus-url for the last hour per color).";
  }

  const a = d.autoscaling;
  $("#autoscaling-summary").textContent = a ? "Desired " + a.desiredReplicas + " replicas" +
    (a.lastScaleReason ? " · last change: " + a.lastScaleReason : "") : "No autoscaling status.";
  $("#proposals tbody").replaceChildren(...(a && a.proposals ? a.proposals : []).map((p) => el("tr", {},
    el("td", {}, p.metric), el("td", {}, p.value || "no data"), el("td", {}, p.target || ""),
    el("td", {}, p.replicas != null ? p.replicas : "–"), el("td", {}, p.message || ""))));

  const canRollBack = d.actions.includes("rollback");
  renderIfChanged($("#history tbody"), [key, canRollBack, d.history, shownCandidate(d)], () => d.history.map((h) => el("tr", { "data-revision": h.revision },
    el("td", {}, h.revision + (h.current ? " (spec)" : "")), el("td", {}, h.image || ""), el("td", {}, h.outcome),
    el("td", {}, h.reason || ""), el("td", { title: h.at }, ago(h.at)),
    el("td", {}, canRollBack && !h.current ? el("button", { type: "button", "data-action": "rollback",
      "aria-label": "Roll back to revision " + h.revision, onclick: () => confirmAction(d, "rollback", h.revision) }, "Roll back here") : ""))));

  $("#conditions tbody").replaceChildren(...(d.conditions || []).map((c) => el("tr", {},
    el("td", {}, c.type), el("td", {}, c.status), el("td", {}, c.reason), el("td", {}, c.message))));
  $("#events tbody").replaceChildren(...d.events.map((e) => el("tr", {},
    el("td", { title: e.last }, ago(e.last)), el("td", {}, e.type), el("td", {}, e.reason), el("td", {}, e.count), el("td", {}, e.message))));
  $("#events-empty").hidden = d.events.length > 0;
}

// chart draws lines of [time, value] points as an inline SVG.
function chart(host, series, unit) {
  const W = 600, H = 180, L = 36, B = 18, T = 8, R = 8;
  const all = series.flatMap((s) => s.points);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.setAttribute("preserveAspectRatio", "none");
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
  };
  add("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" });
  add("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" });
  if (all.length === 0) {
    add("text", { x: W / 2 - 40, y: H / 2 }, "no data yet");
    host.replaceChildren(svg);
    return;
  }
  const ts = all.map((p) => new Date(p[0]).getTime());
  const t0 = Math.min(...ts), t1 = Math.max(...ts, t0 + 1000);
  const vmax = Math.max(1, ...all.map((p) => p[1])) * 1.1;
  const x = (t) => L + (new Date(t).getTime() - t0) / (t1 - t0) * (W - L - R);
  const y = (v) => H - B - v / vmax * (H - B - T);
  add("text", { x: 2, y: T + 8 }, Math.round(vmax) + (unit === "%" ? "%" : ""));
  add("text", { x: 2, y: H - B }, "0");
  add("text", { x: L, y: H - 4 }, new Date(t0).toLocaleTimeString());
  add("text", { x: W - R - 50, y: H - 4 }, new Date(t1).toLocaleTimeString());
  for (const s of series) {
    if (s.points.length === 0) continue;
    // A step line: a count holds until it changes.
    let d = "";
    s.points.forEach((p, i) => {
      d += (i === 0 ? "M" : "H" + x(p[0]).toFixed(1) + "V") + (i === 0 ? x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1) : y(p[1]).toFixed(1));
    });
    d += "H" + (W - R);
    add("path", { d, class: s.cls });
  }
  host.replaceChildren(svg);
}

// ---- actions ----

// shownCandidate is the candidate revision of the rollout in progress the page shows ("" when
// none). Every action but pause sends it: the server refuses (409) one whose rollout changed.
function shownCandidate(d) {
  return d.inProgress && d.candidate ? d.candidate.revision : "";
}

function confirmAction(d, action, revision) {
  const dialog = $("#confirm");
  const [label, what] = actionLabels[action];
  const cand = shownCandidate(d);
  $("#confirm-title").textContent = label + " " + d.name + (cand && action !== "pause" ? " (candidate " + cand + ")" : "") + "?";
  $("#confirm-text").textContent = revision ? "Restore spec.template to revision " + revision + "; modelship rolls it out." : what;
  $("#confirm-ok").textContent = label;
  dialog.returnValue = "";
  dialog.onclose = () => {
    if (dialog.returnValue === "ok") act(d, action, revision);
  };
  dialog.showModal();
  $("#confirm-cancel").focus();
}

async function act(d, action, revision) {
  $("#action-result").textContent = "";
  $("#action-error").textContent = "";
  const key = d.namespace + "/" + d.name;
  let res, body;
  try {
    res = await fetch("api/modelservers/" + key + "/actions/" + action, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(revision ? { revision, candidate: shownCandidate(d) } : { candidate: shownCandidate(d) }),
    });
    body = await res.json();
  } catch (e) {
    $("#action-error").textContent = action + " failed: " + e;
    return;
  }
  if (!res.ok) {
    $("#action-error").textContent = action + " refused: " + body.error;
    return;
  }
  $("#action-result").textContent = body.message;
  scheduleDetail();
}

// ---- routing ----

function route() {
  const m = location.hash.match(/^#\/([^/]+)\/([^/]+)$/);
  detailKey = m ? decodeURIComponent(m[1]) + "/" + decodeURIComponent(m[2]) : null;
  $("#fleet-view").hidden = !!detailKey;
  $("#detail-view").hidden = !detailKey;
  $("#action-result").textContent = "";
  $("#action-error").textContent = "";
  if (detailKey) {
    // Until the new object's detail arrives, show none of the previous one's: its buttons would
    // act on the object the page just left.
    $("#detail-title").textContent = detailKey;
    $("#detail-summary").textContent = "loading…";
    renderIfChanged($("#actions"), null, () => []);
    renderIfChanged($("#history tbody"), null, () => []);
    loadDetail();
  } else {
    document.title = "modelship dashboard";
    $("#crumbs").replaceChildren(el("li", { "aria-current": "page" }, el("a", { href: "#/" }, "Fleet")));
  }
  $("#main").focus();
}

window.addEventListener("hashchange", route);
connect();
route();
