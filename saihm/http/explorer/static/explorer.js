// The saihm log explorer: reads the public log API and checks what a browser can check.
import { hex, leafHash, ProofError, sha256, unhex, verifyConsistency, verifyInclusion } from "./merkle.js";
import { b64decode, checkSignatures, hasEd25519, parseCheckpoint, parseNote, parseVkey } from "./note.js";
import { age, code, el, facts, readReceipt, status, svg, when } from "./views.js";

// The operations the public log lists, in the registry's order: the server writes them into the
// page as the options of the "List receipts by operation" menu (saihm/http/explorer/__init__.py).
const OPERATIONS = Array.from(document.getElementById("list-operation").options, (o) => o.value);
const PAGE = 20;
const CHART_PAGES = 5; // at most 5,000 receipts per operation feed the chart
const NOT_CHECKED =
  "Not checked here: the receipt's ML-DSA-65 signature (browsers have no ML-DSA). " +
  "Run `saihm verify URL` to check every signature.";

const state = { mode: null, base: null, first: null, latest: null, vkeys: [], pinned: [] };
const $ = (id) => document.getElementById(id);

class FetchError extends Error {}

async function get(path, accept) {
  const response = await fetch(state.base + path, {
    headers: accept ? { Accept: accept } : {},
    cache: "no-store",
    credentials: "omit",
  });
  if (!response.ok) {
    let code = `HTTP ${response.status}`;
    try {
      code = (await response.json()).error || code;
    } catch {}
    throw new FetchError(code);
  }
  return response;
}

const getJson = async (path) => (await get(path, "application/json")).json();

// -- the checkpoint ------------------------------------------------------------------------

async function loadKeys() {
  const found = [];
  // A live operator answers /log/v1/keys; `saihm publish` writes the same JSON to v1/keys.
  let body = null;
  try {
    body = await getJson(state.mode === "api" ? "log/v1/keys" : "v1/keys");
  } catch {}
  if (body !== null) {
    const walk = (value) => {
      if (Array.isArray(value)) value.forEach(walk);
      else if (value && typeof value === "object") {
        if (typeof value.vkey === "string") found.push(value.vkey);
        else Object.values(value).forEach(walk);
      }
    };
    walk(body);
  }
  const keys = [];
  for (const vkey of [...found, ...state.pinned]) {
    try {
      keys.push({ ...(await parseVkey(vkey)), source: state.pinned.includes(vkey) ? "pinned" : "server" });
    } catch {}
  }
  state.vkeys = keys;
}

async function fetchCheckpoint() {
  const text = await (await get(state.mode === "api" ? "log/checkpoint" : "checkpoint")).text();
  const parsed = parseNote(text);
  const body = parseCheckpoint(parsed.text);
  const lines = await checkSignatures(parsed, state.vkeys);
  const ed = lines.find((l) => l.name === body.origin && l.kind === "Ed25519");
  return { note: text, parsed, body, lines, operatorVerified: ed ? ed.status === "verified" : false };
}

function signatureTable(cp) {
  const rows = cp.lines.map((line) =>
    el("tr", { "data-status": line.status },
      el("td", { text: line.name }),
      el("td", {}, code(line.keyId)),
      el("td", { text: line.kind }),
      el("td", { text: line.timestamp !== undefined && line.timestamp !== null ? `${when(line.timestamp)} (${age(line.timestamp)})` : "—" }),
      el("td", { class: `sig ${line.status}`, text: `${line.status.replace("-", " ")}: ${line.detail}` })));
  return el("table", { class: "sigs" },
    el("caption", { text: "Signature lines (every line of the note, in order)" }),
    el("thead", {}, el("tr", {}, ...["Key name", "Key ID", "Kind", "Signed at", "Result"].map((t) => el("th", { scope: "col", text: t })))),
    el("tbody", {}, ...rows));
}

