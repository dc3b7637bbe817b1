// Package evidence makes audit records verifiable (docs/design.md,
// "Verifiable records", issue 26): every record a process writes is a leaf
// of that process's RFC 6962 Merkle tree, and signed checkpoints (C2SP
// tlog-checkpoint notes, the format of the Go checksum database) commit to
// the tree's size and root.
//
//   - keys.go: the signed-note key pair (golang.org/x/mod/sumdb/note,
//     Ed25519) that egressd keygen writes and the flags read.
//   - log.go: the writer's side. A Log has an id unique across restarts and
//     replicas; Seal appends log, seq and prev to a record's JSON line and
//     adds the line's leaf hash to a compact range (memory O(log n), from
//     github.com/transparency-dev/merkle); Checkpoint signs the current
//     size and root. The caller serializes Seal and Checkpoint at the one
//     point where bytes are queued for the sinks, so that seq order is
//     stream order.
//   - checkpoint.go: the checkpoint note's body, and its parser (fuzzed).
//   - verify.go: the verifier's side, streaming, per log, in memory that
//     does not grow with the number of records (see Verifier).
//   - proof.go: RFC 6962 inclusion proofs of one record against a signed
//     checkpoint, and their check.
//
// No cryptography is written here: hashing is the merkle module's rfc6962
// hasher (hash.go), signing and verifying are note's. The writer's side
// calls crypto/sha256 with RFC 6962's two prefixes through one reused
// digest (treeHasher), which saves the hasher's five allocations per
// record; a test holds it equal to the module's hasher.
//
// It imports no other package of this module (it works on bytes), so that
// audit, auditlog and cmd can all use it; internal/archtest holds that line.
package evidence
