package profileio

import (
	"bytes"
	"reflect"
	"testing"
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
