package profileio

import (
	"bytes"
	"reflect"
	"slices"
	"testing"
)

// movedCapture is the test capture as another run of the same processes would have it:
// pids shifted by dpid, native mappings loaded dstart higher.
func movedCapture(dpid uint32, dstart uint64) *Capture {
	c := expectedCapture(len(testCaptureSteps()))
	for i := range c.Processes {
		c.Processes[i].Pid += dpid
	}
	for _, o := range c.Objects {
		o.Pid += dpid
	}
	for i := range c.Unmapped {
		c.Unmapped[i].Pid += dpid
	}
	for i := range c.Unnamed {
		c.Unnamed[i].Pid += dpid
	}
	for _, m := range c.Native {
		m.Pid += dpid
		m.Start += dstart
		m.Limit += dstart
		for i := range m.Samples {
			m.Samples[i].Address += dstart
		}
		m.Inlined = map[uint64][]string{m.Samples[0].Address: {"heap_getattr"}}
		m.Lines = map[uint64][]SourceLine{m.Samples[0].Address: {{"heaptuple.c", 10}, {"execTuples.c", 20}}}
	}
	for i := range c.Stacks {
		c.Stacks[i].Pid += dpid
	}
	return c
}

func writeCaptureBytes(t *testing.T, c *Capture) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteCapture(&buf, c); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFoldProcesses folds two runs' processes but one (pid 300) into FoldedPid: every
// sample is kept, the processes' native samples of one file part at one mapping's
// addresses, their unnamed samples outside code; the input is unchanged, and the result
// reads back as written.
func TestFoldProcesses(t *testing.T) {
	c := MergeCaptures([]*Capture{movedCapture(0, 0), movedCapture(1000, 0x10000000)})
	before := writeCaptureBytes(t, c)
	jit, outside := c.TotalSamples()
	unnamed := c.UnnamedSamples()
	keep := uint32(300)
	f := FoldProcesses(c, func(pid uint32) bool { return pid != keep }, Process{Command: "lli-14"})

	if !bytes.Equal(writeCaptureBytes(t, c), before) {
		t.Error("FoldProcesses changed its input")
	}
	fj, fo := f.TotalSamples()
	var keptUnnamed uint64
	for _, u := range c.Unnamed {
		if u.Pid == keep {
			keptUnnamed += u.Count
		}
	}
	if fj != jit || fo != outside+unnamed-keptUnnamed || f.UnnamedSamples() != keptUnnamed {
		t.Errorf("folded totals %d in code, %d outside, %d unnamed; want %d, %d, %d", fj, fo, f.UnnamedSamples(),
			jit, outside+unnamed-keptUnnamed, keptUnnamed)
	}
	var pids []uint32
	for _, p := range f.Processes {
		pids = append(pids, p.Pid)
	}
	if !reflect.DeepEqual(pids, []uint32{FoldedPid, keep}) || f.Processes[0].Command != "lli-14" {
		t.Errorf("processes %v (the folded one %+v), want %d and %d", pids, f.Processes[0], FoldedPid, keep)
	}
	for _, o := range f.Objects {
		if want := map[bool]uint32{true: keep, false: FoldedPid}[c.Objects[o.ID].Pid == keep]; o.Pid != want {
			t.Errorf("object %d of pid %d is under pid %d, want %d", o.ID, c.Objects[o.ID].Pid, o.Pid, want)
		}
	}
	// The test capture's one native mapping, of pid 100, in both runs: one mapping, at the
	// first run's addresses, with twice its samples.
	var folded []*NativeMapping
	for _, m := range f.Native {
		if m.Pid == FoldedPid {
			folded = append(folded, m)
		}
	}
	one := c.Native[0]
	if len(folded) != 1 || folded[0].Start != one.Start || len(folded[0].Samples) != len(one.Samples) {
		t.Fatalf("folded native mappings %+v, want one like %+v", folded, one)
	}
	if !reflect.DeepEqual(folded[0].Inlined, one.Inlined) {
		t.Errorf("folded inlined calls %v, want %v", folded[0].Inlined, one.Inlined)
	}
	if !reflect.DeepEqual(folded[0].Lines, one.Lines) {
		t.Errorf("folded source positions %v, want %v", folded[0].Lines, one.Lines)
	}
	for i, s := range folded[0].Samples {
		if s.Address != one.Samples[i].Address || s.Count != 2*one.Samples[i].Count || s.Function != one.Samples[i].Function {
			t.Errorf("folded native sample %+v, want %+v twice", s, one.Samples[i])
		}
	}
	for _, st := range f.Stacks {
		if st.Pid != FoldedPid && st.Pid != keep {
			t.Errorf("a chain of pid %d was not folded", st.Pid)
		}
	}

	back, err := ReadCapture(bytes.NewReader(writeCaptureBytes(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Unmapped, f.Unmapped) || !reflect.DeepEqual(back.Native, f.Native) ||
		!reflect.DeepEqual(back.Unnamed, f.Unnamed) || !reflect.DeepEqual(back.Stacks, f.Stacks) {
		t.Error("the folded capture does not read back as it was written")
	}

	// Folding again folds into what is folded already.
	all := FoldProcesses(f, func(uint32) bool { return true }, Process{Command: "lli-14"})
	aj, ao := all.TotalSamples()
	if len(all.Processes) != 1 || aj != jit || ao != outside+unnamed || len(all.Unnamed) != 0 {
		t.Errorf("folded again: %d processes, totals %d, %d, %d unnamed; want 1, %d, %d, 0", len(all.Processes), aj, ao,
			len(all.Unnamed), jit, outside+unnamed)
	}
	for i := 1; i < len(all.Unmapped); i++ {
		if all.Unmapped[i-1].Mapping >= all.Unmapped[i].Mapping {
			t.Errorf("folded again, the counts outside code are not one per mapping: %+v", all.Unmapped)
		}
	}
}

// TestFoldProcessesMergesChains: the folded processes' chains are one per thread name and
// frames, a frame outside JIT code matched by its mapping and function wherever ASLR put
// it.
func TestFoldProcessesMergesChains(t *testing.T) {
	chain := func(pid uint32, fn string, named, unnamed uint64, n uint64) StackSample {
		return StackSample{Pid: pid, Tid: pid, Comm: "sh", Count: n, Frames: []Frame{
			{Object: NoObject, Address: named, Function: fn, Mapping: "/bin/sh"},
			{Object: NoObject, Address: unnamed, Mapping: "/bin/sh"},
		}}
	}
	c := &Capture{Version: CaptureVersion, Stacks: []StackSample{
		chain(1, "eval", 0x5555_0000_1000, 0x5555_0000_2000, 3),
		chain(2, "eval", 0x5566_0000_1000, 0x5566_0000_2000, 4),
		chain(3, "expand", 0x5577_0000_1000, 0x5577_0000_2000, 5),
		chain(4, "eval", 0x5588_0000_1000, 0x5588_0000_2000, 6),
	}}
	f := FoldProcesses(c, func(pid uint32) bool { return pid != 4 }, Process{Command: "sh"})
	want := []StackSample{chain(FoldedPid, "eval", 0x5555_0000_1000, 0x5555_0000_2000, 7),
		chain(FoldedPid, "expand", 0x5577_0000_1000, 0x5577_0000_2000, 5), chain(4, "eval", 0x5588_0000_1000, 0x5588_0000_2000, 6)}
	want[0].Tid, want[1].Tid = 0, 0
	if !reflect.DeepEqual(f.Stacks, want) {
		t.Errorf("folded chains\n%+v\nwant\n%+v", f.Stacks, want)
	}
	if c.Stacks[1].Pid != 2 || c.Stacks[0].Count != 3 {
		t.Error("FoldProcesses changed its input's chains")
	}

	// Where the compiler inlined a call into eval in process 2 but not where process 1 ran
	// it, the two chains stay apart: each keeps its own lines.
	c.Native = []*NativeMapping{
		{Pid: 1, File: "/bin/sh", Start: 0x5555_0000_0000, Limit: 0x5555_0001_0000},
		{Pid: 2, File: "/bin/sh", Start: 0x5566_0000_0000, Limit: 0x5566_0001_0000,
			Inlined: map[uint64][]string{0x5566_0000_1000: {"skip_blanks"}}},
	}
	f = FoldProcesses(c, func(pid uint32) bool { return pid != 4 }, Process{Command: "sh"})
	var counts []uint64
	for _, st := range f.Stacks {
		if st.Pid == FoldedPid && st.Frames[0].Function == "eval" {
			counts = append(counts, st.Count)
		}
	}
	if !slices.Equal(counts, []uint64{3, 4}) {
		t.Errorf("folded chains through eval count %v, want 3 (no call inlined) and 4 (skip_blanks inlined)", counts)
	}
	// So do chains whose frames are at other lines of one function.
	c.Native[1].Inlined = nil
	c.Native[0].Lines = map[uint64][]SourceLine{0x5555_0000_1000: {{"eval.c", 7}}}
	c.Native[1].Lines = map[uint64][]SourceLine{0x5566_0000_1000: {{"eval.c", 9}}}
	f = FoldProcesses(c, func(pid uint32) bool { return pid != 4 }, Process{Command: "sh"})
	counts = counts[:0]
	for _, st := range f.Stacks {
		if st.Pid == FoldedPid && st.Frames[0].Function == "eval" {
			counts = append(counts, st.Count)
		}
	}
	if !slices.Equal(counts, []uint64{3, 4}) {
		t.Errorf("folded chains through eval count %v, want 3 (line 7) and 4 (line 9)", counts)
	}
}
