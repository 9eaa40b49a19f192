package profileio

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/profd/profd/sampleprof"
)

// unfitProfile is a profile of V8-like names: a function whose lines call a target with a
// blank and one without, an inlined callee whose name starts with a digit, and a function
// whose name holds a tab and one whose name holds a NUL.
func unfitProfile() *sampleprof.Profile {
	p := sampleprof.NewProfile()
	f := &sampleprof.FunctionProfile{Name: "JS:*run /srv/app.js:35:13", TotalSamples: 90, HeadSamples: 3}
	f.AddBody(sampleprof.LineLocation{LineOffset: 1}, 10)
	f.AddCall(sampleprof.LineLocation{LineOffset: 1}, "JS:~cpuUsage node:internal/process/per_thread:116:20", 4)
	f.AddCall(sampleprof.LineLocation{LineOffset: 1}, "Builtin:ArrayMap", 6)
	f.AddBody(sampleprof.LineLocation{LineOffset: 2}, 7)
	f.AddCall(sampleprof.LineLocation{LineOffset: 2}, "a b", 7)
	in := f.InlinedAt(sampleprof.LineLocation{LineOffset: 3}, "inlined")
	in.AddBody(sampleprof.LineLocation{LineOffset: 0}, 5)
	in.AddCall(sampleprof.LineLocation{LineOffset: 0}, "x:1", 5)
	f.InlinedAt(sampleprof.LineLocation{LineOffset: 4}, "9lives").AddBody(sampleprof.LineLocation{LineOffset: 0}, 8)
	p.Add(f)
	p.Add(&sampleprof.FunctionProfile{Name: "tab\there", TotalSamples: 50, Body: map[sampleprof.LineLocation]uint64{{LineOffset: 0}: 50}})
	p.Add(&sampleprof.FunctionProfile{Name: "nul\x00here", TotalSamples: 5, Body: map[sampleprof.LineLocation]uint64{{LineOffset: 0}: 5}})
	return p
}

