package evidence

import (
	"math/rand/v2"
	"testing"

	"github.com/egressd/egressd/internal/testutil"
)

// TestVerifyBlocksOutOfOrder: an untouched log read as blocks of any
// length in any order (a log engine's answer, rotated files given in any
// order) verifies. Segments then start at odd seqs and merge, which is
// where the verifier once handed the compact range a leaf slice aliasing
// its own tail, overwritten later: a false `altered` on the last record
// against the exit checkpoint, about one export run in five (issue 27).
func TestVerifyBlocksOutOfOrder(t *testing.T) {
	s, v := testutil.NoteKeys(t, "order")
	_, lines := writeLog(t, s, 3000, 500, true)
	for seed := range 50 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		var blocks [][][]byte
		for i := 0; i < len(lines); {
			n := 1 + r.IntN(700)
			blocks = append(blocks, lines[i:min(i+n, len(lines))])
			i += n
		}
		r.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
		var out [][]byte
		for _, b := range blocks {
			out = append(out, b...)
		}
		if f := findings(verifyLines(v, out)); f != "" {
			t.Fatalf("seed %d: %s", seed, f)
		}
	}
}
