package profileio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/profd/profd/sampleprof"
)

// Limits of the ext-binary reader.
const (
	maxExtBinaryBytes    = 1 << 30 // whole file
	maxExtBinarySections = 64
)

// ReadExtBinary reads an LLVM ext-binary sample profile (version 103, as LLVM 14 writes
// it). Sections are read in header-table order; the function offset table, profile symbol
// list, function metadata and unknown section types are skipped, since the profiles
// section is read whole. Compressed sections, MD5 name tables and context-sensitive
// profiles are refused with ErrUnsupported. A function named twice keeps its last profile.
func ReadExtBinary(r io.Reader) (*sampleprof.Profile, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxExtBinaryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("profileio: read llvm ext-binary: %w", err)
	}
	if len(data) > maxExtBinaryBytes {
		return nil, &ParseError{Format: "llvm ext-binary", Offset: maxExtBinaryBytes, Msg: "file too large", Err: ErrTooLarge}
	}
	return ParseExtBinary(data)
}

// IsExtBinary reports whether data starts with the ext-binary magic.
func IsExtBinary(data []byte) bool {
	m, n := binary.Uvarint(data)
	return n > 0 && m == extBinaryMagic
}

// ParseExtBinary is ReadExtBinary over bytes in memory.
func ParseExtBinary(data []byte) (*sampleprof.Profile, error) {
	d := &binDecoder{data: data}
	if m := d.uleb("magic"); d.err == nil && m != extBinaryMagic {
		return nil, d.fail(0, ErrMalformed, "bad magic %#x", m)
	}
	if v := d.uleb("version"); d.err == nil && v != extBinaryVersion {
		return nil, d.fail(d.pos, ErrUnsupported, "version %d, want %d", v, extBinaryVersion)
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(data)-d.pos < 8 {
		return nil, d.fail(d.pos, ErrTruncated, "section table")
	}
	nsec := binary.LittleEndian.Uint64(data[d.pos:])
	if nsec > maxExtBinarySections || nsec*32 > uint64(len(data)-d.pos-8) {
		return nil, d.fail(d.pos, ErrMalformed, "section count %d", nsec)
	}
	d.pos += 8
	type entry struct{ typ, flags, off, size uint64 }
	entries := make([]entry, nsec)
	for i := range entries {
		e := data[d.pos+32*i:]
		entries[i] = entry{binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:]),
			binary.LittleEndian.Uint64(e[16:]), binary.LittleEndian.Uint64(e[24:])}
	}
	tableEnd := d.pos + 32*int(nsec)

	p := sampleprof.NewProfile()
	var names []string
	for i, e := range entries {
		at := int64(tableEnd - 32*int(nsec) + 32*i)
		if e.off > uint64(len(data)) || e.size > uint64(len(data))-e.off {
			return nil, d.fail(int(at), ErrTruncated, "section %#x at %d+%d beyond file end %d", e.typ, e.off, e.size, len(data))
		}
		if e.flags&secFlagCompress != 0 {
			return nil, d.fail(int(at), ErrUnsupported, "compressed section %#x", e.typ)
		}
		sec := &binDecoder{data: data[:e.off+e.size], pos: int(e.off)}
		switch e.typ {
		case secProfSummary:
			if e.flags&secFlagSummaryFull != 0 {
				return nil, d.fail(int(at), ErrUnsupported, "context-sensitive profile")
			}
			sec.skipSummary()
		case secNameTable:
			if e.flags&(secFlagNameMD5|secFlagNameFixMD5) != 0 {
				return nil, d.fail(int(at), ErrUnsupported, "MD5 name table")
			}
			names = sec.nameTable()
		case secCSNameTable:
			if n := sec.uleb("context name count"); sec.err == nil && n != 0 {
				return nil, sec.fail(int(e.off), ErrUnsupported, "context-sensitive names")
			}
		case secLBRProfile:
			for sec.err == nil && sec.pos < len(sec.data) {
				fstart := sec.pos
				head := sec.uleb("head samples")
				name := sec.name(names)
				f := &sampleprof.FunctionProfile{Name: name, HeadSamples: head}
				sec.function(f, names, 0)
				if sec.err == nil {
					p.Functions[name] = f
				} else if pe, ok := sec.err.(*ParseError); ok && pe.Msg != "" {
					pe.Msg = fmt.Sprintf("function at %d: %s", fstart, pe.Msg)
				}
			}
		}
		if sec.err != nil {
			return nil, sec.err
		}
	}
	return p, nil
}

