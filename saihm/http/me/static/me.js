// The person's own page. The person enrols a passkey from a one-time link
// (navigator.credentials.create) and signs in with it (navigator.credentials.get); either
// answers a person token that lives in the `token` variable below and nowhere else: never a
// URL, cookie or Web Storage; it leaves the page only as an Authorization header on calls to
// this origin's /me/v1. The link's one-time code comes in the URL fragment (never sent to a
// server) and is taken out of the address at once. Everything shown that came from a cell is
// text (textContent), never HTML.
import { hex, leafHash, ProofError, sha256, unhex, verifyInclusion } from "../explorer/merkle.js";
import { b64decode, checkSignatures, parseCheckpoint, parseNote, parseVkey } from "../explorer/note.js";
import { code, el, facts, readReceipt, status } from "../explorer/views.js";

const PAGE = 20;
const READ_PAGE = 200;
const READ_PAGES = 10; // at most 2,000 items are read to show them newest first
const LOG_PAGE = 1000;
const LOG_PAGES = 3; // at most 3,000 receipts per list before the page asks for more
const KINDS = ["memory", "said", "did", "end"];
const KIND_WORDS = { memory: "Remembered", said: "Said", did: "Did", end: "Session ended" };
const OPERATION_WORDS = {
  REMEMBER: "Remembered",
  FORGET: "Forgotten: its key was destroyed",
  RECALL: "Read",
  STATUS: "Status asked",
  SHARE: "Shared",
  REVOKE: "Sharing stopped",
};
// Bidirectional and invisible formatting characters: shown as a visible marker, so content
// cannot reorder or hide the text around it.
const CONTROLS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]/g;
// In a namespace label every control character is marked, line breaks and tabs included.
const LABEL_CONTROLS = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]/g;

const root = new URL("..", document.baseURI).href;
let token = null;
const state = { holderId: null, sessionId: null, recall: null, selected: new Map() };
const $ = (id) => document.getElementById(id);

class CallError extends Error {
  constructor(code, status) {
    super(code);
    this.code = code;
    this.status = status;
  }
}

async function request(path, { method = "GET", body, auth = true } = {}) {
  const headers = { Accept: "application/json" };
  if (auth) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(root + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
    credentials: "omit",
    referrerPolicy: "no-referrer",
  });
  if (!response.ok) {
    let codeText = `HTTP ${response.status}`;
    try {
      codeText = (await response.json()).error || codeText;
    } catch {}
    throw new CallError(codeText, response.status);
  }
  return response;
}

async function tool(method, params = {}) {
  const response = await request("me/v1/call", { method: "POST", body: { method, params } });
  return { result: await response.json(), next: response.headers.get("Saihm-Recall-Next") };
}

const publicJson = async (path) => (await request(path, { auth: false })).json();
const personJson = async (path, body) =>
  (await request(path, body === undefined ? {} : { method: "POST", body })).json();

// -- words for people ---------------------------------------------------------------------------

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

function date(seconds) {
  const d = new Date(Number(seconds) * 1000);
  if (Number.isNaN(d.getTime())) return String(seconds);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}, ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())} UTC`;
}

function day(seconds) {
  const d = new Date(Number(seconds) * 1000);
  if (Number.isNaN(d.getTime())) return String(seconds);
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}`;
}

const dayKey = (seconds) => new Date(Number(seconds) * 1000).toISOString().slice(0, 10);
const isoSeconds = (iso) => Date.parse(iso) / 1000;

