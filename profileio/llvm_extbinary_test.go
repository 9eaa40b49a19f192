package profileio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/profd/profd/sampleprof"
)

func extBinaryOf(t testing.TB, p *sampleprof.Profile) []byte {
	t.Helper()
	b, err := AppendExtBinary(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriteExtBinaryGolden(t *testing.T) {
	golden(t, "profile.extbin.golden", extBinaryOf(t, testProfile()))
}

func TestExtBinaryRoundTrip(t *testing.T) {
	b := extBinaryOf(t, testProfile())
	if !IsExtBinary(b) {
		t.Fatal("IsExtBinary false on our own output")
	}
	p, err := ParseExtBinary(b)
	if err != nil {
		t.Fatal(err)
	}
	// The binary format cannot say "no line table"; everything else survives.
	want := testProfile()
	want.Functions["jit_noline"].NoLineTable = false
	if got, w := textOf(t, p), textOf(t, want); !bytes.Equal(got, w) {
		t.Errorf("read(write(p)) differs:\n%s\nwant:\n%s", got, w)
	}
	if again := extBinaryOf(t, p); !bytes.Equal(again, b) {
		t.Errorf("write(read(b)) differs from b")
	}
}

func TestExtBinaryRefusals(t *testing.T) {
	good := extBinaryOf(t, testProfile())
	// The section table starts after the magic and the version (ULEB) and the count.
	_, n1 := binary.Uvarint(good)
	_, n2 := binary.Uvarint(good[n1:])
	table := n1 + n2 + 8
	entry := func(b []byte, i int) []byte { return b[table+32*i:] }

	mutate := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	for _, tc := range []struct {
		name string
		in   []byte
		err  error
	}{
		{"empty", nil, ErrTruncated},
		{"magic only", good[:n1], ErrTruncated},
		{"bad magic", mutate(func(b []byte) { b[0] ^= 1 }), ErrMalformed},
		{"version", mutate(func(b []byte) { b[n1] = 102 }), ErrUnsupported},
		{"compressed", mutate(func(b []byte) { binary.LittleEndian.PutUint64(entry(b, 1)[8:], secFlagCompress) }), ErrUnsupported},
		{"md5 names", mutate(func(b []byte) { binary.LittleEndian.PutUint64(entry(b, 1)[8:], secFlagNameMD5) }), ErrUnsupported},
		{"section beyond end", mutate(func(b []byte) { binary.LittleEndian.PutUint64(entry(b, 4)[24:], 1<<40) }), ErrTruncated},
		{"huge section count", mutate(func(b []byte) { binary.LittleEndian.PutUint64(b[table-8:], 1<<60) }), ErrMalformed},
		{"cut inside profiles", good[:len(good)-12], ErrTruncated},
	} {
		_, err := ParseExtBinary(tc.in)
		var pe *ParseError
		if !errors.As(err, &pe) || !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
}

func FuzzReadExtBinary(f *testing.F) {
	f.Add(extBinaryOf(f, testProfile()))
	small := sampleprof.NewProfile()
	small.Add(&sampleprof.FunctionProfile{Name: "f", TotalSamples: 3, HeadSamples: 1, Body: map[sampleprof.LineLocation]uint64{{LineOffset: 1, Discriminator: 0}: 3}})
	f.Add(extBinaryOf(f, small))
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := ParseExtBinary(in)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error is no *ParseError: %v", err)
			}
			return
		}
		b, err := AppendExtBinary(nil, p)
		if err != nil {
			if errors.Is(err, ErrName) {
				return
			}
			t.Fatal(err)
		}
		q, err := ParseExtBinary(b)
		if err != nil {
			t.Fatalf("reading what we wrote: %v", err)
		}
		if again := extBinaryOf(t, q); !bytes.Equal(again, b) {
			t.Fatalf("ext-binary round trip differs")
		}
	})
}

func TestReadProfileDetectsEncoding(t *testing.T) {
	want := textOf(t, testProfile())
	for name, in := range map[string][]byte{"text": want, "ext-binary": extBinaryOf(t, testProfile())} {
		p, err := ReadProfile(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p.Functions["jit_noline"].NoLineTable = true // only the text carries it
		if got := textOf(t, p); !bytes.Equal(got, want) {
			t.Errorf("%s read back differs:\n%s", name, got)
		}
	}
}