type binDecoder struct {
	data []byte
	pos  int
	err  error
}

func (d *binDecoder) fail(at int, err error, msg string, args ...any) error {
	pe := &ParseError{Format: "llvm ext-binary", Offset: int64(at), Msg: fmt.Sprintf(msg, args...), Err: err}
	if d.err == nil {
		d.err = pe
	}
	return pe
}

func (d *binDecoder) uleb(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.data[d.pos:])
	if n == 0 {
		d.fail(d.pos, ErrTruncated, "%s", what)
		return 0
	}
	if n < 0 {
		d.fail(d.pos, ErrMalformed, "%s: number exceeds 64 bits", what)
		return 0
	}
	d.pos += n
	return v
}

func (d *binDecoder) uleb32(what string) uint32 {
	at := d.pos
	v := d.uleb(what)
	if v > 0xffffffff && d.err == nil {
		d.fail(at, ErrMalformed, "%s %d exceeds 32 bits", what, v)
	}
	return uint32(v)
}

// count reads a number of following records, each at least minBytes long, so that no
// allocation can exceed what the remaining input could hold.
func (d *binDecoder) count(what string, minBytes int) int {
	at := d.pos
	n := d.uleb(what)
	if d.err == nil && n > uint64(len(d.data)-d.pos)/uint64(minBytes) {
		d.fail(at, ErrTruncated, "%s %d exceeds remaining %d bytes", what, n, len(d.data)-d.pos)
		return 0
	}
	return int(n)
}

func (d *binDecoder) skipSummary() {
	for _, what := range []string{"total count", "max count", "max function count", "count count", "function count"} {
		d.uleb(what)
	}
	n := d.count("summary entries", 3)
	for i := 0; i < n && d.err == nil; i++ {
		d.uleb("cutoff")
		d.uleb("min count")
		d.uleb("counts")
	}
}

func (d *binDecoder) nameTable() []string {
	n := d.count("name count", 1)
	names := make([]string, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		end := bytes.IndexByte(d.data[d.pos:], 0)
		if end < 0 {
			d.fail(d.pos, ErrTruncated, "name %d has no NUL", i)
			return nil
		}
		names = append(names, string(d.data[d.pos:d.pos+end]))
		d.pos += end + 1
	}
	return names
}

func (d *binDecoder) name(names []string) string {
	at := d.pos
	i := d.uleb("name index")
	if d.err == nil && i >= uint64(len(names)) {
		d.fail(at, ErrMalformed, "name index %d beyond name table of %d", i, len(names))
		return ""
	}
	if d.err != nil {
		return ""
	}
	return names[i]
}

func (d *binDecoder) location() sampleprof.LineLocation {
	off := d.uleb32("line offset")
	disc := d.uleb32("discriminator")
	return sampleprof.LineLocation{LineOffset: off, Discriminator: disc}
}

// function reads total samples, body records and inlined callsites into f.
func (d *binDecoder) function(f *sampleprof.FunctionProfile, names []string, depth int) {
	if depth > maxInlineDepth {
		d.fail(d.pos, ErrTooLarge, "inline depth exceeds %d", maxInlineDepth)
		return
	}
	f.TotalSamples = d.uleb("total samples")
	nrec := d.count("body records", 4)
	for i := 0; i < nrec && d.err == nil; i++ {
		loc := d.location()
		n := d.uleb("samples")
		ncalls := d.count("call targets", 2)
		for j := 0; j < ncalls && d.err == nil; j++ {
			callee := d.name(names)
			c := d.uleb("call count")
			if d.err == nil {
				f.AddCall(loc, callee, c)
			}
		}
		if d.err == nil {
			f.AddBody(loc, n)
		}
	}
	ncs := d.count("inlined callsites", 5)
	for i := 0; i < ncs && d.err == nil; i++ {
		loc := d.location()
		callee := d.name(names)
		if d.err != nil {
			return
		}
		c := f.InlinedAt(loc, callee)
		var sub sampleprof.FunctionProfile
		d.function(&sub, names, depth+1)
		sub.Name = callee
		c.Merge(&sub)
	}
}