// Text as nodes: control characters become a visible [U+XXXX] marker.
function safeText(text) {
  const out = [];
  let last = 0;
  for (const match of String(text).matchAll(CONTROLS)) {
    if (match.index > last) out.push(document.createTextNode(text.slice(last, match.index)));
    const point = match[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    out.push(el("span", { class: "control", title: "an invisible formatting character", text: `[U+${point}]` }));
    last = match.index + match[0].length;
  }
  if (last < String(text).length) out.push(document.createTextNode(String(text).slice(last)));
  return out;
}

const short = (id) => `${id.slice(0, 8)}…`;

function idOnDemand(label, id) {
  return el("details", { class: "ids" }, el("summary", { text: label }), code(id));
}

function problem(node, err) {
  status(node, "fail", `That did not work: ${err.message}.`);
}

// A namespace label: every control, bidirectional or invisible character marked.
function safeLabel(text) {
  const out = [];
  let last = 0;
  let marked = false;
  const s = String(text);
  for (const match of s.matchAll(LABEL_CONTROLS)) {
    marked = true;
    if (match.index > last) out.push(document.createTextNode(s.slice(last, match.index)));
    const point = match[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    out.push(el("span", { class: "control", title: "an invisible or control character in this name", text: `[U+${point}]` }));
    last = match.index + match[0].length;
  }
  if (last < s.length) out.push(document.createTextNode(s.slice(last)));
  return el("span", { class: "namespace", "data-marked": marked ? "yes" : null }, ...out);
}

// Stored text as the person reads it: a JSON record (an accepted proposal, a structured
// record) shows its words as text and its structure beside, never as raw JSON only.
function contentNodes(plaintext) {
  let value = null;
  const text = String(plaintext);
  if (/^\s*[{[]/.test(text)) {
    try {
      value = JSON.parse(text);
    } catch {}
  }
  if (value === null || typeof value !== "object") return [el("p", { class: "content" }, ...safeText(text))];
  const inner = value.content !== undefined && !Array.isArray(value) ? value.content : value;
  const lines = [];
  const walk = (v, prefix) => {
    if (v === null || typeof v !== "object") lines.push(prefix ? `${prefix}: ${String(v)}` : String(v));
    else if (Array.isArray(v)) v.forEach((x) => walk(x, prefix));
    else for (const [k, x] of Object.entries(v)) walk(x, k);
  };
  walk(inner, "");
  return [
    el("p", { class: "content structured" }, ...safeText(lines.join("\n"))),
    el("details", { class: "structure" }, el("summary", { text: "Structure" }),
      el("pre", {}, ...safeText(JSON.stringify(value, null, 2)))),
  ];
}

// -- passkeys: base64url <-> bytes for the WebAuthn calls ---------------------------------------

function fromB64url(text) {
  const b64 = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)).buffer;
}

function toB64url(buffer) {
  let bin = "";
  for (const byte of new Uint8Array(buffer)) bin += String.fromCharCode(byte);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function creationOptions(o) {
  return {
    ...o,
    challenge: fromB64url(o.challenge),
    user: { ...o.user, id: fromB64url(o.user.id) },
    excludeCredentials: (o.excludeCredentials || []).map((c) => ({ ...c, id: fromB64url(c.id) })),
  };
}

function requestOptions(o) {
  return {
    ...o,
    challenge: fromB64url(o.challenge),
    allowCredentials: (o.allowCredentials || []).map((c) => ({ ...c, id: fromB64url(c.id) })),
  };
}

function credentialJson(credential) {
  const r = credential.response;
  const response = { clientDataJSON: toB64url(r.clientDataJSON) };
  if (r.attestationObject) {
    response.attestationObject = toB64url(r.attestationObject);
    if (r.getTransports) response.transports = r.getTransports();
  } else {
    response.authenticatorData = toB64url(r.authenticatorData);
    response.signature = toB64url(r.signature);
    if (r.userHandle) response.userHandle = toB64url(r.userHandle);
  }
  return {
    id: credential.id,
    rawId: toB64url(credential.rawId),
    type: credential.type,
    response,
    clientExtensionResults: credential.getClientExtensionResults ? credential.getClientExtensionResults() : {},
  };
}

// -- signing in -------------------------------------------------------------------------------

let enrolLink = null;

function takeLink() {
  const match = /^#enrol=([0-9a-f]{32}\.[A-Za-z0-9_-]+)$/.exec(location.hash);
  if (!match) return;
  enrolLink = match[1];
  // The one-time code leaves the address bar and the history at once.
  history.replaceState(null, "", location.pathname);
  $("enrol-box").hidden = false;
}

async function enrol() {
  const out = $("signin-result");
  if (!enrolLink) return;
  document.body.dataset.ready = "starting";
  try {
    const options = await personJson("me/v1/enrol/options", { link: enrolLink });
    const credential = await navigator.credentials.create({ publicKey: creationOptions(options.publicKey) });
    const done = await personJson("me/v1/enrol", { ceremonyId: options.ceremonyId, credential: credentialJson(credential) });
    enrolLink = null;
    $("enrol-box").hidden = true;
    await started(done, "Your passkey is made, and you are signed in with it. ");
  } catch (err) {
    failed(out, err, "This link did not work: it may be used or expired. Ask for a new one.");
  }
}

async function signIn() {
  const out = $("signin-result");
  document.body.dataset.ready = "starting";
  try {
    const options = await personJson("me/v1/signin/options", {});
    const credential = await navigator.credentials.get({ publicKey: requestOptions(options.publicKey) });
    const done = await personJson("me/v1/signin", { ceremonyId: options.ceremonyId, credential: credentialJson(credential) });
    await started(done, "Signed in with your passkey. ");
  } catch (err) {
    failed(out, err, "This passkey was not accepted here. If you removed it or lost it, ask for a new link.");
  }
}

function failed(out, err, refusedText) {
  token = null;
  const refused = err instanceof CallError && err.status === 401;
  status(out, "fail", refused ? refusedText : `Could not sign in: ${err.message}.`);
  document.body.dataset.ready = "failed";
}

async function started(done, words) {
  token = done.personToken;
  state.holderId = done.holderId;
  const { result } = await tool("saihm_status");
  state.sessionId = result.sessionId;
  status($("signin-result"), "pass", [
    words,
    `The sign-in ends ${date(done.expiresAt)}. `,
    el("button", { type: "button", class: "plain", id: "signout", onclick: signOut, text: "Sign out" }),
    idOnDemand("Your holder id", state.holderId),
  ]);
  $("signin-box").hidden = true;
  $("main").hidden = false;
  $("views-nav").hidden = false;
  await Promise.all([
    recall(false).catch((err) => problem($("memory-list"), err)),
    loadSharing().catch((err) => problem($("sharing-body"), err)),
    loadPending().catch((err) => problem($("pending-body"), err)),
    loadActivity().catch((err) => problem($("activity-body"), err)),
    loadPasskeys().catch((err) => problem($("passkeys-body"), err)),
  ]);
  document.body.dataset.ready = "yes";
}

async function signOut() {
  try {
    await request("me/v1/signout", { method: "POST", body: {} });
  } catch {}
  token = null;
  state.holderId = state.sessionId = null;
  state.selected.clear();
  $("main").hidden = true;
  $("views-nav").hidden = true;
  $("signin-box").hidden = false;
  for (const id of ["memory-list", "sharing-body", "pending-body", "activity-body", "passkeys-body", "bulk-out"]) $(id).replaceChildren();
  status($("signin-result"), "not-checked", "Signed out: this page no longer holds your sign-in.");
  document.body.dataset.ready = "signed-out";
}

// -- memories ---------------------------------------------------------------------------------

function recallParams() {
  const form = $("recall-form");
  const query = $("query").value.trim();
  const kinds = [...form.querySelectorAll("input[name=kind]:checked")].map((box) => box.value);
  const namespaces = $("namespaces").value.split(",").map((n) => n.trim()).filter(Boolean);
  return { query, kinds, namespaces };
}

// Everything (up to READ_PAGES pages) is read, then shown newest first, PAGE at a time; a
// search keeps the ranking of recall, best match first.
async function recall(more) {
  const list = $("memory-list");
  const button = $("memory-more");
  if (more) {
    state.recall.shown += PAGE;
    renderMemories();
    return;
  }
  const wanted = recallParams();
  if (!wanted.kinds.length) {
    status(list, "fail", "Choose at least one kind.");
    button.hidden = true;
    return;
  }
  const r = { ...wanted, items: [], complete: true, shown: PAGE };
  const params = { limit: READ_PAGE };
  if (r.query) params.query = r.query;
  if (r.kinds.length !== KINDS.length) params.kinds = r.kinds;
  if (r.namespaces.length) params.namespaces = r.namespaces;
  let cursor = null;
  for (let i = 0; i < READ_PAGES; i++) {
    const { result, next } = await tool("saihm_recall", cursor ? { ...params, cursor } : params);
    r.items.push(...result);
    cursor = next;
    if (cursor === null) break;
  }
  r.complete = cursor === null;
  if (!r.query) r.items.reverse(); // recall lists every cell in log order: newest last
  state.recall = r;
  state.selected.clear();
  updateBulk();
  renderMemories();
}

function renderMemories() {
  const r = state.recall;
  const list = $("memory-list");
  list.className = "";
  delete list.dataset.result;
  $("memory-more").hidden = r.shown >= r.items.length;
  if (!r.items.length) {
    list.replaceChildren(el("p", { text: r.query ? "Nothing matches." : "No memories or records here." }));
    return;
  }
  const items = r.items.slice(0, r.shown);
  const partial = r.complete ? "" : ` (the first ${READ_PAGE * READ_PAGES} read)`;
  const note = r.query
    ? `${r.items.length} found for “${r.query}”${partial}, best match first (the same ranking as recall).`
    : `${r.items.length} in all${partial}, newest first; ${items.length} shown.`;
  list.replaceChildren(el("p", { class: "note", text: note }), ...items.map((item) => memoryCard(item)));
}

function who(sessionId) {
  return sessionId === state.sessionId ? "added by you" : `session ${short(sessionId)}`;
}

function memoryCard(item) {
  const history = el("div", { class: "history-out" });
  const out = el("div", { class: "forget-out" });
  const meta = el("p", { class: "meta" },
    `${KIND_WORDS[item.kind] || item.kind} · in `, safeLabel(item.namespace), ` · ${date(item.timestamp)} · ${who(item.sessionId)}`);
  const pick = el("input", { type: "checkbox", class: "select", "aria-label": "Select for forgetting" });
  pick.addEventListener("change", () => {
    if (pick.checked) state.selected.set(item.cellId, { item, card, out });
    else state.selected.delete(item.cellId);
    updateBulk();
  });
  const card = el("article", { class: "memory", "data-cell-id": item.cellId, "data-kind": item.kind },
    el("div", { class: "card-head" }, pick, meta), ...contentNodes(item.plaintext));
  const actions = el("div", { class: "actions" },
    el("button", { type: "button", class: "plain history", onclick: () => showHistory(item.cellId, history), text: "History" }),
    item.kind === "memory" ? el("button", { type: "button", class: "plain edit", onclick: () => askEdit(item, card, out), text: "Edit…" }) : null,
    el("button", { type: "button", class: "danger forget", onclick: () => askForget(item, card, out), text: "Forget…" }));
  card.append(actions, out, history);
  return card;
}

async function receiptRows(cellId) {
  const page = await publicJson(`log/v1/receipts?subjectId=${cellId}&limit=100`);
  const rows = page.receipts.map((entry) => {
    const r = entry.receipt;
    const words = OPERATION_WORDS[r.operation] || r.operation;
    return el("li", { "data-operation": r.operation },
      `${words}, ${date(r.timestamp)} `, idOnDemand(`receipt #${entry.index}`, r.receiptId));
  });
  return { rows, more: page.next !== null };
}

// A memory's receipts, and, when the person's edits made it, the versions it replaced: each
// with its own receipts (its text was destroyed with its key when it was replaced).
async function showHistory(cellId, out) {
  out.replaceChildren(el("p", { text: "Reading…" }));
  try {
    const [{ rows, more }, edits] = await Promise.all([
      receiptRows(cellId), personJson(`me/v1/history?cellId=${cellId}`)]);
    const earlier = await Promise.all(edits.replaced.map(async (old) => {
      const before = await receiptRows(old.cellId);
      return el("li", { class: "replaced", "data-replaced": old.cellId },
        `Replaced an earlier version on ${date(old.replacedAt)}; its text was destroyed with its key. `,
        idOnDemand("its id", old.cellId), el("ul", { class: "history" }, ...before.rows));
    }));
    out.replaceChildren(el("h4", { text: "History (receipts in the public log)" }),
      el("ul", { class: "history" }, ...rows),
      more ? el("p", { class: "note", text: "Only the first 100 are shown." }) : "",
      earlier.length ? el("h4", { text: "Earlier versions, newest first" }) : "",
      earlier.length ? el("ul", { class: "versions" }, ...earlier) : "");
  } catch (err) {
    problem(out, err);
  }
}

async function addMemory(event) {
  event.preventDefault();
  const out = $("add-result");
  const content = $("add-content").value;
  const namespace = $("add-namespace").value.trim() || "memory";
  if (!content.trim()) {
    status(out, "fail", "Write something first.");
    return;
  }
  try {
    await tool("saihm_remember", { content, namespace });
  } catch (err) {
    problem(out, err);
    return;
  }
  $("add-content").value = "";
  status(out, "pass", "Added: your agents can recall it now. Its REMEMBER receipt is in the log.");
  await recall(false);
}

function askEdit(item, card, out) {
  const area = el("textarea", { class: "edit-content", rows: "3", "aria-label": "The new text" });
  area.value = item.plaintext;
  const save = el("button", { type: "button", class: "save-edit", text: "Save the new version" });
  const keep = el("button", { type: "button", class: "plain", text: "Cancel" });
  keep.addEventListener("click", () => out.replaceChildren());
  save.addEventListener("click", async () => {
    if (!area.value.trim()) return;
    save.disabled = true;
    try {
      await tool("saihm_remember", { content: area.value, namespace: item.namespace, supersedes: item.cellId });
    } catch (err) {
      save.disabled = false;
      problem(out, err);
      return;
    }
    await recall(false);
    status($("add-result"), "pass", "Saved: the new version replaced the old one, whose key was destroyed (REMEMBER and FORGET receipts in the log).");
    $("add-box").open = true;
  });
  out.replaceChildren(el("div", { class: "edit-box" },
    el("p", { class: "note", text: "The new version replaces this one: the old one is forgotten for good, both in one step." }),
    area, el("div", { class: "actions" }, save, keep)));
  area.focus();
}

function askForget(item, card, out) {
  const yes = el("button", { type: "button", class: "danger confirm-forget", text: "Yes, forget it for good" });
  const no = el("button", { type: "button", class: "plain", text: "Keep it" });
  no.addEventListener("click", () => out.replaceChildren());
  yes.addEventListener("click", () => forget(item, card, out));
  out.replaceChildren(el("div", { class: "status not-checked confirm", role: "alertdialog" },
    el("p", { text: "Forget this? Its key is destroyed: nobody, the operator included, can read it again, and the log keeps a receipt that it was done." }),
    el("div", { class: "actions" }, yes, no)));
  no.focus(); // the safe choice has the focus
}

async function forget(item, card, out) {
  out.replaceChildren(el("p", { text: "Forgetting…" }));
  let done;
  try {
    ({ result: done } = await tool("saihm_forget", { id: item.cellId }));
  } catch (err) {
    problem(out, err);
    return;
  }
  state.selected.delete(item.cellId);
  updateBulk();
  if (!done.success) {
    status(out, "fail", "This was already forgotten, or is not yours to forget.");
    return;
  }
  card.dataset.state = "forgotten";
  for (const node of card.querySelectorAll(".content, .structure")) node.remove();
  card.querySelector(".card-head").after(el("p", { class: "content" }, el("em", { text: "(forgotten)" })));
  for (const node of card.querySelectorAll(".forget, .edit, .select")) node.remove();
  const result = el("p", { class: "status", "data-check": "erasure", role: "status", "aria-live": "polite" });
  out.replaceChildren(el("h4", { text: `Forgotten, ${date(done.epoch)}` }), result);
  await verifyErasure(done.cellId, done.destructionAnchor, result, out);
}

function updateBulk() {
  const n = state.selected.size;
  $("bulk-forget").disabled = n === 0;
  $("bulk-count").textContent = n ? `${n} selected` : "";
}

function askBulkForget() {
  const out = $("bulk-out");
  const chosen = [...state.selected.values()];
  if (!chosen.length) return;
  const yes = el("button", { type: "button", class: "danger confirm-bulk", text: `Yes, forget these ${chosen.length} for good` });
  const no = el("button", { type: "button", class: "plain", text: "Keep them" });
  no.addEventListener("click", () => out.replaceChildren());
  yes.addEventListener("click", async () => {
    out.replaceChildren(el("p", { class: "status running", text: `Forgetting ${chosen.length}…` }));
    for (const { item, card, out: cardOut } of chosen) await forget(item, card, cardOut);
    const proved = chosen.filter(({ out: o }) => o.querySelector("[data-check=erasure][data-result=pass]")).length;
    status(out, proved === chosen.length ? "pass" : "fail",
      `${chosen.length} forgotten; ${proved} of them proved deleted in this browser (each proof is under its memory).`);
  });
  out.replaceChildren(el("div", { class: "status not-checked confirm", role: "alertdialog" },
    el("p", { text: `Forget ${chosen.length} selected? Their keys are destroyed: nobody can read them again. Each gets its own FORGET receipt and proof.` }),
    el("div", { class: "actions" }, yes, no)));
  no.focus();
}

// -- proof in the browser (the explorer's Merkle and signed-note code) ------------------------

async function verifiedCheckpoint() {
  const keys = await publicJson("log/v1/keys");
  const vkeys = [];
  for (const k of keys.checkpointKeys || []) {
    try {
      vkeys.push(await parseVkey(k.vkey));
    } catch {}
  }
  const text = await (await request("log/checkpoint", { auth: false })).text();
  const parsed = parseNote(text);
  const body = parseCheckpoint(parsed.text);
  const lines = await checkSignatures(parsed, vkeys);
  const ed = lines.find((l) => l.name === body.origin && l.kind === "Ed25519");
  return { body, signed: ed ? ed.status === "verified" : false };
}

async function verifyErasure(cellId, receiptId, result, out) {
  status(result, "running", "Checking the FORGET receipt in this browser…");
  try {
    const entry = await publicJson(`log/v1/receipts/${receiptId}`);
    const r = entry.receipt;
    const leaf = b64decode(entry.cbor);
    const { fields, signedBytes } = readReceipt(leaf);
    const id = hex(await sha256(signedBytes));
    if (id !== receiptId || hex(fields.get(1)) !== id || fields.get(3) !== "FORGET" || hex(fields.get(2)) !== cellId ||
        r.operation !== "FORGET" || r.subjectId !== cellId) {
      throw new ProofError("the logged receipt is not a FORGET of this memory with this id");
    }
    const cp = await verifiedCheckpoint();
    if (!cp.signed) throw new ProofError("the checkpoint's Ed25519 signature did not verify");
    const size = cp.body.size;
    if (BigInt(entry.index) >= size) throw new ProofError("the checkpoint does not yet cover the receipt");
    const proof = await publicJson(`log/v1/proof/inclusion?index=${entry.index}&size=${size}`);
    await verifyInclusion(await leafHash(leaf), entry.index, size, proof.proof.map(unhex), cp.body.root);
    const erasures = await publicJson("log/v1/erasures");
    if (!erasures.cellIds.includes(cellId)) throw new ProofError("the memory is not on the public erasure list");
    status(result, "pass", [
      el("strong", { text: "VERIFIED in this browser: the deletion is in the log. " }),
      `The FORGET receipt (#${entry.index}, ${date(r.timestamp)}) is included in the signed log of size ${size} ` +
      `(RFC 9162 inclusion proof of ${proof.proof.length} hashes, Ed25519 checkpoint signature), ` +
      "and the memory is on the public erasure list. Not checked here: the receipt's ML-DSA-65 signature (saihm verify).",
    ]);
    out.append(el("details", {}, el("summary", { text: "The FORGET receipt" }),
      facts([["Receipt id", code(r.receiptId)], ["Memory id", code(r.subjectId)], ["Log index", String(entry.index)], ["When", date(r.timestamp)]])));
  } catch (err) {
    const why = err instanceof ProofError ? err.message : `a proof could not be read (${err.message})`;
    status(result, "fail", [el("strong", { text: "NOT VERIFIED. " }), `${why}.`]);
  }
}

// -- who may read it ----------------------------------------------------------------------------

async function allLog(query) {
  const out = [];
  let cursor = 0;
  for (let i = 0; i < LOG_PAGES && cursor !== null; i++) {
    const page = await publicJson(`log/v1/receipts?${query}&limit=${LOG_PAGE}&cursor=${cursor}`);
    out.push(...page.receipts);
    cursor = page.next;
  }
  return { receipts: out, complete: cursor === null };
}

function action(label, cls, run, out) {
  return el("button", { type: "button", class: cls, text: label, onclick: async (event) => {
    event.target.disabled = true;
    try {
      await run();
    } catch (err) {
      problem(out, err);
      event.target.disabled = false;
    }
  } });
}

// A destructive action asks first, beside its row; the safe answer has the focus.
function confirmed(label, cls, question, run, out, slot) {
  return el("button", { type: "button", class: cls, text: label, onclick: () => {
    const yes = el("button", { type: "button", class: `danger confirm-${cls.split(" ").pop()}`, text: `Yes, ${label.replace(/…$/, "").toLowerCase()}` });
    const no = el("button", { type: "button", class: "plain", text: "Cancel" });
    no.addEventListener("click", () => slot.replaceChildren());
    yes.addEventListener("click", async () => {
      yes.disabled = true;
      try {
        await run();
      } catch (err) {
        problem(out, err);
        slot.replaceChildren();
      }
    });
    slot.replaceChildren(el("div", { class: "status not-checked confirm", role: "alertdialog" },
      el("p", { text: question }), el("div", { class: "actions" }, yes, no)));
    no.focus();
  } });
}

async function loadSharing() {
  const box = $("sharing-body");
  const out = el("p", { class: "status", role: "status", "aria-live": "polite" });
  const { result: s } = await tool("saihm_status");
  const parts = [];
  const reload = async (message) => {
    await loadSharing();
    status($("sharing-body").querySelector(".status"), "pass", message);
  };
  const mine = s.contracts.map((c) => el("li", { "data-contract": c.contractId },
    `You share ${c.mode.toLowerCase()} with ${c.granteeIds.length} agent${c.granteeIds.length === 1 ? "" : "s"}, until ${date(c.expiresAt)}. `,
    action("Stop sharing", "danger revoke-share", async () => {
      await tool("saihm_revoke_share", { contractId: c.contractId });
      await reload("Sharing stopped.");
    }, out),
    idOnDemand("ids", `contract ${c.contractId}; with ${c.granteeIds.join(", ")}`)));
  parts.push(el("h3", { text: "What you share" }),
    mine.length ? el("ul", { class: "people" }, ...mine) : el("p", { text: "You share nothing." }));
  const theirs = s.incomingContracts.map((c) => el("li", { "data-contract": c.contractId },
    `Holder ${short(c.holderIdHex)} shares ${c.mode.toLowerCase()} with you, until ${date(c.expiresAt)}: ${c.accepted ? "accepted" : "waiting for your answer"}. `,
    c.accepted ? "" : action("Accept", "accept-contract", async () => {
      await tool("saihm_accept_contract", { contractId: c.contractId });
      await reload("Accepted.");
    }, out),
    c.accepted ? "" : action("Decline", "danger decline-contract", async () => {
      await tool("saihm_decline_contract", { contractId: c.contractId });
      await reload("Declined.");
    }, out),
    idOnDemand("ids", `contract ${c.contractId}; from ${c.holderIdHex}`)));
  parts.push(el("h3", { text: "Shared with you" }),
    theirs.length ? el("ul", { class: "people" }, ...theirs) : el("p", { text: "Nothing is shared with you." }));
  parts.push(el("h3", { text: "Agents with access across your sessions" }), await grantList(out, reload));
  box.replaceChildren(out, ...parts);
}

async function grantList(out, reload) {
  const [granted, ungranted, named] = await Promise.all([
    allLog("operation=GRANT"), allLog("operation=UNGRANT"), personJson("me/v1/grants")]);
  const gone = new Set(ungranted.receipts.map((e) => e.receipt.subjectId));
  const consumers = new Map(named.grants.filter((g) => g.grantId).map((g) => [g.grantId, g]));
  const labels = named.names || {};
  const uses = named.uses || {};
  const now = Date.now() / 1000;
  const rows = granted.receipts
    .filter((e) => e.receipt.holderId === state.holderId && !gone.has(e.receipt.subjectId))
    .reverse() // newest first
    .map((e) => {
      const grantId = e.receipt.subjectId;
      const detail = e.receipt.detail || {};
      const consumer = consumers.get(grantId);
      const label = labels[grantId] || (consumer ? consumer.consumer : null);
      const name = label
        ? el("strong", { class: "grant-name" }, "“", ...safeText(label), "”")
        : el("strong", { class: "grant-name unnamed", text: `An unnamed agent (granted ${date(e.receipt.timestamp)})` });
      const what = detail.namespaces && detail.namespaces.length
        ? ["your ", ...detail.namespaces.flatMap((n, i) => [i ? ", " : "", safeLabel(n)]), " memories"]
        : ["all your memories"];
      const mode = consumer && consumer.mode ? ` (${consumer.mode})` : "";
      const until = Number(detail.expiresAt) < now ? `expired ${date(detail.expiresAt)}` : `until ${date(detail.expiresAt)}`;
      const slot = el("div", { class: "confirm-slot" });
      const nameSlot = el("div", { class: "name-slot" });
      const shown = label ? `“${label}”` : "this agent";
      const use = uses[grantId];
      const plural = (n) => `${n} item${n === 1 ? "" : "s"}`;
      const read = use
        ? el("div", { class: "grant-use" },
          el("p", { class: "when", text: `Last read ${date(use.lastReadAt)}: ${plural(use.lastCells)}; ${use.calls} read${use.calls === 1 ? "" : "s"} in all, ${plural(use.cells)}.` }),
          el("details", {}, el("summary", { text: "Its latest reads" }),
            el("ul", { class: "reads" }, ...use.reads.map(([when, n]) => el("li", { text: `${date(when)}: ${plural(n)}` })))))
        : el("p", { class: "when grant-use", text: "No read seen by this operator yet." });
      return el("li", { "data-grant": grantId },
        name, " may read ", ...what, `${mode}, in every session, ${until}; granted ${date(e.receipt.timestamp)}. `, read,
        el("div", { class: "actions" },
          el("button", { type: "button", class: "plain name-grant", text: label ? "Rename" : "Name it", onclick: () => askName(grantId, label || "", nameSlot, out, reload) }),
          confirmed("Revoke…", "danger revoke-grant",
            `Revoke ${shown}? Its token is refused from the next call on; the log keeps an UNGRANT receipt. This cannot be undone (a new grant would be needed).`,
            async () => {
              await personJson("me/v1/grants/revoke", { grantId });
              await reload(`Revoked ${shown}: its token is refused from now on.`);
            }, out, slot)),
        nameSlot, slot, idOnDemand("id", `grant ${grantId}`));
    });
  const note = granted.complete && ungranted.complete ? "" : el("p", { class: "note", text: `Only the first ${LOG_PAGE * LOG_PAGES} grants of the log were read.` });
  return el("div", {}, rows.length ? el("ul", { class: "people grants" }, ...rows) : el("p", { text: "No agent holds a grant over all your sessions." }), note);
}

function askName(grantId, current, slot, out, reload) {
  const input = el("input", { type: "text", class: "grant-label", maxlength: "80", "aria-label": "A name for this grant" });
  input.value = current;
  const save = el("button", { type: "button", class: "save-name", text: "Save the name" });
  save.addEventListener("click", async () => {
    try {
      await personJson("me/v1/grants/name", { grantId, name: input.value });
      await reload("Named.");
    } catch (err) {
      problem(out, err);
    }
  });
  slot.replaceChildren(el("div", { class: "actions" }, input, save));
  input.focus();
}

// -- waiting for you ----------------------------------------------------------------------------

async function loadPending() {
  const box = $("pending-body");
  const out = el("p", { class: "status", role: "status", "aria-live": "polite" });
  const { pending } = await personJson("me/v1/pending");
  const reload = async (message) => {
    await loadPending();
    status($("pending-body").querySelector(".status"), "pass", message);
  };
  const rows = pending.map((p) => el("li", { "data-proposal": p.id },
    el("p", {}, `“`, ...safeText(p.consumer), `” proposes to add to `, p.namespace ? safeLabel(p.namespace) : "a namespace", `, ${date(isoSeconds(p.proposed_at))}:`),
    ...contentNodes(JSON.stringify(p.record)),
    el("div", { class: "actions" },
      action("Accept", "accept-proposal", async () => {
        await personJson("me/v1/pending/accept", { id: p.id });
        await reload("Accepted: it is now one of your memories.");
        await recall(false);
      }, out),
      action("Reject", "danger reject-proposal", async () => {
        await personJson("me/v1/pending/reject", { id: p.id });
        await reload("Rejected: it was dropped and its key destroyed.");
      }, out))));
  box.replaceChildren(out, rows.length ? el("ul", { class: "people proposals" }, ...rows) : el("p", { text: "Nothing is waiting for you." }));
}

// -- passkeys -----------------------------------------------------------------------------------

async function loadPasskeys() {
  const box = $("passkeys-body");
  const out = el("p", { class: "status", role: "status", "aria-live": "polite" });
  const { passkeys } = await personJson("me/v1/passkeys");
  const rows = passkeys.map((k, i) => {
    const slot = el("div", { class: "confirm-slot" });
    const used = k.lastUsedAt ? `last used ${date(k.lastUsedAt)}` : "not used to sign in yet";
    return el("li", { "data-passkey": k.passkeyId },
      `Passkey ${i + 1}, made ${date(k.createdAt)}, ${used}${k.current ? " (this sign-in)" : ""}. `,
      confirmed("Remove…", "danger remove-passkey",
        k.current
          ? "Remove the passkey you signed in with? You are signed out at once; without another passkey you need a new link."
          : "Remove this passkey? It can no longer sign in, and its sign-ins end now.",
        async () => {
          await personJson("me/v1/passkeys/remove", { passkeyId: k.passkeyId });
          if (k.current) {
            token = null;
            await signOut();
            return;
          }
          await loadPasskeys();
          status($("passkeys-body").querySelector(".status"), "pass", "Removed.");
        }, out, slot),
      slot);
  });
  box.replaceChildren(out, el("ul", { class: "people passkeys" }, ...rows));
}

// -- activity -----------------------------------------------------------------------------------

async function loadActivity() {
  const box = $("activity-body");
  const { receipts, complete } = await allLog(`holderId=${state.holderId}`);
  if (!receipts.length) {
    box.replaceChildren(el("p", { text: "No receipts yet." }));
    return;
  }
  const days = new Map();
  const ops = new Set();
  for (const e of receipts) {
    const key = dayKey(e.receipt.timestamp);
    if (!days.has(key)) days.set(key, { seconds: e.receipt.timestamp, counts: new Map() });
    const counts = days.get(key).counts;
    counts.set(e.receipt.operation, (counts.get(e.receipt.operation) || 0) + 1);
    ops.add(e.receipt.operation);
  }
  const columns = [...ops].sort();
  const rows = [...days.entries()].sort((a, b) => (a[0] < b[0] ? 1 : -1)).map(([key, d]) =>
    el("tr", { "data-day": key }, el("th", { scope: "row", text: day(d.seconds) }),
      ...columns.map((op) => el("td", { "data-operation": op, text: String(d.counts.get(op) || "") }))));
  box.replaceChildren(el("table", { class: "activity" },
    el("caption", { text: `Your receipts by day and operation (${receipts.length}${complete ? "" : ", the first ones only"})` }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Day" }), ...columns.map((op) => el("th", { scope: "col", text: op })))),
    el("tbody", {}, ...rows)));
}

// -- export -------------------------------------------------------------------------------------

// The file comes with the Authorization header like every call and is handed to the browser as
// a Blob: the token is never in a URL, and the blob: URL is revoked once the download began.
async function exportMemory() {
  const out = $("export-result");
  status(out, "", "Preparing the file…");
  try {
    const blob = await (await request("me/v1/export")).blob();
    const url = URL.createObjectURL(blob);
    const name = `saihm-memory-${new Date().toISOString().slice(0, 10)}.saihm`;
    const link = el("a", { href: url, download: name, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    status(out, "pass", [
      `Downloaded ${name} (${blob.size} bytes). Check it anywhere, offline: `,
      code(`saihm verify ${name}`, "cmd"),
    ]);
  } catch (err) {
    problem(out, err);
  }
}

// -- start --------------------------------------------------------------------------------------

takeLink();
window.addEventListener("hashchange", takeLink); // a link opened in this tab again
$("enrol").addEventListener("click", enrol);
$("signin").addEventListener("click", signIn);
$("add-form").addEventListener("submit", addMemory);
$("bulk-forget").addEventListener("click", askBulkForget);
$("export").addEventListener("click", exportMemory);
$("recall-form").addEventListener("submit", (event) => {
  event.preventDefault();
  recall(false).catch((err) => problem($("memory-list"), err));
});
$("memory-more").addEventListener("click", () => recall(true).catch((err) => problem($("memory-list"), err)));
document.body.dataset.ready = "signed-out";