function renderCheckpoint(cp) {
  // The age is the time in the operator's ML-DSA-44 line (the Ed25519 line carries none).
  const timed = cp.lines.find((l) => l.name === cp.body.origin && l.kind.includes("ML-DSA-44") && l.timestamp);
  const ageText = timed
    ? `${age(timed.timestamp)} (signed ${when(timed.timestamp)}, the time in the operator's ML-DSA-44 line, which this browser cannot verify)`
    : "unknown (no operator signature line carries a time)";
  const operator = cp.operatorVerified
    ? "The operator's Ed25519 signature verified in this browser."
    : "The operator's Ed25519 signature was NOT verified here (see the table).";
  $("checkpoint-body").replaceChildren(
    facts([
      ["Origin", cp.body.origin],
      ["Tree size", cp.body.size.toString()],
      ["Root hash", code(hex(cp.body.root))],
      ["Age", ageText],
      ["Fetched", new Date().toISOString()],
    ]),
    el("p", { id: "operator-signature", "data-result": cp.operatorVerified ? "pass" : "fail", class: `status ${cp.operatorVerified ? "pass" : "fail"}`, text: operator }),
    signatureTable(cp),
    el("p", { class: "note", text: state.pinned.length
      ? "Keys marked pinned came from you; the others from this server."
      : "The verifier keys came from this same server (GET /log/v1/keys). Compare their key IDs with ones you got elsewhere, or paste a key below." }),
    el("details", {}, el("summary", { text: "The signed note" }), el("pre", { text: cp.note })));
}

async function checkConsistency() {
  const out = $("consistency-result");
  status(out, "running", "Fetching the latest checkpoint…");
  let latest;
  try {
    latest = await fetchCheckpoint();
  } catch (err) {
    status(out, "fail", `Could not read the latest checkpoint: ${err.message}`);
    return;
  }
  state.latest = latest;
  renderCheckpoint(latest);
  const a = state.first.body;
  const b = latest.body;
  const prefix = `From the checkpoint this page first saw (size ${a.size}) to the latest (size ${b.size}): `;
  if (a.origin !== b.origin) {
    status(out, "fail", `${prefix}FAILED: the origin changed from ${a.origin} to ${b.origin}.`);
    return;
  }
  if (b.size < a.size) {
    status(out, "fail", `${prefix}FAILED: ROLLBACK. The log now claims a smaller tree than it showed before; a log only grows.`);
    return;
  }
  if (b.size === a.size) {
    if (hex(a.root) === hex(b.root)) status(out, "pass", `${prefix}consistent: same size, same root.`);
    else status(out, "fail", `${prefix}FAILED: FORK. Two different roots for the same tree size.`);
    return;
  }
  if (state.mode !== "api") {
    status(out, "not-checked", `${prefix}the tree grew; a consistency proof needs the JSON API, which this copy does not have.`);
    return;
  }
  try {
    const body = await getJson(`log/v1/proof/consistency?first=${a.size}&second=${b.size}`);
    await verifyConsistency(a.size, b.size, body.proof.map(unhex), a.root, b.root);
    status(out, "pass", `${prefix}VERIFIED in this browser: the latest tree extends the first (RFC 9162 §2.1.4.2, ${body.proof.length} hashes).`);
  } catch (err) {
    const why = err instanceof ProofError ? err.message : `the proof could not be fetched (${err.message})`;
    status(out, "fail", `${prefix}FAILED: ${why}. The log may have been rewritten.`);
  }
}

// -- receipts --------------------------------------------------------------------------------

