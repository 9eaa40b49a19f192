package otlpexport

import (
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/google/pprof/profile"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// TestConvertEncodeDecode checks the conversion through OTLP's encoding alone; the
// Collector tests check it through a real receiver.
func TestConvertEncodeDecode(t *testing.T) {
	p := testProfile(200)
	pd := convert(&p, p.Pprof.Sample)
	var m pprofile.ProtoMarshaler
	b, err := m.MarshalProfiles(pd)
	if err != nil {
		t.Fatal(err)
	}
	var u pprofile.ProtoUnmarshaler
	back, err := u.UnmarshalProfiles(b)
	if err != nil {
		t.Fatal(err)
	}
	// Three processes and the samples without a pid.
	if n := back.ResourceProfiles().Len(); n != 4 {
		t.Errorf("%d resources, want 4", n)
	}
	compareSummaries(t, otlpSummary(t, []pprofile.Profiles{back}, p.Pprof), pprofSummary(p))
}

// TestConvertDictionaryZeroEntries checks what OTLP requires of the dictionary: index 0
// of every table is the empty entry, and every table is deduplicated.
func TestConvertDictionaryZeroEntries(t *testing.T) {
	p := testProfile(400)
	d := convert(&p, p.Pprof.Sample).Dictionary()
	if d.StringTable().At(0) != "" {
		t.Errorf("string 0 is %q", d.StringTable().At(0))
	}
	if d.StackTable().At(0).LocationIndices().Len() != 0 || d.LocationTable().At(0).Lines().Len() != 0 ||
		d.MappingTable().At(0).FilenameStrindex() != 0 || d.FunctionTable().At(0).NameStrindex() != 0 ||
		d.AttributeTable().At(0).KeyStrindex() != 0 {
		t.Error("a table's entry 0 is not empty")
	}
	// testProfile has 4 stacks, 6 locations, 4 mappings: each once (plus entry 0).
	if n := d.StackTable().Len(); n != 5 {
		t.Errorf("%d stacks, want 5", n)
	}
	if n := d.LocationTable().Len(); n != 7 {
		t.Errorf("%d locations, want 7", n)
	}
	if n := d.MappingTable().Len(); n != 5 {
		t.Errorf("%d mappings, want 5", n)
	}
	seen := map[string]bool{}
	for _, s := range d.StringTable().All() {
		if seen[s] {
			t.Errorf("string %q twice", s)
		}
		seen[s] = true
	}
}

// TestConvertInlinedLines: a location where calls were inlined keeps its lines in pprof's
// order, the inlined call first and the function it was inlined into last.
func TestConvertInlinedLines(t *testing.T) {
	p := testProfile(4)
	loc := p.Pprof.Sample[0].Location[0]
	step := &profile.Function{ID: uint64(len(p.Pprof.Function) + 1), Name: "main.step", SystemName: "main.step"}
	p.Pprof.Function = append(p.Pprof.Function, step)
	want := []string{"main.step", loc.Line[0].Function.Name}
	loc.Line = append([]profile.Line{{Function: step}}, loc.Line...)
	d := convert(&p, p.Pprof.Sample).Dictionary()
	found := false
	for i := 0; i < d.LocationTable().Len(); i++ {
		l := d.LocationTable().At(i)
		if l.Address() != loc.Address {
			continue
		}
		found = true
		var got []string
		for j := 0; j < l.Lines().Len(); j++ {
			f := d.FunctionTable().At(int(l.Lines().At(j).FunctionIndex()))
			got = append(got, d.StringTable().At(int(f.NameStrindex())))
		}
		if !slices.Equal(got, want) {
			t.Errorf("location at %#x has lines %q, want %q", loc.Address, got, want)
		}
	}
	if !found {
		t.Fatalf("no location at %#x", loc.Address)
	}
}

// TestConvertResourceUTF8: a process's command line and path of bytes that are not UTF-8
// are sent as UTF-8, each invalid byte as U+FFFD, as OTLP's strings must be for protobuf's
// decoders.
func TestConvertResourceUTF8(t *testing.T) {
	p := testProfile(8)
	p.HostName = "h\xffst"
	p.Processes[0].CommandLine = "lli-14 caf\xe9.bc"
	p.Processes[0].ExecutablePath = "/opt/r\xe9sum\xe9/lli"
	rs := convert(&p, p.Pprof.Sample).ResourceProfiles()
	want := map[string]string{
		attrHostName:       "h\uFFFDst",
		attrCommandLine:    "lli-14 caf\uFFFD.bc",
		attrExecutablePath: "/opt/r\uFFFDsum\uFFFD/lli",
	}
	seen := map[string]bool{}
	for i := 0; i < rs.Len(); i++ {
		for k, v := range rs.At(i).Resource().Attributes().All() {
			s := v.AsString()
			if !utf8.ValidString(s) {
				t.Errorf("resource attribute %s=%q is not UTF-8", k, s)
			}
			if w, ok := want[k]; ok && s == w {
				seen[k] = true
			}
		}
	}
	for k, w := range want {
		if !seen[k] {
			t.Errorf("no resource has %s=%q", k, w)
		}
	}
}
