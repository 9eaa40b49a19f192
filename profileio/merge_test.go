package profileio

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"github.com/profd/profd/codeobj"
)

// TestMergeCaptures merges the test capture with a copy of itself as another process: the
// result writes and reads back, holds both processes' samples, and its second half's stacks
// name the second half's objects.
func TestMergeCaptures(t *testing.T) {
	a := expectedCapture(len(testCaptureSteps()))
	b := expectedCapture(len(testCaptureSteps()))
	m := MergeCaptures([]*Capture{a, b})
	if len(m.Objects) != 2*len(a.Objects) || len(m.Stacks) != 2*len(a.Stacks) || len(m.Processes) != 2*len(a.Processes) {
		t.Fatalf("merged %d objects, %d stacks, %d processes", len(m.Objects), len(m.Stacks), len(m.Processes))
	}
	for i, o := range m.Objects {
		if o.ID != ObjectID(i) {
			t.Fatalf("object %d has ID %d", i, o.ID)
		}
	}
	n := ObjectID(len(a.Objects))
	for i, st := range m.Stacks[len(a.Stacks):] {
		for j, f := range st.Frames {
			if want := a.Stacks[i].Frames[j]; f.JIT() && (f.Object != want.Object+n || m.Objects[f.Object].Object.Name != a.Objects[want.Object].Object.Name) {
				t.Errorf("stack %d frame %d: object %d, want %d", i, j, f.Object, want.Object+n)
			}
		}
	}
	if a.Stacks[0].Frames[0].Object != 1 {
		t.Error("MergeCaptures changed its input's stacks")
	}
	jitA, outA := a.TotalSamples()
	jitM, outM := m.TotalSamples()
	if jitM != 2*jitA || outM != 2*outA {
		t.Errorf("merged totals %d, %d; want twice %d, %d", jitM, outM, jitA, outA)
	}
	var buf bytes.Buffer
	if err := WriteCapture(&buf, m); err != nil {
		t.Fatal(err)
	}
	back, err := ReadCapture(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Stacks, m.Stacks) || len(back.Objects) != len(m.Objects) {
		t.Error("merged capture does not read back the same")
	}
}

// TestMergeCapturesSharesFrames: a call chain whose frames keep their object numbers (the
// first capture's, and any chain without a JIT frame) is not copied: a group's past, merged
// into its capture at every flush, would be copied whole each time. Chains renumbered are
// copies, and the inputs keep theirs.
func TestMergeCapturesSharesFrames(t *testing.T) {
	a, b := groupCapture(1, 100), groupCapture(2, 100)
	m := MergeCaptures([]*Capture{a, b})
	for i, st := range m.Stacks {
		from, k := a, i
		if i >= len(a.Stacks) {
			from, k = b, i-len(a.Stacks)
		}
		in := from.Stacks[k]
		jit := slices.ContainsFunc(in.Frames, Frame.JIT)
		if shared, want := &st.Frames[0] == &in.Frames[0], from == a || !jit; shared != want {
			t.Errorf("chain %d of pid %d (JIT frames %v): frames shared %v, want %v", k, st.Pid, jit, shared, want)
		}
	}
	for _, st := range b.Stacks {
		if f := st.Frames[0]; f.JIT() && f.Object >= ObjectID(len(b.Objects)) {
			t.Fatalf("MergeCaptures renumbered its input's frame: object %d of %d", f.Object, len(b.Objects))
		}
	}
}

// groupCapture is a capture of process pid with chains chains of 24 frames, every other
// one with a JIT leaf among four code objects, as a host's group holds them.
func groupCapture(pid uint32, chains int) *Capture {
	c := &Capture{Version: CaptureVersion, Meta: testCaptureMeta()}
	for i := range 4 {
		c.Objects = append(c.Objects, &CaptureObject{ID: ObjectID(i), Pid: pid,
			Object:  codeobj.Object{Name: "fn", Addr: 0x1000 * uint64(i+1), Size: 0x100},
			Samples: []OffsetCount{{Offset: 4, Count: 1}}})
	}
	for i := range chains {
		st := StackSample{Pid: pid, Tid: pid, Comm: "sh", Count: uint64(i + 1)}
		for j := range 24 {
			f := Frame{Object: NoObject, Address: 0x400000 + uint64(i*64+j), Mapping: "/bin/sh", Function: "main"}
			if j == 0 && i%2 == 0 {
				f = Frame{Object: ObjectID(i % 4), Offset: 4, Address: 0x1000*uint64(i%4+1) + 4}
			}
			st.Frames = append(st.Frames, f)
		}
		c.Stacks = append(c.Stacks, st)
	}
	return c
}

// BenchmarkMergeGroup merges what a group's flush merges: its past (the processes that
// exited, 20 000 chains), and four live processes of 2 000 chains each.
func BenchmarkMergeGroup(b *testing.B) {
	cs := []*Capture{groupCapture(1, 20000)}
	for pid := range uint32(4) {
		cs = append(cs, groupCapture(pid+2, 2000))
	}
	b.ReportAllocs()
	for b.Loop() {
		MergeCaptures(cs)
	}
}