async function checkInclusion(entry, out) {
  status(out, "running", "Checking…");
  try {
    let cp = state.latest;
    if (BigInt(entry.index) >= cp.body.size) {
      cp = await fetchCheckpoint();
      state.latest = cp;
    }
    const leaf = b64decode(entry.cbor);
    const { fields, signedBytes } = readReceipt(leaf);
    const id = hex(await sha256(signedBytes));
    const r = entry.receipt;
    const same =
      hex(fields.get(1)) === id && id === r.receiptId && hex(fields.get(2)) === r.subjectId &&
      fields.get(3) === r.operation && hex(fields.get(4)) === r.holderId &&
      String(fields.get(6)) === r.timestamp;
    if (!same) throw new ProofError("the JSON shown does not match the logged CBOR and its receiptId");
    const size = cp.body.size;
    const body = await getJson(`log/v1/proof/inclusion?index=${entry.index}&size=${size}`);
    if (String(body.index) !== String(entry.index) || String(body.size) !== size.toString()) {
      throw new ProofError("the server answered a proof for another index or size");
    }
    await verifyInclusion(await leafHash(leaf), entry.index, size, body.proof.map(unhex), cp.body.root);
    const sig = cp.operatorVerified ? "whose Ed25519 signature verified" : "whose signature was NOT verified here";
    status(out, "pass", [
      el("strong", { text: "VERIFIED in this browser. " }),
      `Receipt ${entry.index} is in the log: its leaf hash and the ${body.proof.length}-hash inclusion proof (RFC 9162 §2.1.3.2) lead to the root of the checkpoint of size ${size} ${sig}; its receiptId is the SHA-256 of its signed bytes and the JSON shown matches the logged CBOR. `,
      el("br"), NOT_CHECKED]);
  } catch (err) {
    const why = err instanceof FetchError ? `the proof could not be fetched (${err.message})` : err.message;
    status(out, "fail", [el("strong", { text: "FAILED. " }), `Receipt ${entry.index} was not shown to be in the log: ${why}.`]);
  }
}

function receiptCard(entry) {
  const r = entry.receipt;
  const out = el("p", { class: "status", role: "status", "aria-live": "polite", id: `inclusion-${entry.index}` });
  return el("article", { class: "receipt", "data-index": entry.index, "data-receipt-id": r.receiptId },
    el("h4", { text: `#${entry.index} ${r.operation} at ${when(r.timestamp)}` }),
    facts([["Receipt ID", code(r.receiptId)], ["Subject ID", code(r.subjectId)], ["Holder ID", code(r.holderId)]]),
    el("button", { type: "button", class: "check", onclick: () => checkInclusion(entry, out), text: `Check inclusion of #${entry.index}` }),
    out,
    el("details", {}, el("summary", { text: "JSON form" }),
      el("pre", { text: JSON.stringify({ index: entry.index, receipt: r }, null, 2) })));
}

// A list of receipts for one query, with a button that appends the next page.
function pagedList(title, query) {
  const list = el("div", { class: "receipts" });
  const more = el("button", { type: "button", text: "Next page" });
  const note = el("p", { class: "note", role: "status" });
  const box = el("section", { class: "results" }, el("h3", { text: title }), list, note, more);
  let cursor = 0;
  async function load() {
    more.disabled = true;
    try {
      const page = await getJson(`log/v1/receipts?${query}&limit=${PAGE}&cursor=${cursor}`);
      page.receipts.forEach((entry) => list.append(receiptCard(entry)));
      cursor = page.next;
      note.textContent = list.children.length ? `${list.children.length} shown${page.next === null ? ", no more" : ""}.` : "None.";
      more.hidden = page.next === null;
    } catch (err) {
      note.textContent = `Could not list: ${err.message}.`;
    }
    more.disabled = false;
  }
  more.addEventListener("click", load);
  load();
  return box;
}

async function search(event) {
  event.preventDefault();
  const out = $("search-results");
  const value = $("search-id").value.trim().toLowerCase();
  const kind = $("search-kind").value;
  if (!/^[0-9a-f]{64}$/.test(value)) {
    status(out, "fail", "An id is 64 hexadecimal characters.");
    return;
  }
  out.className = "";
  out.dataset.result = "done";
  out.replaceChildren();
  if (kind === "any" || kind === "receiptId") {
    try {
      const entry = await getJson(`log/v1/receipts/${value}`);
      out.append(el("section", { class: "results" }, el("h3", { text: "Receipt with this receiptId" }), receiptCard(entry)));
    } catch (err) {
      if (kind === "receiptId") out.append(el("p", { text: `No receipt with this receiptId (${err.message}).` }));
    }
  }
  if (kind === "any" || kind === "subjectId") out.append(pagedList("Receipts about this subject (cellId, contractId, proposalId, grantId)", `subjectId=${value}`));
  if (kind === "any" || kind === "holderId") out.append(pagedList("Receipts signed by this holder", `holderId=${value}`));
}

