// DOM helpers (text only: nothing from the log or a user is ever parsed as HTML) and a small
// CBOR reader for receipt leaves (docs/formats.md section 3).

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = String(value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "text") node.textContent = String(value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children) node.append(child);
  return node;
}

export function facts(pairs) {
  const dl = el("dl", { class: "facts" });
  for (const [term, value] of pairs) {
    dl.append(el("dt", { text: term }));
    dl.append(value instanceof Node ? el("dd", {}, value) : el("dd", { text: value }));
  }
  return dl;
}

export function code(text, cls = "hash") {
  return el("code", { class: cls, text });
}

export function status(node, result, message) {
  node.dataset.result = result;
  node.className = `status ${result}`;
  node.replaceChildren(...(Array.isArray(message) ? message : [message]));
}

export function when(seconds) {
  const ms = Number(seconds) * 1000;
  if (!Number.isFinite(ms)) return String(seconds);
  return new Date(ms).toISOString().replace(".000Z", "Z");
}

export function age(seconds) {
  const delta = Math.round(Date.now() / 1000 - Number(seconds));
  if (delta < 0) return `${-delta} s in the future`;
  if (delta < 120) return `${delta} s ago`;
  if (delta < 7200) return `${Math.round(delta / 60)} min ago`;
  if (delta < 172800) return `${Math.round(delta / 3600)} h ago`;
  return `${Math.round(delta / 86400)} days ago`;
}

export class CborError extends Error {}

// Reads one CBOR item at `at`; returns [value, end]. Maps become Map objects, byte strings
// Uint8Array; only the types a receipt uses (uint, bytes, text, array, map, bool, null).
export function cborItem(bytes, at) {
  if (at >= bytes.length) throw new CborError("truncated CBOR");
  const head = bytes[at];
  const major = head >> 5;
  const info = head & 31;
  let value;
  let pos = at + 1;
  if (info < 24) value = BigInt(info);
  else if (info <= 27) {
    const n = 1 << (info - 24);
    if (pos + n > bytes.length) throw new CborError("truncated CBOR");
    value = 0n;
    for (let i = 0; i < n; i++) value = (value << 8n) | BigInt(bytes[pos + i]);
    pos += n;
  } else throw new CborError("indefinite or reserved CBOR length");
  switch (major) {
    case 0:
      return [value, pos];
    case 2:
    case 3: {
      const end = pos + Number(value);
      if (end > bytes.length) throw new CborError("truncated CBOR");
      const raw = bytes.slice(pos, end);
      return [major === 2 ? raw : new TextDecoder("utf-8", { fatal: true }).decode(raw), end];
    }
    case 4: {
      const items = [];
      for (let i = 0n; i < value; i++) {
        const [item, next] = cborItem(bytes, pos);
        items.push(item);
        pos = next;
      }
      return [items, pos];
    }
    case 5: {
      const map = new Map();
      for (let i = 0n; i < value; i++) {
        const [key, afterKey] = cborItem(bytes, pos);
        const [item, next] = cborItem(bytes, afterKey);
        map.set(typeof key === "bigint" ? Number(key) : key, item);
        pos = next;
      }
      return [map, pos];
    }
    case 7:
      if (info === 20) return [false, pos];
      if (info === 21) return [true, pos];
      if (info === 22) return [null, pos];
      throw new CborError("a CBOR simple value a receipt does not use");
    default:
      throw new CborError("a CBOR type a receipt does not use");
  }
}

// A receipt leaf: {fields: Map, signedBytes} where signedBytes is the map without keys 1 and
// 5 (the receiptId's preimage), cut from the leaf's own canonical bytes.
export function readReceipt(leaf) {
  const head = leaf[0];
  if (head >> 5 !== 5 || (head & 31) >= 24) throw new CborError("a receipt is a small CBOR map");
  const count = head & 31;
  const fields = new Map();
  const kept = [];
  let pos = 1;
  for (let i = 0; i < count; i++) {
    const [key, afterKey] = cborItem(leaf, pos);
    const [value, next] = cborItem(leaf, afterKey);
    fields.set(Number(key), value);
    if (key !== 1n && key !== 5n) kept.push(leaf.slice(pos, next));
    pos = next;
  }
  if (pos !== leaf.length) throw new CborError("trailing bytes after the receipt");
  const size = kept.reduce((n, part) => n + part.length, 1);
  const signedBytes = new Uint8Array(size);
  signedBytes[0] = 0xa0 | kept.length;
  let at = 1;
  for (const part of kept) {
    signedBytes.set(part, at);
    at += part.length;
  }
  return { fields, signedBytes };
}
