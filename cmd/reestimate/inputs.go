package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/profd/profd/profileio"
)

// source is one input file (a capture, several joined, or JSON) with its weight.
type source struct {
	path   string // "-" is standard input
	weight float64
	r      *bufio.Reader // set by open
	f      *os.File
}

// expandInputs turns the command's inputs into files, directories into the *.profd
// directly inside them (sorted by name), each with its input's weight (1 without weights).
func expandInputs(inputs []string, weights []float64) ([]*source, error) {
	var out []*source
	for i, in := range inputs {
		w := 1.0
		if len(weights) > 0 {
			w = weights[i]
		}
		if in == "-" {
			out = append(out, &source{path: in, weight: w})
			continue
		}
		st, err := os.Stat(in)
		if err != nil {
			return nil, fmt.Errorf("reestimate: %w", err)
		}
		if !st.IsDir() {
			out = append(out, &source{path: in, weight: w})
			continue
		}
		entries, err := os.ReadDir(in)
		if err != nil {
			return nil, fmt.Errorf("reestimate: %w", err)
		}
		var files []string
		seen := map[[2]uint64]bool{}
		for _, e := range entries { // in name order
			if !strings.HasSuffix(e.Name(), ".profd") || !e.Type().IsRegular() {
				continue
			}
			// A file linked under two names is read once: profd's interval directory links
			// each output's last interval as <base>.latest.profd, which sorts after it.
			if info, err := e.Info(); err == nil {
				if st, ok := info.Sys().(*syscall.Stat_t); ok {
					id := [2]uint64{uint64(st.Dev), st.Ino}
					if seen[id] {
						continue
					}
					seen[id] = true
				}
			}
			files = append(files, filepath.Join(in, e.Name()))
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("reestimate: %s: a directory without *.profd captures", in)
		}
		for _, f := range files {
			out = append(out, &source{path: f, weight: w})
		}
	}
	return out, nil
}

// open opens the source for buffered reading, through buf (reset onto it) when not nil:
// sources read one after another share one buffer, so that reading many small captures
// neither allocates nor keeps a buffer per file.
func (s *source) open(buf *bufio.Reader) (*source, error) {
	var in io.Reader = os.Stdin
	if s.path != "-" {
		f, err := os.Open(s.path)
		if err != nil {
			return nil, fmt.Errorf("reestimate: %w", err)
		}
		s.f, in = f, f
	}
	if buf == nil {
		buf = bufio.NewReaderSize(in, 1<<16)
	} else {
		buf.Reset(in)
	}
	s.r = buf
	return s, nil
}

// close closes the source's file and lets go of its reader; a source is read once.
func (s *source) close() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	s.r = nil
}

// name is how messages call the source.
func (s *source) name() string {
	if s.path == "-" {
		return "standard input"
	}
	return s.path
}