function listOperation(event) {
  event.preventDefault();
  const op = $("list-operation").value;
  $("list-results").replaceChildren(pagedList(`${op} receipts, in log order`, `operation=${op}`));
}

async function allReceipts(query, pages) {
  const out = [];
  let cursor = 0;
  for (let i = 0; i < pages && cursor !== null; i++) {
    const page = await getJson(`log/v1/receipts?${query}&limit=1000&cursor=${cursor}`);
    out.push(...page.receipts);
    cursor = page.next;
  }
  return { receipts: out, complete: cursor === null };
}

// -- the chart --------------------------------------------------------------------------------

const COLOURS = ["#1f5fa8", "#c0392b", "#2e8540", "#7b3fa0", "#d35400", "#127f8c", "#b0307a",
  "#5d6d7e", "#6e4b1f", "#8a8a00", "#2c3e80", "#4f7a28", "#7d2a2a"];

async function drawChart() {
  const box = $("chart");
  const found = [];
  let complete = true;
  for (const op of OPERATIONS) {
    const got = await allReceipts(`operation=${op}`, CHART_PAGES);
    complete &&= got.complete;
    got.receipts.forEach((e) => found.push({ index: e.index, t: Number(e.receipt.timestamp), op }));
  }
  if (!found.length) {
    box.replaceChildren(el("p", { text: "The log is empty." }));
    return;
  }
  found.sort((a, b) => a.index - b.index);
  const t0 = found[0].t;
  const t1 = Math.max(found[found.length - 1].t, t0 + 1);
  const W = 640, H = 220, L = 50, B = 30, T = 10, R = 10;
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const maxSize = found[found.length - 1].index + 1;
  const y = (n) => H - B - (n / maxSize) * (H - B - T);
  const buckets = 12;
  const counts = Array.from({ length: buckets }, () => Object.fromEntries(OPERATIONS.map((o) => [o, 0])));
  for (const f of found) counts[Math.min(buckets - 1, Math.floor(((f.t - t0) / (t1 - t0)) * buckets))][f.op] += 1;
  const maxBucket = Math.max(...counts.map((c) => Object.values(c).reduce((a, b) => a + b, 0)));
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": "chart-title", class: "chart" },
    svg("title", { id: "chart-title", text: `Log size over time, from 0 to ${maxSize} receipts, with receipts per operation in ${buckets} time slices` }));
  const bw = (W - L - R) / buckets;
  counts.forEach((c, i) => {
    let base = 0;
    OPERATIONS.forEach((op, k) => {
      if (!c[op]) return;
      const h = (c[op] / maxBucket) * (H - B - T) * 0.5;
      chart.append(svg("rect", { x: L + i * bw + 2, y: H - B - base - h, width: bw - 4, height: h, fill: COLOURS[k % COLOURS.length] }));
      base += h;
    });
  });
  const points = found.map((f) => `${x(f.t).toFixed(1)},${y(f.index + 1).toFixed(1)}`).join(" ");
  chart.append(
    svg("polyline", { points, fill: "none", stroke: "#111", "stroke-width": 2 }),
    svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#555" }),
    svg("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#555" }),
    svg("text", { x: L - 6, y: T + 10, "text-anchor": "end", class: "axis", text: String(maxSize) }),
    svg("text", { x: L - 6, y: H - B, "text-anchor": "end", class: "axis", text: "0" }),
    svg("text", { x: L, y: H - 8, class: "axis", text: when(t0) }),
    svg("text", { x: W - R, y: H - 8, "text-anchor": "end", class: "axis", text: when(t1) }));
  const totals = OPERATIONS.map((op, k) => [op, k, found.filter((f) => f.op === op).length]).filter((r) => r[2]);
  const table = el("table", { class: "counts" },
    el("caption", { text: "Receipts per operation" + (complete ? "" : ` (first ${CHART_PAGES * 1000} of each)`) }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Operation" }), el("th", { scope: "col", text: "Receipts" }))),
    el("tbody", {}, ...totals.map(([op, k, n]) => el("tr", {},
      el("th", { scope: "row" }, svg("svg", { class: "swatch", viewBox: "0 0 10 10", "aria-hidden": "true" }, svg("rect", { width: 10, height: 10, fill: COLOURS[k % COLOURS.length] })), ` ${op}`),
      el("td", { text: String(n) })))));
  box.replaceChildren(el("div", { class: "chart-row" }, chart, table),
    el("p", { class: "note", text: "The line is the log's size at each receipt's time; the bars count receipts per operation in each time slice." }));
}

