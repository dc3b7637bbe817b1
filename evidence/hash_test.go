package evidence

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/transparency-dev/merkle/compact"
)

// TestTreeHasherIsRFC6962: the writer's hashing gives exactly the merkle
// module's RFC 6962 hashes, leaf by leaf and root by root, across many
// arenas.
func TestTreeHasherIsRFC6962(t *testing.T) {
	h := newTreeHasher()
	mine := (&compact.RangeFactory{Hash: h.children}).NewEmptyRange(0)
	ref := rangeFactory.NewEmptyRange(0)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		data := make([]byte, r.IntN(700))
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		var leaf [32]byte
		h.leaf(&leaf, data)
		want := hasher.HashLeaf(data)
		if !bytes.Equal(leaf[:], want) {
			t.Fatalf("leaf %d: %x, want %x", i, leaf, want)
		}
		if err := mine.Append(h.keep(leaf[:]), nil); err != nil {
			t.Fatal(err)
		}
		if err := ref.Append(want, nil); err != nil {
			t.Fatal(err)
		}
		if i%97 == 0 || i == 4999 {
			a, _ := mine.GetRootHash(nil)
			b, _ := ref.GetRootHash(nil)
			if !bytes.Equal(a, b) {
				t.Fatalf("root after %d leaves: %x, want %x", i+1, a, b)
			}
		}
	}
}
