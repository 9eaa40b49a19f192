package profileio

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
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
// reader would misparse with ErrName, rather than written wrong.
func WriteText(w io.Writer, p *Profile) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	tw := textWriter{w: bw, buf: make([]byte, 0, 256)}
	for _, f := range p.SortedFunctions() {
		if err := checkTextName(f.Name, false); err != nil {
			return err
		}
		if f.NoLineTable {
			tw.buf = append(tw.buf[:0], noLineTableComment...)
			tw.buf = append(tw.buf, f.Name...)
			tw.buf = append(tw.buf, '\n')
			if _, err := bw.Write(tw.buf); err != nil {
				return fmt.Errorf("profileio: write llvm text: %w", err)
			}
		}
		if err := tw.function(f, 0); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("profileio: write llvm text: %w", err)
	}
	return nil
}

type textWriter struct {
	w      *bufio.Writer
	buf    []byte
	sorter bodySorter
	calls  []callTarget
}

// function writes f's header and lines; indent is 0 for a top-level function, else the
// depth of the inlined callsite line that names f (already written up to "offset: ").
func (t *textWriter) function(f *FunctionProfile, indent int) error {
	b := t.buf[:0]
	b = append(b, f.Name...)
	b = append(b, ':')
	b = strconv.AppendUint(b, f.TotalSamples, 10)
	if indent == 0 {
		b = append(b, ':')
		b = strconv.AppendUint(b, f.HeadSamples, 10)
	}
	b = append(b, '\n')
	callLines := sortedKeys(f.Calls) // few; walked alongside the body lines
	for _, lc := range t.sorter.sorted(f) {
		loc := lc.loc()
		var err error
		if b, err = appendLocation(b, indent+1, loc); err != nil {
			return fmt.Errorf("profileio: function %q: %w", f.Name, err)
		}
		b = strconv.AppendUint(b, lc.count, 10)
		for len(callLines) > 0 && callLines[0].Less(loc) {
			callLines = callLines[1:] // calls on a line without a body entry are not written (AddCall makes one)
		}
		if len(callLines) > 0 && callLines[0] == loc {
			callLines = callLines[1:]
			t.calls = sortedCalls(t.calls, f.Calls[loc])
			for _, c := range t.calls {
				if err := checkTextName(c.name, true); err != nil {
					return fmt.Errorf("profileio: function %q: call target: %w", f.Name, err)
				}
				b = append(b, ' ')
				b = append(b, c.name...)
				b = append(b, ':')
				b = strconv.AppendUint(b, c.count, 10)
			}
		}
		b = append(b, '\n')
	}
	t.buf = b
	if _, err := t.w.Write(b); err != nil {
		return fmt.Errorf("profileio: write llvm text: %w", err)
	}
	if len(f.Inlined) == 0 {
		return nil
	}
	for _, loc := range sortedKeys(f.Inlined) {
		for _, name := range sortedNames(f.Inlined[loc]) {
			callee := f.Inlined[loc][name]
			if err := checkTextName(callee.Name, false); err != nil {
				return fmt.Errorf("profileio: function %q: inlined callee: %w", f.Name, err)
			}
			if callee.Name[0] >= '0' && callee.Name[0] <= '9' {
				return fmt.Errorf("profileio: function %q: inlined callee %q starts with a digit: %w", f.Name, callee.Name, ErrName)
			}
			var err error
			if t.buf, err = appendLocation(t.buf[:0], indent+1, loc); err != nil {
				return fmt.Errorf("profileio: function %q: %w", f.Name, err)
			}
			if _, err := t.w.Write(t.buf); err != nil {
				return fmt.Errorf("profileio: write llvm text: %w", err)
			}
			if err := t.function(callee, indent+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func appendLocation(b []byte, indent int, loc LineLocation) ([]byte, error) {
	if loc.LineOffset > maxLineOffset {
		return b, fmt.Errorf("line offset %d exceeds %d: %w", loc.LineOffset, maxLineOffset, ErrMalformed)
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
// hold a blank or a colon followed by a digit.
func checkTextName(name string, callTarget bool) error {
	if name == "" {
		return fmt.Errorf("empty name: %w", ErrName)
	}
	switch name[0] {
	case ' ', '#', '!':
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