// -- erasures ---------------------------------------------------------------------------------

async function showErasure(cellId, out) {
  out.replaceChildren(el("p", { text: "Reading…" }));
  try {
    const { receipts } = await allReceipts(`subjectId=${cellId}`, 5);
    const column = (op, why) => {
      const entry = receipts.find((e) => e.receipt.operation === op);
      return el("div", { class: "column" }, el("h4", { text: `${op}: ${why}` }),
        entry ? receiptCard(entry) : el("p", { class: "status fail", text: `No ${op} receipt found for this cell.` }));
    };
    out.replaceChildren(el("div", { class: "side-by-side" },
      column("REMEMBER", "when the cell was written"), column("FORGET", "when its key was destroyed")));
  } catch (err) {
    out.replaceChildren(el("p", { text: `Could not read: ${err.message}.` }));
  }
}

async function loadErasures() {
  const box = $("erasures-body");
  const body = await getJson("log/v1/erasures");
  if (!body.cellIds.length) {
    box.replaceChildren(el("p", { text: `No erasures in the first ${body.treeSize} receipts.` }));
    return;
  }
  const items = body.cellIds.map((cellId) => {
    const out = el("div");
    return el("li", {}, code(cellId), " ",
      el("button", { type: "button", onclick: () => showErasure(cellId, out), text: "Show REMEMBER and FORGET" }), out);
  });
  box.replaceChildren(el("p", { text: `Erased cells as of tree size ${body.treeSize}: ${body.cellIds.length}.` }), el("ul", { class: "erasures" }, ...items));
}

// -- governance -------------------------------------------------------------------------------

function valueNode(value) {
  if (value && typeof value === "object" && !Array.isArray(value)) return facts(Object.entries(value).map(([k, v]) => [k, valueNode(v)]));
  if (Array.isArray(value)) return el("ul", {}, ...value.map((v) => el("li", {}, valueNode(v))));
  return document.createTextNode(typeof value === "boolean" ? (value ? "yes" : "no") : String(value));
}

async function loadGovernance() {
  const box = $("governance-body");
  const form = await (await get("governance", "application/json")).json();
  const windowSeconds = Number(form.votingWindowSeconds);
  const proposals = (await allReceipts("operation=PROPOSE", 10)).receipts;
  const votes = (await allReceipts("operation=VOTE", 50)).receipts;
  const now = Date.now() / 1000;
  const rows = proposals.map((p) => {
    const id = p.receipt.subjectId;
    const opens = Number(p.receipt.detail.snapshotEpoch);
    const closes = opens + windowSeconds;
    const seen = new Set();
    let yes = 0, no = 0, counted = 0, ignored = 0;
    for (const v of votes) {
      if (v.receipt.subjectId !== id) continue;
      // The published rule: the first VOTE receipt per holder and proposal in log order.
      if (seen.has(v.receipt.holderId) || v.index < p.index || Number(v.receipt.timestamp) > closes) {
        ignored += 1;
        continue;
      }
      seen.add(v.receipt.holderId);
      counted += 1;
      const weight = Number(v.receipt.detail.weight);
      if (v.receipt.detail.approve) yes += weight;
      else no += weight;
    }
    const open = now <= closes;
    const outcome = open ? "open" : yes > no ? "passed" : "not passed";
    return el("tr", { "data-proposal": id },
      el("td", {}, code(id.slice(0, 16) + "…")), el("td", { text: p.receipt.detail.scope }),
      el("td", { text: p.receipt.detail.paramKey ?? "—" }), el("td", { text: p.receipt.detail.proposedValue ?? "—" }),
      el("td", { text: when(closes) }), el("td", { class: "num", text: String(yes) }),
      el("td", { class: "num", text: String(no) }), el("td", { text: `${counted} counted${ignored ? `, ${ignored} not counted` : ""}` }),
      el("td", { text: outcome }));
  });
  box.replaceChildren(
    el("h3", { text: "The governance form" }), valueNode(form),
    el("h3", { text: "Proposals" }),
    rows.length
      ? el("table", { class: "proposals" },
          el("caption", { text: "Tallies recomputed in this browser from the VOTE receipts (first vote per holder, within the window)" }),
          el("thead", {}, el("tr", {}, ...["Proposal", "Scope", "Parameter", "Value", "Closes", "For", "Against", "Votes", "Outcome"].map((t) => el("th", { scope: "col", text: t })))),
          el("tbody", {}, ...rows))
      : el("p", { text: "No proposals in the log." }));
}

