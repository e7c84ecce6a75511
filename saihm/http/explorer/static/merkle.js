// RFC 9162 Merkle proof verification with WebCrypto SHA-256 (docs/formats.md section 1).
// Every function here throws ProofError on a failed check and returns nothing on success;
// sizes and indices are BigInt so trees beyond 2^32 leaves shift correctly.

export class ProofError extends Error {}

export async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function leafHash(leaf) {
  return sha256(concat(Uint8Array.of(0), leaf));
}

export function nodeHash(left, right) {
  return sha256(concat(Uint8Array.of(1), left, right));
}

export function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function unhex(text) {
  if (typeof text !== "string" || !/^([0-9a-f]{2})*$/.test(text)) {
    throw new ProofError("a hash is not lowercase hexadecimal");
  }
  return Uint8Array.from(text.match(/../g) || [], (h) => parseInt(h, 16));
}

function equal(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function checkHashes(proof) {
  for (const h of proof) {
    if (!(h instanceof Uint8Array) || h.length !== 32) {
      throw new ProofError("every proof hash must be 32 bytes");
    }
  }
}

// RFC 9162 section 2.1.3.2: verify that leafHashValue is leaf `index` of the tree of `size`
// leaves whose root is `root`.
export async function verifyInclusion(leafHashValue, index, size, proof, root) {
  index = BigInt(index);
  size = BigInt(size);
  if (!(index < size)) throw new ProofError("the index is not below the tree size");
  checkHashes([leafHashValue, root, ...proof]);
  let fn = index;
  let sn = size - 1n;
  let r = leafHashValue;
  for (const p of proof) {
    if (sn === 0n) throw new ProofError("the proof is longer than the tree is deep");
    if ((fn & 1n) === 1n || fn === sn) {
      r = await nodeHash(p, r);
      if ((fn & 1n) === 0n) {
        while ((fn & 1n) === 0n && fn !== 0n) {
          fn >>= 1n;
          sn >>= 1n;
        }
      }
    } else {
      r = await nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new ProofError("the proof is shorter than the tree is deep");
  if (!equal(r, root)) {
    throw new ProofError(`the computed root ${hex(r)} is not the checkpoint root ${hex(root)}`);
  }
}

// RFC 9162 section 2.1.4.2: verify that the tree of size2 leaves with root2 extends the tree
// of size1 leaves with root1.
export async function verifyConsistency(size1, size2, proof, root1, root2) {
  size1 = BigInt(size1);
  size2 = BigInt(size2);
  checkHashes([root1, root2, ...proof]);
  if (size1 === 0n) throw new ProofError("a consistency proof needs a non-empty first tree");
  if (size2 < size1) throw new ProofError("the second tree is smaller than the first");
  if (size1 === size2) {
    if (proof.length !== 0) throw new ProofError("equal sizes need an empty proof");
    if (!equal(root1, root2)) throw new ProofError("two different roots for one tree size");
    return;
  }
  let path = proof;
  if ((size1 & (size1 - 1n)) === 0n) path = [root1, ...proof];
  if (path.length === 0) throw new ProofError("the proof is empty");
  let fn = size1 - 1n;
  let sn = size2 - 1n;
  while ((fn & 1n) === 1n) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0n) throw new ProofError("the proof is longer than the tree is deep");
    if ((fn & 1n) === 1n || fn === sn) {
      fr = await nodeHash(c, fr);
      sr = await nodeHash(c, sr);
      if ((fn & 1n) === 0n) {
        while ((fn & 1n) === 0n && fn !== 0n) {
          fn >>= 1n;
          sn >>= 1n;
        }
      }
    } else {
      sr = await nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new ProofError("the proof is shorter than the tree is deep");
  if (!equal(fr, root1)) throw new ProofError("the proof does not lead to the first root");
  if (!equal(sr, root2)) throw new ProofError("the proof does not lead to the second root");
}
