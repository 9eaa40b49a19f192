package sampleprof

import (
	"reflect"
	"testing"
)

func TestAddMergesFunctionsOfOneName(t *testing.T) {
	p := NewProfile()
	a := &FunctionProfile{Name: "f", TotalSamples: 10, HeadSamples: 1, NoLineTable: true}
	a.AddBody(LineLocation{LineOffset: 1}, 10)
	p.Add(a)
	b := &FunctionProfile{Name: "f", TotalSamples: 5, HeadSamples: 2}
	b.AddBody(LineLocation{LineOffset: 1}, 3)
	b.AddCall(LineLocation{LineOffset: 2}, "g", 4)
	b.InlinedAt(LineLocation{LineOffset: 3, Discriminator: 1}, "h").AddBody(LineLocation{}, 7)
	p.Add(b)

	f := p.Functions["f"]
	if f != a {
		t.Fatalf("the profile does not keep the first function of a name")
	}
	if f.TotalSamples != 15 || f.HeadSamples != 3 || f.NoLineTable {
		t.Errorf("merged header: total %d head %d noLineTable %v; want 15 3 false", f.TotalSamples, f.HeadSamples, f.NoLineTable)
	}
	wantBody := map[LineLocation]uint64{{LineOffset: 1}: 13, {LineOffset: 2}: 0}
	if !reflect.DeepEqual(f.Body, wantBody) {
		t.Errorf("body %v, want %v (a call line gets a body entry)", f.Body, wantBody)
	}
	if n := f.Calls[LineLocation{LineOffset: 2}]["g"]; n != 4 {
		t.Errorf("calls to g: %d, want 4", n)
	}
	h := f.Inlined[LineLocation{LineOffset: 3, Discriminator: 1}]["h"]
	if h == nil || h.Body[LineLocation{}] != 7 {
		t.Errorf("inlined h: %+v, want 7 samples at offset 0", h)
	}
	if h == b.Inlined[LineLocation{LineOffset: 3, Discriminator: 1}]["h"] {
		t.Errorf("the merged profile shares an inlined callee with the one merged in")
	}
}

func TestSatAddSaturates(t *testing.T) {
	const maxU64 = ^uint64(0)
	for _, c := range []struct{ a, b, want uint64 }{
		{1, 2, 3},
		{maxU64 - 1, 1, maxU64},
		{maxU64, 1, maxU64},
		{maxU64, maxU64, maxU64},
	} {
		if got := SatAdd(c.a, c.b); got != c.want {
			t.Errorf("SatAdd(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	var f FunctionProfile
	f.AddBody(LineLocation{}, maxU64)
	f.AddBody(LineLocation{}, 5)
	if f.Body[LineLocation{}] != maxU64 {
		t.Errorf("AddBody wrapped: %d", f.Body[LineLocation{}])
	}
}

func TestOrders(t *testing.T) {
	p := NewProfile()
	for _, f := range []*FunctionProfile{
		{Name: "b", TotalSamples: 5}, {Name: "a", TotalSamples: 5}, {Name: "c", TotalSamples: 9},
	} {
		p.Add(f)
	}
	var names []string
	for _, f := range p.SortedFunctions() {
		names = append(names, f.Name)
	}
	if want := []string{"c", "a", "b"}; !reflect.DeepEqual(names, want) {
		t.Errorf("SortedFunctions: %v, want %v (most samples, then name)", names, want)
	}

	locs := SortedLocations(map[LineLocation]bool{
		{LineOffset: 2}: true, {LineOffset: 1, Discriminator: 3}: true, {LineOffset: 1}: true,
	})
	if want := []LineLocation{{LineOffset: 1}, {LineOffset: 1, Discriminator: 3}, {LineOffset: 2}}; !reflect.DeepEqual(locs, want) {
		t.Errorf("SortedLocations: %v, want %v", locs, want)
	}
	for i := 1; i < len(locs); i++ {
		if !locs[i-1].Less(locs[i]) {
			t.Errorf("%v.Less(%v) = false", locs[i-1], locs[i])
		}
	}

	calls := SortedCalls(nil, map[string]uint64{"x": 1, "z": 7, "y": 7})
	if want := []CallTarget{{"y", 7}, {"z", 7}, {"x", 1}}; !reflect.DeepEqual(calls, want) {
		t.Errorf("SortedCalls: %v, want %v (most calls, then name)", calls, want)
	}
}