// -- start ------------------------------------------------------------------------------------

function needsApi(id) {
  $(id).replaceChildren(el("p", { class: "status not-checked", text: "This view needs the operator's JSON API (/log/v1/...); this copy has only the checkpoint and tiles." }));
}

async function pinKey(event) {
  event.preventDefault();
  const value = $("pin-key").value.trim();
  const out = $("pin-result");
  try {
    await parseVkey(value);
  } catch (err) {
    status(out, "fail", `Not a verifier key: ${err.message}.`);
    return;
  }
  if (!state.pinned.includes(value)) state.pinned.push(value);
  await loadKeys();
  state.latest = await fetchCheckpoint();
  renderCheckpoint(state.latest);
  status(out, "pass", `${state.pinned.length} key(s) pinned; the checkpoint was checked again with them.`);
}

async function start() {
  document.body.dataset.ready = "starting";
  const root = new URL("..", document.baseURI).href;
  state.base = root;
  try {
    await get("log/checkpoint");
    state.mode = "api";
  } catch {
    state.mode = "tiles";
  }
  $("mode").textContent = state.mode === "api"
    ? "Reading this operator's public log API."
    : "Reading a static copy of the log (checkpoint and tiles): search, receipts, erasures and governance need the JSON API.";
  $("ed25519").textContent = (await hasEd25519())
    ? "This browser verifies Ed25519 (WebCrypto)."
    : "This browser's WebCrypto has no Ed25519: checkpoint signatures are listed but not checked here.";
  try {
    await loadKeys();
    state.first = await fetchCheckpoint();
    state.latest = state.first;
    renderCheckpoint(state.first);
    $("first-seen").textContent = `size ${state.first.body.size}, root ${hex(state.first.body.root)}`;
  } catch (err) {
    $("checkpoint-body").replaceChildren(el("p", { class: "status fail", text: `The checkpoint could not be read or parsed: ${err.message}.` }));
    document.body.dataset.ready = "failed";
    return;
  }
  $("consistency-button").addEventListener("click", checkConsistency);
  $("pin-form").addEventListener("submit", pinKey);
  if (state.mode === "api") {
    $("search-form").addEventListener("submit", search);
    $("list-form").addEventListener("submit", listOperation);
    const quiet = (promise, id) => promise.catch((err) => $(id).replaceChildren(el("p", { text: `Could not load: ${err.message}.` })));
    await Promise.all([quiet(drawChart(), "chart"), quiet(loadErasures(), "erasures-body"), quiet(loadGovernance(), "governance-body")]);
  } else {
    ["chart", "erasures-body", "governance-body", "search-results"].forEach(needsApi);
    $("search-form").querySelector("button").disabled = true;
    $("list-form").querySelector("button").disabled = true;
  }
  document.body.dataset.ready = "yes";
}

start();