// TestFitText: the fitted profile is written and reads back with every name the text
// format holds, and without the others; the original is unchanged and still refused.
func TestFitText(t *testing.T) {
	p := unfitProfile()
	before := textFree(p)
	fitted, left := FitText(p)
	want := LeftOut{Functions: 2, CallTargets: 3, Inlined: 1, Least: "9lives"} // the least of the names
	if left != want {
		t.Errorf("left out %+v, want %+v", left, want)
	}
	if err := WriteText(&bytes.Buffer{}, p); !errors.Is(err, ErrName) {
		t.Errorf("the original profile: WriteText = %v, want ErrName", err)
	}
	if !reflect.DeepEqual(textFree(p), before) {
		t.Error("FitText changed the profile it was given")
	}
	got, err := ReadText(bytes.NewReader(textOf(t, fitted)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Functions) != 1 {
		t.Fatalf("functions %v, want the JS function alone", got.Functions)
	}
	f := got.Functions["JS:*run /srv/app.js:35:13"]
	wantCalls := map[sampleprof.LineLocation]map[string]uint64{{LineOffset: 1}: {"Builtin:ArrayMap": 6}}
	if f == nil || !reflect.DeepEqual(f.Calls, wantCalls) || f.Body[sampleprof.LineLocation{LineOffset: 2}] != 7 {
		t.Fatalf("JS function read back as %+v, want the calls %v and line 2's 7 samples", f, wantCalls)
	}
	if in := f.Inlined[sampleprof.LineLocation{LineOffset: 3}]["inlined"]; in == nil || len(in.Calls) != 0 || in.Body[sampleprof.LineLocation{}] != 5 {
		t.Errorf("inlined callee read back as %+v, want its line without the call", in)
	}
	if len(f.Inlined) != 1 || f.TotalSamples != 90 {
		t.Errorf("inlined %v, total %d; want the digit-named callee left out and the total kept", f.Inlined, f.TotalSamples)
	}
}

// TestFitExtBinary: only the NUL-named function is left out, and the rest is written.
func TestFitExtBinary(t *testing.T) {
	p := unfitProfile()
	fitted, left := FitExtBinary(p)
	if want := (LeftOut{Functions: 1, Least: "nul\x00here"}); left != want {
		t.Errorf("left out %+v, want %+v", left, want)
	}
	if _, err := AppendExtBinary(nil, p); !errors.Is(err, ErrName) {
		t.Errorf("the original profile: %v, want ErrName", err)
	}
	got, err := ReadProfile(bytes.NewReader(extBinaryOf(t, fitted)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Functions) != 2 || got.Functions["tab\there"] == nil {
		t.Errorf("functions %v, want every one but the NUL one", got.Functions)
	}
}

// TestFitKeepsAFittingProfile: a profile the format holds whole comes back as itself.
func TestFitKeepsAFittingProfile(t *testing.T) {
	p := testProfile()
	for name, fit := range map[string]func(*sampleprof.Profile) (*sampleprof.Profile, LeftOut){"text": FitText, "ext-binary": FitExtBinary} {
		if got, left := fit(p); got != p || left.Any() {
			t.Errorf("%s: a copy, or %+v left out, of a profile the format holds", name, left)
		}
	}
}

// textFree is p's functions' names, calls and inlined callees, for comparing before and after.
func textFree(p *sampleprof.Profile) map[string]string {
	m := map[string]string{}
	for name, f := range p.Functions {
		m[name] = fmtFunction(f)
	}
	return m
}

func fmtFunction(f *sampleprof.FunctionProfile) string {
	s := f.Name
	for _, loc := range sampleprof.SortedLocations(f.Calls) {
		for _, c := range sampleprof.SortedCalls(nil, f.Calls[loc]) {
			s += "|" + c.Name
		}
	}
	for _, loc := range sampleprof.SortedLocations(f.Inlined) {
		for _, c := range f.Inlined[loc] {
			s += "|(" + fmtFunction(c) + ")"
		}
	}
	return s
}

// FuzzFitText: whatever names a JIT gives, the fitted profile is written in both formats and
// reads back with the names it kept.
func FuzzFitText(f *testing.F) {
	f.Add("JS:*run /srv/app.js:35:13", "JS:~cpuUsage node:internal/x:116:20", "inlined")
	f.Add("#f", "a:1", "9x")
	f.Add("f\x00", "", " g")
	f.Fuzz(func(t *testing.T, name, target, inlined string) {
		p := sampleprof.NewProfile()
		fp := &sampleprof.FunctionProfile{Name: name, TotalSamples: 9, HeadSamples: 1}
		fp.AddBody(sampleprof.LineLocation{LineOffset: 1}, 4)
		fp.AddCall(sampleprof.LineLocation{LineOffset: 1}, target, 4)
		fp.AddCall(sampleprof.LineLocation{LineOffset: 1}, "plain", 2)
		fp.InlinedAt(sampleprof.LineLocation{LineOffset: 2}, inlined).AddBody(sampleprof.LineLocation{}, 5)
		p.Add(fp)
		p.Add(&sampleprof.FunctionProfile{Name: "other", TotalSamples: 1, Body: map[sampleprof.LineLocation]uint64{{}: 1}})

		text, _ := FitText(p)
		var b bytes.Buffer
		if err := WriteText(&b, text); err != nil {
			t.Fatalf("WriteText of the fitted profile: %v", err)
		}
		back, err := ReadText(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatalf("reading the fitted profile back: %v\n%q", err, b.Bytes())
		}
		if !reflect.DeepEqual(textFree(back), textFree(text)) {
			t.Fatalf("read back as %q, written from %q", textFree(back), textFree(text))
		}
		bin, _ := FitExtBinary(p)
		if _, err := AppendExtBinary(nil, bin); err != nil {
			t.Fatalf("AppendExtBinary of the fitted profile: %v", err)
		}
	})
}