// readCaptures reads the source's captures one after another to its end and hands each to
// use with a name for messages: the source's, and for the second and later captures of a
// file of several (joined with cat) their place in it. A damaged capture, or one cut short,
// is an error unless salvage; then its sections are used and the rest of the file, which
// cannot be told apart from it, is left unread, which it says through warn. It returns how
// many captures were cut.
func readCaptures(s *source, salvage bool, warn *warnings, use func(c *profileio.Capture, name string) error) (cut int, err error) {
	cr := &countingReader{r: s.r}
	for n := 1; ; n++ {
		start := cr.n
		name := s.name()
		if n > 1 {
			next, perr := s.r.Peek(profileio.CaptureMagicBytes)
			if len(next) == 0 && perr == io.EOF {
				return cut, nil
			}
			if !profileio.IsCapture(next) {
				return cut, fmt.Errorf("%s: bytes that are not a capture follow the end of its capture %d, at byte %d", name, n-1, start)
			}
			name = fmt.Sprintf("%s (capture %d, at byte %d)", name, n, start)
		}
		if n == 1 {
			if head, _ := s.r.Peek(inputHeadBytes); !profileio.IsCapture(head) {
				return cut, fmt.Errorf("%s: not a profd capture, and merging reads captures only (JSON input is read alone)%s", name, colon(looksLike(head)))
			}
		}
		c, rerr := profileio.ReadCapture(cr)
		switch {
		case rerr != nil && c == nil:
			return cut, fmt.Errorf("%s: %w", name, rerr)
		case rerr != nil && !salvage:
			return cut, fmt.Errorf("%s: %w (--salvage uses the sections before the damage)", name, rerr)
		case rerr != nil:
			warn.printf("reestimate: %s: %v; using the sections before it (--salvage)", name, rerr)
		case c.End == nil && !salvage:
			return cut, fmt.Errorf("%s: the capture ends at byte %d without its end section (its writer was killed, or is still writing): --salvage uses the sections it holds", name, cr.n)
		case c.End == nil:
			warn.printf("reestimate: %s: the capture ends at byte %d without its end section (its writer was killed?); using the sections before it (--salvage)", name, cr.n)
		}
		if rerr != nil || c.End == nil {
			cut++
		}
		if err := use(c, name); err != nil {
			return cut, err
		}
		if rerr != nil || c.End == nil {
			if rest, _ := s.r.Peek(1); len(rest) > 0 {
				warn.printf("reestimate: %s: the rest of the file after byte %d is not read: where a next capture starts cannot be told", s.name(), cr.n)
			}
			return cut, nil
		}
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// warnings writes the warnings of the inputs to w, the first max of them, and counts the
// rest: a directory of many damaged captures gives a few lines and a count, not a line
// each.
type warnings struct {
	w       io.Writer
	max     int
	shown   int
	dropped int
}

// maxInputWarnings bounds the warnings about single inputs written in full.
const maxInputWarnings = 5

func (ws *warnings) printf(format string, args ...any) {
	if ws.shown >= ws.max {
		ws.dropped++
		return
	}
	ws.shown++
	fmt.Fprintf(ws.w, format+"\n", args...)
}

// summary writes how many warnings were left out, if any; what says what they were.
func (ws *warnings) summary(what string) {
	if ws.dropped > 0 {
		fmt.Fprintf(ws.w, "reestimate: … and %d more such warnings: %s\n", ws.dropped, what)
	}
}

// inputHeadBytes is how much of an input's start tells what it is: a text profile's first
// line may follow a few comments.
const inputHeadBytes = 4096

// llvmTextHead matches the first line of an LLVM sample profile in text: a function's
// name, its total samples and its head samples.
var llvmTextHead = regexp.MustCompile(`^[^\s#][^\n]*:[0-9]+:[0-9]+\r?$`)

// looksLike says what an input that starts with head, and is no capture, seems to be, for
// the message that refuses it ("" when it cannot tell): the files profd writes beside its
// captures are the likely mistakes, and for those it says which file to give instead.
func looksLike(head []byte) string {
	const instead = "; give reestimate the capture (.profd) profd wrote beside it"
	switch {
	case len(head) == 0:
		return "it is empty"
	case profileio.IsExtBinary(head):
		return "it is an LLVM sample profile (ext-binary), which reestimate makes" + instead
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return "it is gzip-compressed, as profd's pprof profiles (.pb.gz) are" + instead
	}
	for bytes.HasPrefix(head, []byte("#")) { // a text profile's comments (profd's say why a function is raw)
		_, head, _ = bytes.Cut(head, []byte("\n"))
	}
	if first, _, _ := bytes.Cut(head, []byte("\n")); llvmTextHead.Match(first) {
		return "it looks like an LLVM sample profile (text), which reestimate makes" + instead
	}
	return ""
}

// isJSONObject reports whether head may start a JSON object: its first byte but blanks is
// '{', or head is all blanks (the decoder then says what follows).
func isJSONObject(head []byte) bool {
	rest := bytes.TrimLeft(head, " \t\r\n")
	return len(head) > 0 && (len(rest) == 0 || rest[0] == '{')
}

// colon is ": "+s, or "" for "".
func colon(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}
