package profileio

import (
	"fmt"
	"io"
	"strconv"

	"github.com/profd/profd/sampleprof"
)

// noLineTableComment starts the comment line the text writer puts before the header of a
// function that had no line table. LLVM's text reader skips lines whose first non-blank
// character is '#'; ReadText recognises this one and sets NoLineTable.
const noLineTableComment = "# profd: no line table, total and head samples only: "

// WriteText writes p in LLVM's text sample-profile format, exactly as llvm-profdata-14
// merge --sample --text would write the same profile (plus profd's comment lines):
//
//	name:total:head
//	 offset[.discriminator]: count[ callee:count...]
//	 offset[.discriminator]: inlined_callee:total
//	  ... the inlined callee's lines, one space deeper
//
// Functions come most-samples first, lines in ascending order, call targets most-called
// first. Line offsets above 65535 (which LLVM 14 refuses in text without a discriminator
// and silently stops reading at in ext-binary) are refused with ErrMalformed, names the
// reader would misparse with ErrName, rather than written wrong; the error is the first bad
// function's in writing order, and part of what precedes it may have been written.
//
// WriteText encodes chunks of functions on up to GOMAXPROCS goroutines and writes them to
// w in order, from one goroutine at a time.
func WriteText(w io.Writer, p *sampleprof.Profile) error {
	funcs := p.SortedFunctions()
	workers := chunkPlan(len(funcs))
	tws := make([]textWriter, workers)
	var err error
	encodeChunks(len(funcs), workers, func(worker, from, to int) {
		t := &tws[worker]
		t.out, t.err = t.out[:0], nil
		for _, f := range funcs[from:to] {
			if t.err = t.topLevel(f); t.err != nil {
				return
			}
		}
	}, func(worker int) bool {
		t := &tws[worker]
		if t.err != nil {
			err = t.err // what the bad function's chunk holds before it is not written
			return false
		}
		if _, werr := w.Write(t.out); werr != nil {
			err = fmt.Errorf("profileio: write llvm text: %w", werr)
			return false
		}
		return true
	})
	return err
}

// textWriter encodes a chunk of functions into out; each of WriteText's goroutines has
// one.
type textWriter struct {
	out    []byte
	err    error // the first error in the chunk
	sorter bodySorter
	calls  []sampleprof.CallTarget
}

// topLevel appends a top-level function: profd's comment line when it had no line table,
// then its profile.
func (t *textWriter) topLevel(f *sampleprof.FunctionProfile) error {
	if err := checkTextName(f.Name, false); err != nil {
		return err
	}
	if f.NoLineTable {
		t.out = append(t.out, noLineTableComment...)
		t.out = append(t.out, f.Name...)
		t.out = append(t.out, '\n')
	}
	return t.function(f, 0)
}

// function appends f's header and lines; indent is 0 for a top-level function, else the
// depth of the inlined callsite line that names f (already appended up to "offset: ").
func (t *textWriter) function(f *sampleprof.FunctionProfile, indent int) error {
	b := t.out
	b = append(b, f.Name...)
	b = append(b, ':')
	b = strconv.AppendUint(b, f.TotalSamples, 10)
	if indent == 0 {
		b = append(b, ':')
		b = strconv.AppendUint(b, f.HeadSamples, 10)
	}
	b = append(b, '\n')
	callLines := t.sorter.sortedCallLines(f) // few; walked alongside the body lines
	for _, lc := range t.sorter.sorted(f) {
		loc := lc.loc()
		var err error
		if b, err = appendLocation(b, indent+1, loc); err != nil {
			return fmt.Errorf("profileio: function %q: %w", f.Name, err)
		}
		b = strconv.AppendUint(b, lc.count, 10)
		for len(callLines) > 0 && callLines[0] < lc.key {
			callLines = callLines[1:] // calls on a line without a body entry are not written (AddCall makes one)
		}
		if len(callLines) > 0 && callLines[0] == lc.key {
			callLines = callLines[1:]
			t.calls = sampleprof.SortedCalls(t.calls, f.Calls[loc])
			for _, c := range t.calls {
				if err := checkTextName(c.Name, true); err != nil {
					return fmt.Errorf("profileio: function %q: call target: %w", f.Name, err)
				}
				b = append(b, ' ')
				b = append(b, c.Name...)
				b = append(b, ':')
				b = strconv.AppendUint(b, c.Count, 10)
			}
		}
		b = append(b, '\n')
	}
	t.out = b
	if len(f.Inlined) == 0 {
		return nil
	}
	for _, loc := range sampleprof.SortedLocations(f.Inlined) {
		for _, name := range sortedNames(f.Inlined[loc]) {
			callee := f.Inlined[loc][name]
			if err := checkTextName(callee.Name, false); err != nil {
				return fmt.Errorf("profileio: function %q: inlined callee: %w", f.Name, err)
			}
			if callee.Name[0] >= '0' && callee.Name[0] <= '9' {
				return fmt.Errorf("profileio: function %q: inlined callee %q starts with a digit: %w", f.Name, callee.Name, ErrName)
			}
			var err error
			if t.out, err = appendLocation(t.out, indent+1, loc); err != nil {
				return fmt.Errorf("profileio: function %q: %w", f.Name, err)
			}
			if err := t.function(callee, indent+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func appendLocation(b []byte, indent int, loc sampleprof.LineLocation) ([]byte, error) {
	if loc.LineOffset > sampleprof.MaxLineOffset {
		return b, fmt.Errorf("line offset %d exceeds %d: %w", loc.LineOffset, sampleprof.MaxLineOffset, ErrMalformed)
	}
	for i := 0; i < indent; i++ {
		b = append(b, ' ')
	}
	b = strconv.AppendUint(b, uint64(loc.LineOffset), 10)
	if loc.Discriminator != 0 {
		b = append(b, '.')
		b = strconv.AppendUint(b, uint64(loc.Discriminator), 10)
	}
	return append(b, ':', ' '), nil
}

// checkTextName refuses names that LLVM's text reader would read back as something else.
// Call targets are delimited by spaces and found by their ":count" suffix, so they may not
// hold a blank or a colon followed by a digit, nor start with a colon (LLVM 14 refuses the
// line).
func checkTextName(name string, callTarget bool) error {
	if name == "" {
		return fmt.Errorf("empty name: %w", ErrName)
	}
	switch {
	case name[0] == ' ' || name[0] == '#' || name[0] == '!' || callTarget && name[0] == ':':
		return fmt.Errorf("name %q starts with %q: %w", name, name[0], ErrName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("name %q holds a control character: %w", name, ErrName)
		}
		if callTarget && (c == ' ' || (c == ':' && i+1 < len(name) && name[i+1] >= '0' && name[i+1] <= '9')) {
			return fmt.Errorf("call target %q holds a blank or \":digit\": %w", name, ErrName)
		}
	}
	return nil
}
