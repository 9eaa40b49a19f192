package profgen

import (
	"reflect"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
)

// TestStackSitesSplitCalls: the (caller, callee) pairs of stacks go to the indirect call whose
// instruction holds the caller's frame offset, and split its count by their samples, but for
// kernel frames and leaves sampled outside their own frame; a direct call keeps its static
// target; a call with neither is left out.
func TestStackSitesSplitCalls(t *testing.T) {
	objs := []*profileio.CaptureObject{
		{ID: 0, Pid: 7, Object: codeobj.Object{Name: "drive", Addr: 0x1000, Size: 0x100}},
		{ID: 1, Pid: 7, Object: codeobj.Object{Name: "op_mix", Addr: 0x2000, Size: 0x40}},
		{ID: 2, Pid: 7, Object: codeobj.Object{Name: "op_add", Addr: 0x2040, Size: 0x40,
			// push %rbp; mov %rsp,%rbp; ...; pop %rbp; ret
			Code: []byte{0x55, 0x48, 0x89, 0xe5, 0x90, 0x90, 0x90, 0x90, 0x5d, 0xc3}}},
		// drive again, as a second record of the same code: its frames count for the first.
		{ID: 3, Pid: 7, Object: codeobj.Object{Name: "drive", Addr: 0x1000, Size: 0x100}},
	}
	frame := func(obj profileio.ObjectID, off uint64) profileio.Frame {
		return profileio.Frame{Object: obj, Offset: off, Address: objs[obj].Object.Addr + off}
	}
	c := &profileio.Capture{Objects: objs, Stacks: []profileio.StackSample{
		{Pid: 7, Count: 9, Frames: []profileio.Frame{frame(1, 4), frame(0, 0x5c)}},
		{Pid: 7, Count: 1, Frames: []profileio.Frame{frame(2, 8), frame(3, 0x5c)}},
		{Pid: 7, Count: 5, Frames: []profileio.Frame{{Object: profileio.NoObject, Function: "memcpy"}, frame(0, 0x70)}},
		{Pid: 7, Count: 3, Frames: []profileio.Frame{{Object: profileio.NoObject}, frame(0, 0x80)}}, // unnamed callee
		// Not calls: a kernel frame over the instruction it interrupted; op_add sampled
		// before its frame is set up and at its ret, whose next frames are drive's caller's.
		{Pid: 7, Count: 50, Frames: []profileio.Frame{{Object: profileio.NoObject, Function: "asm_exc_page_fault", Mapping: "[kernel]"}, frame(0, 0x5c)}},
		{Pid: 7, Count: 40, Frames: []profileio.Frame{frame(2, 0), frame(0, 0x5c)}},
		{Pid: 7, Count: 40, Frames: []profileio.Frame{frame(2, 1), frame(0, 0x5c)}},
		{Pid: 7, Count: 40, Frames: []profileio.Frame{frame(2, 9), frame(0, 0x5c)}},
		// A direct call keeps its one target whatever a stack says.
		{Pid: 7, Count: 60, Frames: []profileio.Frame{frame(2, 5), frame(0, 0x66)}},
	}}
	sites := stackSites(c)[codeOf(objs[0])]
	calls := []directCall{
		{offset: 0x58, count: 200},                 // indirect: op_mix 9, op_add 1
		{offset: 0x63, target: 0x2000, count: 200}, // direct, no stack: static target
		{offset: 0x6e, count: 50},                  // indirect into native code
		{offset: 0x7e, count: 30},                  // indirect, its callee unnamed: left out
		{offset: 0x90, target: 0x9999, count: 10},  // direct to code no object holds: left out
	}
	got := newCalleeIndex(c).name(7, calls, sites)
	want := []CallCount{
		{Offset: 0x58, Callee: "op_add", Count: 20}, {Offset: 0x58, Callee: "op_mix", Count: 180},
		{Offset: 0x63, Callee: "op_mix", Count: 200},
		{Offset: 0x6e, Callee: "memcpy", Count: 50},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("calls:\n%+v\nwant\n%+v", got, want)
	}
}
