package profileio

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/profd/profd/sampleprof"
)

func textOf(t testing.TB, p *sampleprof.Profile) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteText(&b, p); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestWriteTextGolden(t *testing.T) {
	golden(t, "profile.txt.golden", textOf(t, testProfile()))
}

func TestTextRoundTrip(t *testing.T) {
	want := textOf(t, testProfile())
	p, err := ReadText(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Functions["jit_noline"].NoLineTable || p.Functions["main"].NoLineTable {
		t.Errorf("NoLineTable not carried by the comment line")
	}
	if got := textOf(t, p); !bytes.Equal(got, want) {
		t.Errorf("write(read(text)) differs:\n%s\nwant:\n%s", got, want)
	}
}

func TestReadTextGrammar(t *testing.T) {
	in := "# leading comment\n\n" +
		"f:10:2\n" +
		" 1: 5 a:b:3 x y:2\n" + // target names hold a colon and a blank
		"   # indented comment\n" +
		" 1: 1 a:b:4\n" + // a repeated line adds up
		" 2.7: 4\r\n" + // CRLF
		"f:20:3\n" + // a repeated function keeps its last profile
		" 0: 20\n" +
		" 3: g:9\n" +
		"  0: 9\n" +
		" 4: 1\n"
	p, err := ReadText(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	f := p.Functions["f"]
	if f.TotalSamples != 20 || f.HeadSamples != 3 || f.Body[sampleprof.LineLocation{LineOffset: 0, Discriminator: 0}] != 20 || f.Body[sampleprof.LineLocation{LineOffset: 4, Discriminator: 0}] != 1 {
		t.Errorf("second profile of f not kept: %+v", f)
	}
	if c := f.Inlined[sampleprof.LineLocation{LineOffset: 3, Discriminator: 0}]["g"]; c == nil || c.TotalSamples != 9 || c.Body[sampleprof.LineLocation{LineOffset: 0, Discriminator: 0}] != 9 {
		t.Errorf("inlined g: %+v", c)
	}
	if len(f.Body) != 2 {
		t.Errorf("line 4 at depth 1 went into the inlined callee: %v", f.Body)
	}

	p, err = ReadText(strings.NewReader(in[:strings.Index(in, "f:20:3")]))
	if err != nil {
		t.Fatal(err)
	}
	f = p.Functions["f"]
	if f.Body[sampleprof.LineLocation{LineOffset: 1, Discriminator: 0}] != 6 || f.Calls[sampleprof.LineLocation{LineOffset: 1, Discriminator: 0}]["a:b"] != 7 || f.Calls[sampleprof.LineLocation{LineOffset: 1, Discriminator: 0}]["x y"] != 2 {
		t.Errorf("body/calls: %v %v", f.Body, f.Calls)
	}
	if f.Body[sampleprof.LineLocation{LineOffset: 2, Discriminator: 7}] != 4 {
		t.Errorf("discriminated line: %v", f.Body)
	}
}

func TestReadTextErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		line int
		err  error
	}{
		{" 1: 2\n", 1, ErrMalformed},            // body before header
		{"f:1\n", 1, ErrMalformed},              // header without head count
		{"f:x:1\n", 1, ErrMalformed},            // non-numeric total
		{"f:1:1\n 65536: 1\n", 2, ErrMalformed}, // offset beyond 16 bits without discriminator
		{"f:1:1\n 1:1\n", 2, ErrMalformed},      // no blank after colon
		{"f:1:1\n 1: 1 g\n", 2, ErrMalformed},   // call target without count
		{"f:1:1\n 1: g\n", 2, ErrMalformed},     // callsite without total
		{"f:1:1\n !CFGChecksum: 1\n", 2, ErrUnsupported},
		{"f:1:1\n 1: 99999999999999999999\n", 2, ErrMalformed},
		{"f:1:1\n" + strings.Repeat(" ", 300) + "1: 1\n", 2, ErrTooLarge},
	} {
		_, err := ReadText(strings.NewReader(tc.in))
		var pe *ParseError
		if !errors.As(err, &pe) || !errors.Is(err, tc.err) || pe.Line != tc.line {
			t.Errorf("ReadText(%q) = %v, want line %d %v", tc.in, err, tc.line, tc.err)
		}
	}
	if _, err := ReadText(strings.NewReader("f:1:1\n 70000.1: 1\n")); err != nil {
		t.Errorf("offset beyond 16 bits with a discriminator: %v", err)
	}
}

func TestWriteTextRefusesUnreadableNames(t *testing.T) {
	for _, f := range []*sampleprof.FunctionProfile{
		{Name: ""},
		{Name: " lead"},
		{Name: "#hash"},
		{Name: "nl\nx"},
		{Name: "f", Calls: map[sampleprof.LineLocation]map[string]uint64{{LineOffset: 1, Discriminator: 0}: {"a b": 1}}, Body: map[sampleprof.LineLocation]uint64{{LineOffset: 1, Discriminator: 0}: 1}},
		{Name: "f", Calls: map[sampleprof.LineLocation]map[string]uint64{{LineOffset: 1, Discriminator: 0}: {"a:1x": 1}}, Body: map[sampleprof.LineLocation]uint64{{LineOffset: 1, Discriminator: 0}: 1}},
		{Name: "f", Calls: map[sampleprof.LineLocation]map[string]uint64{{LineOffset: 1, Discriminator: 0}: {":x": 1}}, Body: map[sampleprof.LineLocation]uint64{{LineOffset: 1, Discriminator: 0}: 1}},
	} {
		p := sampleprof.NewProfile()
		p.Add(f)
		if err := WriteText(&bytes.Buffer{}, p); !errors.Is(err, ErrName) {
			t.Errorf("WriteText(%q) = %v, want ErrName", f.Name, err)
		}
	}
	for _, loc := range []sampleprof.LineLocation{{LineOffset: 70000}, {LineOffset: 70000, Discriminator: 1}} {
		p := sampleprof.NewProfile()
		p.Add(&sampleprof.FunctionProfile{Name: "f", Body: map[sampleprof.LineLocation]uint64{loc: 1}})
		if err := WriteText(&bytes.Buffer{}, p); !errors.Is(err, ErrMalformed) {
			t.Errorf("WriteText with offset %v: %v, want ErrMalformed", loc, err)
		}
		if _, err := AppendExtBinary(nil, p); !errors.Is(err, ErrMalformed) {
			t.Errorf("AppendExtBinary with offset %v: %v, want ErrMalformed", loc, err)
		}
	}
}

func FuzzReadText(f *testing.F) {
	f.Add(string(textOf(f, testProfile())))
	f.Add("f:10:2\n 1: 5 a:b:3 x y:2\n 3: g:9\n  0: 9\n")
	f.Add("# c\nf:1:1\n 70000.1: 1\n")
	f.Fuzz(func(t *testing.T, in string) {
		p, err := ReadText(strings.NewReader(in))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error is no *ParseError: %v", err)
			}
			return
		}
		var b bytes.Buffer
		if err := WriteText(&b, p); err != nil {
			if errors.Is(err, ErrName) || errors.Is(err, ErrMalformed) {
				return // a name or offset the reader tolerates but the writer will not emit
			}
			t.Fatal(err)
		}
		q, err := ReadText(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatalf("reading what we wrote: %v\n%s", err, b.Bytes())
		}
		if again := textOf(t, q); !bytes.Equal(again, b.Bytes()) {
			t.Fatalf("text round trip differs:\n%s\nthen:\n%s", b.Bytes(), again)
		}
	})
}
