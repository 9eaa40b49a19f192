package profileio

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// inlinedCapture writes a capture whose native mapping names inlined calls at two addresses
// (one sampled, one a frame's), over two AddNative calls, with an address no mapping holds
// and a chain longer than a capture keeps.
func inlinedCapture(t testing.TB) ([]byte, *Capture) {
	t.Helper()
	long := make([]string, MaxInlinedCalls+3)
	for i := range long {
		long[i] = "main.f" + strings.Repeat("x", i%7)
	}
	m := func(samples []NativeSample, inlined map[uint64][]string) *NativeMapping {
		return &NativeMapping{Pid: 7, File: "/usr/bin/gohot", Start: 0x400000, Limit: 0x500000, Samples: samples, Inlined: inlined}
	}
	first := m([]NativeSample{{0x401000, "main.mixInts", 5}, {0x401010, "main.mixInts", 2}},
		map[uint64][]string{0x401000: {"main.step"}, 0x600000: {"main.gone"}})
	second := m([]NativeSample{{0x401020, "main.mixInts", 1}},
		map[uint64][]string{0x401020: long, 0x402000: {"fmt.Sprint", "main.outer"}})
	stacks := []StackSample{{Pid: 7, Tid: 7, Comm: "gohot", Count: 5, Frames: []Frame{
		{Object: NoObject, Address: 0x401000, Function: "main.mixInts", Mapping: "/usr/bin/gohot"},
		{Object: NoObject, Address: 0x402000, Function: "main.outer", Mapping: "/usr/bin/gohot"}}}}
	var buf bytes.Buffer
	cw, err := NewCaptureWriter(&buf, testCaptureMeta())
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{cw.AddProcess(Process{Pid: 7, Command: "gohot"}), cw.AddNative(first), cw.AddNative(second),
		cw.AddStacks(stacks), cw.Close(CaptureEnd{EndNs: 1})} {
		if err != nil {
			t.Fatal(err)
		}
	}
	want := m([]NativeSample{{0x401000, "main.mixInts", 5}, {0x401010, "main.mixInts", 2}, {0x401020, "main.mixInts", 1}},
		map[uint64][]string{0x401000: {"main.step"}, 0x401020: long[:MaxInlinedCalls], 0x402000: {"fmt.Sprint", "main.outer"}})
	return buf.Bytes(), &Capture{Native: []*NativeMapping{want}, Stacks: stacks}
}

// TestCaptureInlined reads back the inlined calls a capture was written with: by address,
// innermost first, over the mapping's sections, cut to MaxInlinedCalls, an address outside
// the mapping dropped; written again, the same. The pprof profile puts them in their
// locations' lines, innermost first, the function they were inlined into last.
func TestCaptureInlined(t *testing.T) {
	file, want := inlinedCapture(t)
	c, err := ReadCapture(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Native) != 1 || !reflect.DeepEqual(c.Native[0].Inlined, want.Native[0].Inlined) {
		t.Fatalf("inlined calls read back: %+v, want %+v", c.Native, want.Native[0].Inlined)
	}
	c2, err := ReadCapture(bytes.NewReader(writeCaptureBytes(t, c)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c2.Native, c.Native) {
		t.Errorf("written again, read back: %+v, want %+v", c2.Native, c.Native)
	}

	for _, stacks := range []bool{false, true} {
		in := *c
		if !stacks {
			in.Stacks = nil
		}
		p, err := Pprof(&in)
		if err != nil {
			t.Fatal(err)
		}
		lines := map[uint64][]string{} // by address
		for _, l := range p.Location {
			for _, ln := range l.Line {
				lines[l.Address] = append(lines[l.Address], ln.Function.Name)
			}
		}
		for addr, want := range map[uint64][]string{0x401000: {"main.step", "main.mixInts"}, 0x401010: {"main.mixInts"},
			0x402000: {"fmt.Sprint", "main.outer", "main.outer"}} {
			if (addr == 0x402000) != stacks && addr != 0x401000 {
				continue // a frame's address is on the chains only, a sample's without them
			}
			if got := lines[addr]; !slices.Equal(got, want) {
				t.Errorf("stacks %v: location at %#x has lines %q, want %q", stacks, addr, got, want)
			}
		}
	}
}
