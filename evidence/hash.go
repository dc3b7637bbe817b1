package evidence

import (
	"crypto/sha256"
	"hash"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

// hasher is RFC 6962's SHA-256 tree hasher: proofs, the verifier and
// every check use it.
var hasher = rfc6962.DefaultHasher

// rangeFactory makes compact ranges hashed as RFC 6962 trees.
var rangeFactory = &compact.RangeFactory{Hash: hasher.HashChildren}

// arenaSize is how many bytes of interior node hashes a treeHasher carves
// from one allocation: 128 nodes.
const arenaSize = 128 * sha256.Size

// treeHasher computes the same RFC 6962 hashes as hasher (SHA-256 with the
// leaf prefix 0x00 and the node prefix 0x01, from crypto/sha256; held
// equal by TestTreeHasherIsRFC6962) for one Log (the writer) or one
// Verifier, without hasher's allocations per call: one digest reused, the leaf hash into the
// caller's array, interior nodes carved from an arena (a compact range
// keeps at most 64 of them alive, so at most 64 arenas stay reachable).
// The A/B is bench/evidence.md's BenchmarkSeal. Not safe for concurrent
// use: the Log's caller serializes Seal and Checkpoint, a Verifier is used
// by one goroutine.
type treeHasher struct {
	d      hash.Hash
	prefix [2]byte // rfc6962.RFC6962LeafHashPrefix, RFC6962NodeHashPrefix
	arena  []byte
}

func newTreeHasher() *treeHasher {
	return &treeHasher{d: sha256.New(), prefix: [2]byte{rfc6962.RFC6962LeafHashPrefix, rfc6962.RFC6962NodeHashPrefix}}
}

// leaf sets dst to the RFC 6962 leaf hash of data.
func (h *treeHasher) leaf(dst *[32]byte, data []byte) {
	h.d.Reset()
	h.d.Write(h.prefix[:1])
	h.d.Write(data)
	h.d.Sum(dst[:0])
}

// node returns 32 bytes of the arena: a hash the range keeps.
func (h *treeHasher) node() []byte {
	if len(h.arena) < sha256.Size {
		h.arena = make([]byte, arenaSize)
	}
	out := h.arena[:0:sha256.Size]
	h.arena = h.arena[sha256.Size:]
	return out
}

// keep returns a copy of a hash that the range keeps (a leaf's).
func (h *treeHasher) keep(hash []byte) []byte { return append(h.node(), hash...) }

// children is a compact.HashFn: the RFC 6962 hash of an interior node. The
// slice it returns is the range's from then on.
func (h *treeHasher) children(left, right []byte) []byte {
	out := h.node()
	h.d.Reset()
	h.d.Write(h.prefix[1:2])
	h.d.Write(left)
	h.d.Write(right)
	return h.d.Sum(out)
}
