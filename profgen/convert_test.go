package profgen

import (
	"bytes"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/reestimate/cfgjson"
)

// example loads the bundled example function: real llc-14 machine code with perf samples.
func example(t *testing.T) cfgjson.Function {
	t.Helper()
	f, err := os.Open("../examples/reestimate/score.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	funcs, err := cfgjson.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return funcs[0]
}

// object makes a capture object of fn at addr, with one source line per block when lines is
// set, and its samples.
func object(t *testing.T, fn cfgjson.Function, name string, code []byte, lines bool) *profileio.CaptureObject {
	t.Helper()
	o := &profileio.CaptureObject{Object: codeobj.Object{Name: name, Addr: fn.Addr, Size: uint64(len(fn.Code)), Code: code}}
	if lines {
		g, err := cfg.Build(fn.Code, fn.Addr)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range g.Blocks {
			o.Object.Lines = append(o.Object.Lines, codeobj.LineEntry{Addr: b.Start, File: "score.c", Line: uint32(100 + i)})
		}
	}
	for addr, n := range fn.Samples {
		o.Samples = append(o.Samples, profileio.OffsetCount{Offset: addr - fn.Addr, Count: n})
	}
	return o
}

func total(fn cfgjson.Function) uint64 {
	var n uint64
	for _, c := range fn.Samples {
		n += c
	}
	return n
}

func TestFromCapture(t *testing.T) {
	fn := example(t)
	bad := make([]byte, len(fn.Code))
	for i := range bad {
		bad[i] = 0x06 // push es: undecodable in 64-bit mode
	}
	unsampled := object(t, fn, "cold", fn.Code, true)
	unsampled.Samples = nil
	// Past the repair's bounds: more bytes than cfg.MaxCodeBytes, more blocks than
	// cfg.MaxCodeBlocks (jne +0, each a block, then the function's own code).
	huge := object(t, fn, "huge", append(slices.Clone(fn.Code), make([]byte, cfg.MaxCodeBytes)...), true)
	branchy := object(t, fn, "branchy", append(bytes.Repeat([]byte{0x75, 0x00}, cfg.MaxCodeBlocks), fn.Code...), true)
	branchy.Object.Addr -= 2 * cfg.MaxCodeBlocks
	for i := range branchy.Samples {
		branchy.Samples[i].Offset += 2 * cfg.MaxCodeBlocks
	}
	for _, o := range []*profileio.CaptureObject{huge, branchy} {
		o.Object.Size = uint64(len(o.Object.Code))
	}
	c := &profileio.Capture{Objects: []*profileio.CaptureObject{
		object(t, fn, "repaired", fn.Code, true),
		object(t, fn, "nocode", nil, true),
		object(t, fn, "badcode", bad, true),
		object(t, fn, "nolines", fn.Code, false),
		unsampled, huge, branchy,
	}}
	prof, st := FromCapture(c, Options{})
	want := Stats{Objects: 6, Reestimated: 2, RawNoCode: 1, RawCFGError: 1, RawTooLarge: 2, NoLineTable: 1, FirstTooLarge: "huge"}
	got := st
	got.FirstError = nil
	if got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	if st.FirstError == nil {
		t.Error("no FirstError for the undecodable code")
	}
	if _, ok := prof.Functions["cold"]; ok {
		t.Error("an object without samples got a profile")
	}
	// Raw fallbacks keep every sample on its line; repair changes the counts.
	for _, name := range []string{"nocode", "badcode", "huge", "branchy"} {
		if f := prof.Functions[name]; f == nil || f.TotalSamples != total(fn) {
			t.Errorf("%s: %+v, want the raw %d samples", name, f, total(fn))
		}
	}
	rep := prof.Functions["repaired"]
	if rep == nil || len(rep.Body) == 0 {
		t.Fatalf("repaired: %+v", rep)
	}
	if rep.TotalSamples == total(fn) {
		t.Errorf("repaired total equals the raw sample total %d: no reestimation happened", total(fn))
	}
	// Without a line table the total is in the unit of the head (repaired counts), so the
	// head, one block's count, is never above it.
	if f := prof.Functions["nolines"]; f == nil || !f.NoLineTable || f.HeadSamples == 0 || f.TotalSamples < f.HeadSamples {
		t.Errorf("nolines: %+v, want NoLineTable with a head count no greater than the total", f)
	}

	rawProf, rawSt := FromCapture(c, Options{Raw: true})
	if rawSt.Reestimated != 0 || rawProf.Functions["repaired"].TotalSamples != total(fn) {
		t.Errorf("Raw: stats %+v, repaired total %d, want no reestimation and %d samples",
			rawSt, rawProf.Functions["repaired"].TotalSamples, total(fn))
	}
}

// Objects of one name (a function recompiled, or run in two processes) merge into one profile.
func TestFromCaptureMergesByName(t *testing.T) {
	fn := example(t)
	one := object(t, fn, "f", nil, true)
	c := &profileio.Capture{Objects: []*profileio.CaptureObject{one, object(t, fn, "f", nil, true)}}
	prof, _ := FromCapture(c, Options{})
	if len(prof.Functions) != 1 || prof.Functions["f"].TotalSamples != 2*total(fn) {
		t.Errorf("functions %v, want one f with %d samples", prof.Functions, 2*total(fn))
	}
}

// A direct call's count is its block's repaired count, under the name of the object of the
// same process at its target; a call to code no object holds is left out.
func TestFromCaptureDirectCalls(t *testing.T) {
	const callerAddr, calleeAddr = 0x10000, 0x20000
	rel := func(from, to uint64) []byte {
		d := uint32(int32(int64(to) - int64(from)))
		return []byte{byte(d), byte(d >> 8), byte(d >> 16), byte(d >> 24)}
	}
	// 0: mov ecx, 100; 5: loop: call callee; 10: call 0x30000 (nothing there); 15: dec ecx;
	// 17: jne loop; 19: ret
	code := []byte{0xb9, 100, 0, 0, 0, 0xe8}
	code = append(code, rel(callerAddr+10, calleeAddr)...)
	code = append(code, 0xe8)
	code = append(code, rel(callerAddr+15, 0x30000)...)
	code = append(code, 0xff, 0xc9, 0x75, 0xf2, 0xc3)
	lines := []codeobj.LineEntry{{Addr: callerAddr, File: "c.c", Line: 10}, {Addr: callerAddr + 5, File: "c.c", Line: 11},
		{Addr: callerAddr + 10, File: "c.c", Line: 12}, {Addr: callerAddr + 15, File: "c.c", Line: 13}}
	c := &profileio.Capture{Objects: []*profileio.CaptureObject{
		{Pid: 7, Object: codeobj.Object{Name: "caller", Addr: callerAddr, Size: uint64(len(code)), Code: code, Lines: lines},
			Samples: []profileio.OffsetCount{{Offset: 5, Count: 40}, {Offset: 10, Count: 40}, {Offset: 15, Count: 40}, {Offset: 17, Count: 40}}},
		{Pid: 7, Object: codeobj.Object{Name: "callee", Addr: calleeAddr, Size: 1, Code: []byte{0xc3}}},
		{Pid: 8, Object: codeobj.Object{Name: "other", Addr: 0x30000, Size: 1, Code: []byte{0xc3}}},
	}}
	prof, _ := FromCapture(c, Options{})
	f := prof.Functions["caller"]
	if f == nil {
		t.Fatal("no profile for caller")
	}
	var calls int
	for loc, targets := range f.Calls {
		for name, n := range targets {
			calls++
			if name != "callee" || loc.LineOffset != 1 || n == 0 || n != f.Body[loc] {
				t.Errorf("call at %v: %s %d times (line count %d), want callee at line offset 1 as often as its line", loc, name, n, f.Body[loc])
			}
		}
	}
	if calls != 1 {
		t.Errorf("calls %v, want one to callee (the call to pid 8's code names nothing)", f.Calls)
	}
}

// twoObjects is a capture of two objects of fn's code and samples, "first" and "second",
// the second 64 KiB above the first.
func twoObjects(t *testing.T, fn cfgjson.Function) *profileio.Capture {
	t.Helper()
	c := &profileio.Capture{Objects: []*profileio.CaptureObject{
		object(t, fn, "first", fn.Code, true),
		object(t, fn, "second", fn.Code, true),
	}}
	c.Objects[1].Object.Addr += 0x10000
	for i := range c.Objects[1].Object.Lines {
		c.Objects[1].Object.Lines[i].Addr += 0x10000
	}
	return c
}

// TestRepairCache: a conversion through a cache gives the profile a conversion without one
// gives; a second conversion of the same capture repairs nothing again, one whose samples
// changed repairs the changed object only, and Sweep lets go of what is no longer used.
func TestRepairCache(t *testing.T) {
	fn := example(t)
	c := twoObjects(t, fn)
	want, _ := FromCapture(c, Options{})
	cache := NewRepairCache()
	got, st := FromCapture(c, Options{Cache: cache})
	if !reflect.DeepEqual(got, want) || st.Cached != 0 || st.Reestimated != 2 {
		t.Fatalf("first conversion through the cache: %d cached of %d; profile equal %v", st.Cached, st.Reestimated, reflect.DeepEqual(got, want))
	}
	if got, st = FromCapture(c, Options{Cache: cache}); !reflect.DeepEqual(got, want) || st.Cached != 2 {
		t.Errorf("the same capture again: %d of %d from the cache, want 2; profile equal %v", st.Cached, st.Reestimated, reflect.DeepEqual(got, want))
	}
	cache.Sweep()
	c.Objects[1].Samples = append([]profileio.OffsetCount(nil), c.Objects[1].Samples...)
	c.Objects[1].Samples[0].Count += 50
	want, _ = FromCapture(c, Options{})
	if got, st = FromCapture(c, Options{Cache: cache}); !reflect.DeepEqual(got, want) || st.Cached != 1 {
		t.Errorf("one object's samples changed: %d from the cache, want 1; profile equal %v", st.Cached, reflect.DeepEqual(got, want))
	}
	cache.Sweep()
	if n := cache.Len(); n != 2 {
		t.Errorf("%d entries after the sweep, want the 2 the last conversion used", n)
	}
	cache.Sweep()
	if n := cache.Len(); n != 0 {
		t.Errorf("%d entries after a sweep with no conversion, want 0", n)
	}
}

// TestFromCaptureRepairBy: once Options.RepairBy has passed, objects keep their raw samples
// unless the cache holds their repair, and the conversion still holds every object.
func TestFromCaptureRepairBy(t *testing.T) {
	fn := example(t)
	c := twoObjects(t, fn)
	passed := time.Now().Add(-time.Second)
	raw, _ := FromCapture(c, Options{Raw: true})
	got, st := FromCapture(c, Options{RepairBy: passed})
	if st.RawLate != 2 || st.Reestimated != 0 || !reflect.DeepEqual(got, raw) {
		t.Errorf("stats %+v, profile equal to the raw one %v; want both objects raw, late", st, reflect.DeepEqual(got, raw))
	}

	cache := NewRepairCache()
	c1 := &profileio.Capture{Objects: c.Objects[:1]}
	FromCapture(c1, Options{Cache: cache}) // "first" repaired, in the cache
	got, st = FromCapture(c, Options{Cache: cache, RepairBy: passed})
	if st.Cached != 1 || st.Reestimated != 1 || st.RawLate != 1 {
		t.Errorf("stats %+v, want the cached object repaired and the other late", st)
	}
	repaired, _ := FromCapture(c1, Options{})
	if !reflect.DeepEqual(got.Functions["first"], repaired.Functions["first"]) || !reflect.DeepEqual(got.Functions["second"], raw.Functions["second"]) {
		t.Errorf("first %+v, second %+v: want first repaired, second raw", got.Functions["first"], got.Functions["second"])
	}
}

// TestHottestFirst: objects are converted most samples first, ties in capture order, and
// those without samples not at all.
func TestHottestFirst(t *testing.T) {
	objs := []*profileio.CaptureObject{
		{ID: 0, Samples: []profileio.OffsetCount{{Count: 5}}},
		{ID: 1},
		{ID: 2, Samples: []profileio.OffsetCount{{Count: 3}, {Offset: 4, Count: 9}}},
		{ID: 3, Samples: []profileio.OffsetCount{{Count: 5}}},
	}
	var ids []profileio.ObjectID
	for _, o := range hottestFirst(objs) {
		ids = append(ids, o.ID)
	}
	if want := []profileio.ObjectID{2, 0, 3}; !reflect.DeepEqual(ids, want) {
		t.Errorf("order %v, want %v", ids, want)
	}
}
