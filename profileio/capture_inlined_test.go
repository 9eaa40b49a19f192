package profileio

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// inlinedCapture writes a capture whose native mapping names inlined calls at two addresses
// (one sampled, one a frame's), and source positions at three, over two AddNative calls,
// with an address no mapping holds and a chain longer than a capture keeps.
func inlinedCapture(t testing.TB) ([]byte, *Capture) {
	t.Helper()
	long := make([]string, MaxInlinedCalls+3)
	for i := range long {
		long[i] = "main.f" + strings.Repeat("x", i%7)
	}
	m := func(samples []NativeSample, inlined map[uint64][]string) *NativeMapping {
		return &NativeMapping{Pid: 7, File: "/usr/bin/gohot", Start: 0x400000, Limit: 0x500000, Samples: samples, Inlined: inlined}
	}
	longLines := make([]SourceLine, len(long)+1)
	for i := range longLines {
		longLines[i] = SourceLine{"/src/long.go", uint32(i + 1)}
	}
	hot, print := func(l uint32) SourceLine { return SourceLine{"/src/gohot.go", l} }, SourceLine{"/go/src/fmt/print.go", 300}
	lines := map[uint64][]SourceLine{0x401000: {hot(20), hot(31)}, 0x401010: {hot(33)},
		0x402000: {print, hot(40), hot(41)}, 0x401020: longLines}
	first := m([]NativeSample{{0x401000, "main.mixInts", 5}, {0x401010, "main.mixInts", 2}},
		map[uint64][]string{0x401000: {"main.step"}, 0x600000: {"main.gone"}})
	first.Lines = map[uint64][]SourceLine{0x401000: lines[0x401000], 0x401010: lines[0x401010], 0x600000: {hot(1)}}
	second := m([]NativeSample{{0x401020, "main.mixInts", 1}},
		map[uint64][]string{0x401020: long, 0x402000: {"fmt.Sprint", "main.outer"}})
	second.Lines = map[uint64][]SourceLine{0x402000: lines[0x402000], 0x401020: longLines}
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
	lines[0x401020] = longLines[:MaxInlinedCalls+1]
	want.Lines = lines
	return buf.Bytes(), &Capture{Native: []*NativeMapping{want}, Stacks: stacks}
}

// TestCaptureInlined reads back the inlined calls and source positions a capture was written
// with: by address, innermost first, over the mapping's sections, cut to MaxInlinedCalls
// (and one), an address outside the mapping dropped; written again, the same. The pprof
// profile puts them in their locations' lines, innermost first, the function they were
// inlined into last, each at its file and line.
func TestCaptureInlined(t *testing.T) {
	file, want := inlinedCapture(t)
	c, err := ReadCapture(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Native) != 1 || !reflect.DeepEqual(c.Native[0].Inlined, want.Native[0].Inlined) {
		t.Fatalf("inlined calls read back: %+v, want %+v", c.Native, want.Native[0].Inlined)
	}
	if !reflect.DeepEqual(c.Native[0].Lines, want.Native[0].Lines) {
		t.Fatalf("source positions read back: %+v, want %+v", c.Native[0].Lines, want.Native[0].Lines)
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
		for _, m := range p.Mapping {
			if m.File == "/usr/bin/gohot" && (!m.HasFilenames || !m.HasLineNumbers) {
				t.Errorf("stacks %v: mapping %+v of a file with source positions says it has none", stacks, m)
			}
		}
		lines := map[uint64][]string{} // by address
		for _, l := range p.Location {
			for _, ln := range l.Line {
				lines[l.Address] = append(lines[l.Address], fmt.Sprintf("%s %s:%d", ln.Function.Name, ln.Function.Filename, ln.Line))
			}
		}
		for addr, want := range map[uint64][]string{
			0x401000: {"main.step /src/gohot.go:20", "main.mixInts /src/gohot.go:31"},
			0x401010: {"main.mixInts /src/gohot.go:33"},
			0x402000: {"fmt.Sprint /go/src/fmt/print.go:300", "main.outer /src/gohot.go:40", "main.outer /src/gohot.go:41"},
		} {
			if (addr == 0x402000) != stacks && addr != 0x401000 {
				continue // a frame's address is on the chains only, a sample's without them
			}
			if got := lines[addr]; !slices.Equal(got, want) {
				t.Errorf("stacks %v: location at %#x has lines %q, want %q", stacks, addr, got, want)
			}
		}
	}
}
