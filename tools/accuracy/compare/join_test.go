package compare

import (
	"math"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/tools/accuracy/oracle"
)

// loop is a ten-iteration counting loop:
//
//	0: xor eax,eax
//	2: inc eax          ; loop head
//	4: cmp eax,10
//	7: jne 2
//	9: ret
var loop = []byte{0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x0a, 0x75, 0xf9, 0xc3}

// exactLoop is the oracle's profile of one call of loop, recorded at 0x1000.
func exactLoop() *oracle.Result {
	const a = 0x1000
	return &oracle.Result{Functions: []oracle.Function{{
		Name: "loop", Addr: a, Size: uint64(len(loop)), Code: loop, Entries: 1, Instructions: 32,
		Counts: map[oracle.Addr]uint64{a: 1, a + 2: 10, a + 4: 10, a + 7: 10, a + 9: 1},
		Jumps:  []oracle.Jump{{From: a + 7, To: a + 2, Count: 9, Conditional: true, Executed: 10}},
		Fallthroughs: []oracle.Edge{
			{From: a, To: a + 2, Count: 1}, {From: a + 2, To: a + 4, Count: 10},
			{From: a + 4, To: a + 7, Count: 10}, {From: a + 7, To: a + 9, Count: 1},
		},
	}, {
		Name: "gone", Addr: 0x3000, Size: 1, Code: []byte{0xc3}, Instructions: 5,
		Counts: map[oracle.Addr]uint64{0x3000: 5},
	}, {
		Name: "changed", Addr: 0x4000, Size: 1, Code: []byte{0xc3}, Instructions: 7,
		Counts: map[oracle.Addr]uint64{0x4000: 7},
	}}}
}

// sampled is a capture of loop at addr with the given samples per offset.
func sampled(addr uint64, samples ...profileio.OffsetCount) *profileio.CaptureObject {
	return &profileio.CaptureObject{
		Object:  codeobj.Object{Name: "loop", Addr: addr, Size: uint64(len(loop)), Code: loop},
		Samples: samples,
	}
}

func TestJoin(t *testing.T) {
	c := &profileio.Capture{Objects: []*profileio.CaptureObject{
		sampled(0x2000, profileio.OffsetCount{Offset: 2, Count: 30}, profileio.OffsetCount{Offset: 9, Count: 1}),
		sampled(0x9000, profileio.OffsetCount{Offset: 2, Count: 6}),
		{Object: codeobj.Object{Name: "changed", Addr: 0x5000, Size: 1, Code: []byte{0x90}}},
	}}
	funcs, skipped := Join(exactLoop(), c, reestimate.Options{})
	if len(funcs) != 1 || funcs[0].Name != "loop" {
		t.Fatalf("joined %+v, want loop only", funcs)
	}
	f := funcs[0]
	if got := f.Samples[2]; got != 36 {
		t.Errorf("samples at offset 2: %d, want 36 (merged over both processes)", got)
	}
	if f.Sampled == nil || f.Sampled.Addr != 0x2000 {
		t.Errorf("sampled object %+v, want the one at 0x2000", f.Sampled)
	}
	if want := []float64{1, 10, 1}; !equal(f.TrueBlocks, want) {
		t.Errorf("exact blocks %v, want %v", f.TrueBlocks, want)
	}
	// Edges in CFG order: entry→head (fall-through), head→head (taken), head→ret (not taken).
	want := map[[2]int]float64{{0, 1}: 1, {1, 1}: 9, {1, 2}: 1}
	for i, e := range f.CFG.Edges {
		if w := want[[2]int{e.From, e.To}]; f.TrueEdges[i] != w {
			t.Errorf("exact edge %d→%d = %g, want %g", e.From, e.To, f.TrueEdges[i], w)
		}
	}
	reasons := map[string]string{}
	for _, s := range skipped {
		reasons[s.Name] = s.Reason
	}
	if len(skipped) != 2 || reasons["gone"] == "" || reasons["changed"] == "" {
		t.Errorf("unjoined %+v, want gone (not sampled) and changed (other code)", skipped)
	}
}

func TestScore(t *testing.T) {
	// The loop head drew 36 samples over 3 instructions (12 a block), the return 1, the
	// entry none: raw shares 0, 12/13, 1/13 against exact 1/12, 10/12, 1/12.
	c := &profileio.Capture{Objects: []*profileio.CaptureObject{
		sampled(0x2000, profileio.OffsetCount{Offset: 2, Count: 36}, profileio.OffsetCount{Offset: 9, Count: 1}),
	}}
	funcs, _ := Join(exactLoop(), c, reestimate.Options{})
	raw := Score(funcs, Raw)
	if want := 0.0 + 10.0/12 + 1.0/13; math.Abs(raw.Blocks-want) > 1e-9 {
		t.Errorf("raw block overlap %g, want %g", raw.Blocks, want)
	}
	if !math.IsNaN(raw.Edges) {
		t.Errorf("raw edge overlap %g, want NaN (block averages know no edges)", raw.Edges)
	}
	// Repair must give the entry block flow (it is on every path), and conserve flow: with
	// a cheap increase the entry rises to the return's count.
	opt := reestimate.Options{IncreaseCost: 1, DecreaseCost: 20}
	rep := Score(funcs, Repaired(reestimate.Options{IncreaseCost: 1, DecreaseCost: 20, Weighting: reestimate.BlockAverages}))
	if !(rep.Blocks > raw.Blocks) {
		t.Errorf("repaired block overlap %g not above raw %g", rep.Blocks, raw.Blocks)
	}
	if math.IsNaN(rep.Edges) || rep.Edges < 0.9 {
		t.Errorf("repaired edge overlap %g, want ≥ 0.9", rep.Edges)
	}
	if len(rep.Functions) != 1 || rep.Functions[0].Samples != 37 || rep.Functions[0].Instructions != 32 {
		t.Errorf("function scores %+v", rep.Functions)
	}
	// profd's repair pools the entry's and the return's samples (they run once a call
	// each): both get the return's sample over their instructions.
	est, err := Repaired(opt)(&funcs[0])
	if err != nil {
		t.Fatal(err)
	}
	if b := est.Blocks; b[0] != b[2] || b[0] == 0 || b[1] <= b[0] {
		t.Errorf("pooled repair gives blocks %v, want entry = return > 0 and the loop above them", b)
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
