package profileio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/profd/profd/sampleprof"
)

// Limits of the text reader: longer lines and deeper inline stacks are refused.
const (
	maxTextLineBytes = 1 << 20
	maxInlineDepth   = 256
	// maxTextLineOffset is the largest offset LLVM's text reader takes on a line without a
	// discriminator (it checks that the offset fits 16 bits).
	maxTextLineOffset = 0xffff
)

// ReadText reads an LLVM text sample profile as llvm-profdata-14 does: '#' comment lines
// and blank lines are skipped, a line starting without a blank is a function header
// "name:total:head", an indented line is a body line "offset[.disc]: count [target:count]..."
// or, when what follows ": " does not start with a digit, an inlined callsite
// "offset[.disc]: callee:total" whose own lines are one blank deeper. A function named
// twice keeps its last profile, as LLVM's reader does. Probe and context metadata lines
// ("!CFGChecksum:", "!Attributes:") are refused with ErrUnsupported.
func ReadText(r io.Reader) (*sampleprof.Profile, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxTextLineBytes)
	p := sampleprof.NewProfile()
	var (
		stack       []*sampleprof.FunctionProfile
		lineNo      int
		offset      int64
		noLinesNext string
		haveNoLines bool
	)
	for sc.Scan() {
		raw := sc.Text()
		lineNo++
		lineStart := offset
		offset += int64(len(raw)) + 1
		line := strings.TrimSuffix(raw, "\r")
		fail := func(err error, msg string, args ...any) error {
			return &ParseError{Format: "llvm text", Offset: lineStart, Line: lineNo, Msg: fmt.Sprintf(msg, args...), Err: err}
		}
		trimmed := strings.TrimLeft(line, " ")
		if trimmed == "" {
			continue
		}
		if trimmed[0] == '#' {
			if name, ok := strings.CutPrefix(line, noLineTableComment); ok {
				noLinesNext, haveNoLines = name, true
			}
			continue
		}
		if line[0] != ' ' {
			name, total, head, ok := parseTextHead(line)
			if !ok {
				return nil, fail(ErrMalformed, "expected name:total:head, found %q", clip(line))
			}
			f := &sampleprof.FunctionProfile{Name: name, TotalSamples: total, HeadSamples: head}
			f.NoLineTable = haveNoLines && noLinesNext == name
			haveNoLines = false
			p.Functions[name] = f
			stack = append(stack[:0], f)
			continue
		}
		haveNoLines = false
		depth := len(line) - len(trimmed)
		if len(stack) == 0 {
			return nil, fail(ErrMalformed, "body line before any function header")
		}
		if depth > maxInlineDepth {
			return nil, fail(ErrTooLarge, "inline depth %d exceeds %d", depth, maxInlineDepth)
		}
		if trimmed[0] == '!' {
			return nil, fail(ErrUnsupported, "metadata line %q", clip(trimmed))
		}
		loc, rest, err := parseTextLocation(trimmed)
		if err != nil {
			return nil, fail(err, "bad location in %q", clip(line))
		}
		for len(stack) > depth {
			stack = stack[:len(stack)-1]
		}
		cur := stack[len(stack)-1]
		if rest == "" || rest[0] < '0' || rest[0] > '9' {
			// An inlined callsite: "callee:total".
			i := strings.LastIndexByte(rest, ':')
			if i <= 0 {
				return nil, fail(ErrMalformed, "expected callee:total in %q", clip(line))
			}
			total, err := strconv.ParseUint(rest[i+1:], 10, 64)
			if err != nil {
				return nil, fail(ErrMalformed, "bad callsite total in %q", clip(line))
			}
			callee := cur.InlinedAt(loc, rest[:i])
			callee.TotalSamples = sampleprof.SatAdd(callee.TotalSamples, total)
			stack = append(stack, callee)
			continue
		}
		count, targets, ok := parseTextBody(rest)
		if !ok {
			return nil, fail(ErrMalformed, "expected count [target:count]... in %q", clip(line))
		}
		for _, t := range targets {
			cur.AddCall(loc, t.Name, t.Count)
		}
		cur.AddBody(loc, count)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &ParseError{Format: "llvm text", Offset: offset, Line: lineNo + 1, Msg: fmt.Sprintf("line longer than %d bytes", maxTextLineBytes), Err: ErrTooLarge}
		}
		return nil, fmt.Errorf("profileio: read llvm text: %w", err)
	}
	return p, nil
}

// parseTextHead splits "name:total:head" at its last two colons.
func parseTextHead(line string) (name string, total, head uint64, ok bool) {
	n2 := strings.LastIndexByte(line, ':')
	if n2 <= 0 {
		return "", 0, 0, false
	}
	n1 := strings.LastIndexByte(line[:n2], ':')
	if n1 < 0 {
		return "", 0, 0, false
	}
	var err1, err2 error
	total, err1 = strconv.ParseUint(line[n1+1:n2], 10, 64)
	head, err2 = strconv.ParseUint(line[n2+1:], 10, 64)
	return line[:n1], total, head, err1 == nil && err2 == nil && n1 > 0
}

// parseTextLocation reads "offset[.disc]: " off the front of s.
func parseTextLocation(s string) (sampleprof.LineLocation, string, error) {
	colon := strings.IndexByte(s, ':')
	if colon < 0 || !strings.HasPrefix(s[colon:], ": ") {
		return sampleprof.LineLocation{}, "", ErrMalformed
	}
	locText, rest := s[:colon], s[colon+2:]
	offText, discText, hasDisc := strings.Cut(locText, ".")
	off, err := strconv.ParseUint(offText, 10, 32)
	if err != nil {
		return sampleprof.LineLocation{}, "", ErrMalformed
	}
	var disc uint64
	if hasDisc {
		if disc, err = strconv.ParseUint(discText, 10, 32); err != nil {
			return sampleprof.LineLocation{}, "", ErrMalformed
		}
	} else if off > maxTextLineOffset {
		return sampleprof.LineLocation{}, "", ErrMalformed
	}
	return sampleprof.LineLocation{LineOffset: uint32(off), Discriminator: uint32(disc)}, rest, nil
}

// parseTextBody reads "count[ target:count]...". A target's name runs up to the first colon
// followed by a blank-delimited integer, so names may hold colons and blanks; a name
// repeated on one line keeps its last count.
func parseTextBody(s string) (uint64, []sampleprof.CallTarget, bool) {
	countText, rest, _ := strings.Cut(s, " ")
	count, err := strconv.ParseUint(countText, 10, 64)
	if err != nil {
		return 0, nil, false
	}
	var targets []sampleprof.CallTarget
	for {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			break
		}
		found := false
		for from := 0; ; {
			c := strings.IndexByte(rest[from:], ':')
			if c < 0 {
				return 0, nil, false
			}
			c += from
			if c == 0 {
				return 0, nil, false
			}
			word, after, _ := strings.Cut(rest[c+1:], " ")
			if n, err := strconv.ParseUint(word, 10, 64); err == nil {
				targets = setTarget(targets, rest[:c], n)
				rest, found = after, true
				break
			}
			from = c + 1
		}
		if !found {
			return 0, nil, false
		}
	}
	return count, targets, true
}

func setTarget(ts []sampleprof.CallTarget, name string, n uint64) []sampleprof.CallTarget {
	for i := range ts {
		if ts[i].Name == name {
			ts[i].Count = n
			return ts
		}
	}
	return append(ts, sampleprof.CallTarget{Name: name, Count: n})
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
