package cfg

import (
	"errors"
	"math"
	"testing"
)

// FuzzBuildCFG: Build never panics or hangs; it returns a *CodeError or a CFG that satisfies
// every structural invariant, and every sample inside the code range attributes.
func FuzzBuildCFG(f *testing.F) {
	for _, s := range []string{
		"f30f1efa31c0c3", // endbr64; xor; ret
		"ffcf75fcc3",     // loop to the entry
		"85ff7405e800000000ffc0c390cccccc",
		"0f8500010000e900ffffff", // tail calls
		"3effe090c3",             // jump table
		"c5f877c3",               // vzeroupper
		"eb01b801000000c3",       // a jump over bytes that decode otherwise from where it lands
		"7401b8c3000000c3",       // jump into an instruction
		"85c07407eb0d0000000080ba0100000001d090c3", // data between blocks
		"31c006c3",   // undecodable
		"31c0e80000", // truncated
		"4885d27f0331c0c331c931c0eb1666904f8d4440014c8904ce4c01c048ffc14839d17d264c8b04cf41f6c00175e24981f8e90300007c0949d1e8ebd90f1f400048c704ce00000000ebcfc3",
	} {
		f.Add(mustHex(f, s), uint64(0x401000))
	}
	f.Add([]byte{0xf3}, uint64(0))
	f.Add([]byte{0xeb, 0xfe}, ^uint64(0)-1)
	f.Fuzz(func(t *testing.T, code []byte, addr uint64) {
		if addr+uint64(len(code)) < addr {
			return // wraps: callers (ReadJSON) reject this
		}
		g, err := Build(code, addr)
		if err != nil {
			var ce *CodeError
			if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > len(code) {
				t.Fatalf("error %v: want a *CodeError with an offset in the code", err)
			}
			return
		}
		checkInvariants(t, g)
		samples := map[uint64]uint64{}
		for a := g.Start; a < g.End; a++ {
			samples[a] = 1
		}
		at, err := AttributeSamples(g, samples)
		if err != nil {
			t.Fatal(err)
		}
		if at.Total != uint64(len(code)) {
			t.Fatalf("attributed %d of %d samples", at.Total, len(code))
		}
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		// Pooled weights are finite and not negative, and calls lie in their blocks.
		for b, w := range at.Pooled(g) {
			if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
				t.Fatalf("block %d: pooled weight %v", b, w)
			}
		}
		for _, c := range g.Calls {
			if c.Block < 0 || c.Block >= len(g.Blocks) || c.Addr < g.Blocks[c.Block].Start || c.Addr >= g.Blocks[c.Block].End {
				t.Fatalf("call %+v outside its block", c)
			}
		}
	})
}
