package callgrind

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

type instrKey struct {
	object string
	addr   uint64
}

func compareKey(a, b instrKey) int {
	if c := cmp.Compare(a.object, b.object); c != 0 {
		return c
	}
	return cmp.Compare(a.addr, b.addr)
}

// selfKey is the map key of self costs: objects interned to small ids hash faster.
type selfKey struct {
	object int32
	addr   uint64
}

type jumpKey struct {
	object      string
	from, to    uint64
	conditional bool
}

type callKey struct {
	object, calleeObject string
	from, to             uint64
}

// association is what the line after calls=, jump= or jcnd= completes.
type association uint8

const (
	assocNone association = iota
	assocCall
	assocJump
)

type parser struct {
	opts Options
	prof *Profile

	lineNo int
	off    int64

	instrSub, lineSub int // index of the "instr" / "line" subposition, -1 if absent
	eventsSet         bool
	bodySeen          bool // a cost or association line was read: header layout is fixed
	last              []uint64

	objs, files, fns *nameSpace
	ob, fl, fi, fn   string
	cob, cfi, cfn    string // pending call target names ("" = not given)
	hasCob           bool

	pending    association
	pendCount  uint64
	pendExec   uint64
	pendCond   bool
	pendTarget position
	pendObject string
	pendCallee string

	objIDs  map[string]int32
	obID    int32
	scratch []uint64 // event counts of the current line
	toks    []string // fields of the current line
	instrs  map[selfKey]int
	jumps   map[jumpKey]int
	calls   map[callKey]int
	records int
}

// Parse reads one callgrind profile (one part) from r.
func Parse(r io.Reader, opts Options) (*Profile, error) {
	opts = opts.withDefaults()
	p := &parser{
		opts:     opts,
		prof:     &Profile{Positions: []string{"line"}},
		instrSub: -1,
		lineSub:  0,
		last:     make([]uint64, 1),
		objs:     newNameSpace("object", opts.MaxNames),
		files:    newNameSpace("file", opts.MaxNames),
		fns:      newNameSpace("function", opts.MaxNames),
		objIDs:   map[string]int32{"": 0},
		instrs:   map[selfKey]int{},
		jumps:    map[jumpKey]int{},
		calls:    map[callKey]int{},
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(chunk) > opts.MaxLineBytes {
				return nil, p.tooLong()
			}
			long = append(long, chunk...)
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("callgrind: read at byte %d: %w", p.off, err)
		}
		line := chunk
		if long != nil {
			if len(long)+len(chunk) > opts.MaxLineBytes {
				return nil, p.tooLong()
			}
			line = append(long, chunk...)
			long = nil
		}
		if len(line) > opts.MaxLineBytes {
			return nil, p.tooLong()
		}
		if len(line) > 0 {
			p.lineNo++
			if perr := p.line(string(bytes.TrimRight(line, "\r\n"))); perr != nil {
				return nil, &SyntaxError{Line: p.lineNo, Offset: p.off, Err: perr}
			}
			p.off += int64(len(line))
		}
		if err != nil { // io.EOF
			break
		}
	}
	if p.pending != assocNone {
		return nil, &SyntaxError{Line: p.lineNo + 1, Offset: p.off,
			Err: fmt.Errorf("input ends inside a calls=/jump= association: %w", ErrSyntax)}
	}
	return p.finish(), nil
}

func (p *parser) tooLong() error {
	return &SyntaxError{Line: p.lineNo + 1, Offset: p.off,
		Err: fmt.Errorf("line longer than %d bytes: %w", p.opts.MaxLineBytes, ErrLimit)}
}

func (p *parser) line(s string) error {
	if s == "" || s[0] == '#' {
		if p.pending != assocNone && s == "" {
			return fmt.Errorf("empty line inside a calls=/jump= association: %w", ErrSyntax)
		}
		return nil
	}
	c := s[0]
	if c == '+' || c == '-' || c == '*' || (c >= '0' && c <= '9') {
		return p.costLine(s)
	}
	if p.pending != assocNone {
		return fmt.Errorf("%.40q where the position of a calls=/jump= line belongs: %w", s, ErrSyntax)
	}
	eq := strings.IndexByte(s, '=')
	colon := strings.IndexByte(s, ':')
	if colon >= 0 && (eq < 0 || colon < eq) {
		return p.header(s[:colon], strings.TrimSpace(s[colon+1:]))
	}
	if eq < 0 {
		return fmt.Errorf("%.40q is neither header, specification nor cost line: %w", s, ErrSyntax)
	}
	return p.spec(s[:eq], s[eq+1:])
}

func (p *parser) header(key, val string) error {
	var err error
	switch key {
	case "version":
		p.prof.Version, err = strconv.Atoi(val)
		if err == nil && p.prof.Version != 1 {
			return fmt.Errorf("version %d: only version 1 is known: %w", p.prof.Version, ErrSyntax)
		}
	case "creator":
		p.prof.Creator = val
	case "cmd":
		p.prof.Cmd = val
	case "pid":
		p.prof.Pid, err = strconv.Atoi(val)
	case "part":
		p.prof.Part, err = strconv.Atoi(val)
	case "positions":
		return p.setPositions(strings.Fields(val))
	case "events":
		return p.setEvents(strings.Fields(val))
	case "summary":
		p.prof.Summary, err = p.costList(strings.Fields(val))
	case "totals":
		p.prof.Totals, err = p.costList(strings.Fields(val))
	default:
		// desc:, event:, thread: and unknown headers carry nothing the counts need.
	}
	if err != nil {
		return fmt.Errorf("header %s: %w: %w", key, ErrSyntax, err)
	}
	return nil
}

func (p *parser) setPositions(names []string) error {
	if p.bodySeen {
		return fmt.Errorf("positions: after cost lines: %w", ErrSyntax)
	}
	if len(names) == 0 || len(names) > 3 {
		return fmt.Errorf("positions: %d subpositions: %w", len(names), ErrSyntax)
	}
	p.instrSub, p.lineSub = -1, -1
	seen := map[string]bool{}
	for i, n := range names {
		if seen[n] {
			return fmt.Errorf("positions: %q twice: %w", n, ErrSyntax)
		}
		seen[n] = true
		switch n {
		case "instr":
			p.instrSub = i
		case "line":
			p.lineSub = i
		case "bb":
		default:
			return fmt.Errorf("positions: unknown subposition %q: %w", n, ErrSyntax)
		}
	}
	p.prof.Positions = names
	p.last = make([]uint64, len(names))
	return nil
}

func (p *parser) setEvents(names []string) error {
	if p.bodySeen {
		return fmt.Errorf("events: after cost lines: %w", ErrSyntax)
	}
	if len(names) == 0 {
		return fmt.Errorf("events: empty: %w", ErrSyntax)
	}
	if len(names) > p.opts.MaxEvents {
		return fmt.Errorf("events: %d names, more than %d: %w", len(names), p.opts.MaxEvents, ErrLimit)
	}
	p.prof.Events = names
	p.eventsSet = true
	return nil
}

// costList reads the event counts of a summary:/totals: header or a cost line's tail.
func (p *parser) costList(toks []string) ([]uint64, error) {
	if !p.eventsSet {
		return nil, ErrNoEvents
	}
	if len(toks) > len(p.prof.Events) {
		return nil, fmt.Errorf("%d counts for %d events: %w", len(toks), len(p.prof.Events), ErrSyntax)
	}
	out := make([]uint64, len(p.prof.Events))
	for i, t := range toks {
		v, err := parseCount(t)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// lineCosts is costList into a buffer reused line after line; callers copy what they keep.
func (p *parser) lineCosts(toks []string) ([]uint64, error) {
	if !p.eventsSet {
		return nil, ErrNoEvents
	}
	if len(toks) > len(p.prof.Events) {
		return nil, fmt.Errorf("%d counts for %d events: %w", len(toks), len(p.prof.Events), ErrSyntax)
	}
	if cap(p.scratch) < len(p.prof.Events) {
		p.scratch = make([]uint64, len(p.prof.Events))
	}
	p.scratch = p.scratch[:len(p.prof.Events)]
	clear(p.scratch)
	for i, t := range toks {
		v, err := parseCount(t)
		if err != nil {
			return nil, err
		}
		p.scratch[i] = v
	}
	return p.scratch, nil
}

// intern gives each object name a small id for the self-cost map.
func (p *parser) intern(name string) int32 {
	id, ok := p.objIDs[name]
	if !ok {
		id = int32(len(p.objIDs))
		p.objIDs[name] = id
	}
	return id
}

func (p *parser) spec(key, val string) error {
	var err error
	switch key {
	case "ob":
		p.ob, err = p.objs.resolve(val)
		p.obID = p.intern(p.ob)
	case "fl":
		p.fl, err = p.files.resolve(val)
		p.fi = ""
	case "fi", "fe":
		p.fi, err = p.files.resolve(val)
	case "fn":
		p.fn, err = p.fns.resolve(val)
	case "cob":
		p.cob, err = p.objs.resolve(val)
		p.hasCob = true
	case "cfi", "cfl":
		p.cfi, err = p.files.resolve(val)
	case "cfn":
		p.cfn, err = p.fns.resolve(val)
	case "jfi":
		_, err = p.files.resolve(val)
	case "jfn":
		_, err = p.fns.resolve(val)
	case "calls":
		return p.association(assocCall, false, val)
	case "jump":
		return p.association(assocJump, false, val)
	case "jcnd":
		return p.association(assocJump, true, val)
	case "ln", "bb":
		// --dump-bbs=yes extras; the per-instruction lines carry the same costs.
	default:
		return fmt.Errorf("unknown specification %.20q: %w", key, ErrSyntax)
	}
	return err
}

func (p *parser) association(kind association, conditional bool, val string) error {
	p.bodySeen = true
	toks := strings.Fields(val)
	if len(toks) == 0 {
		return fmt.Errorf("association without a count: %w", ErrSyntax)
	}
	var err error
	p.pendCond = conditional
	if conditional {
		taken, exec, ok := strings.Cut(toks[0], "/")
		if !ok {
			return fmt.Errorf("jcnd=%.40q: want TAKEN/EXECUTED: %w", toks[0], ErrSyntax)
		}
		if p.pendCount, err = parseCount(taken); err != nil {
			return err
		}
		if p.pendExec, err = parseCount(exec); err != nil {
			return err
		}
		if p.pendCount > p.pendExec {
			return fmt.Errorf("jcnd=%s: taken more often than executed: %w", toks[0], ErrSyntax)
		}
	} else {
		if p.pendCount, err = parseCount(toks[0]); err != nil {
			return err
		}
		p.pendExec = p.pendCount
	}
	if p.pendTarget, err = p.positions(toks[1:]); err != nil {
		return err
	}
	p.pending = kind
	p.pendObject = p.ob
	if kind == assocCall {
		if p.hasCob {
			p.pendObject = p.cob
		}
		p.pendCallee = p.cfn
		p.cob, p.cfi, p.cfn, p.hasCob = "", "", "", false
	}
	return nil
}

// positions reads up to len(p.last) subpositions relative to the last cost line; missing
// trailing subpositions equal the last ones.
func (p *parser) positions(toks []string) (position, error) {
	var out position
	if len(toks) > len(p.last) {
		return out, fmt.Errorf("%d subpositions for %d: %w", len(toks), len(p.last), ErrSyntax)
	}
	copy(out[:], p.last)
	for i, t := range toks {
		v, err := parseSubposition(t, p.last[i])
		if err != nil {
			return out, err
		}
		out[i] = v
	}
	return out, nil
}

// position holds the subpositions of one line (at most three: instr, bb, line).
type position [3]uint64

// fields splits s at spaces and tabs into a slice reused line after line.
func (p *parser) fields(s string) []string {
	p.toks = p.toks[:0]
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return p.toks
		}
		end := strings.IndexAny(s, " \t")
		if end < 0 {
			end = len(s)
		}
		p.toks = append(p.toks, s[:end])
		s = s[end:]
	}
}

func (p *parser) costLine(s string) error {
	p.bodySeen = true
	if !p.eventsSet {
		return ErrNoEvents
	}
	toks := p.fields(s)
	n := min(len(p.last), len(toks))
	pos, err := p.positions(toks[:n])
	if err != nil {
		return err
	}
	costs, err := p.lineCosts(toks[n:])
	if err != nil {
		return err
	}
	switch p.pending {
	case assocCall:
		p.pending = assocNone
		return p.addCall(pos, costs)
	case assocJump:
		p.pending = assocNone
		return p.addJump(pos)
	}
	copy(p.last, pos[:])
	return p.addSelf(pos, costs)
}

func (p *parser) addr(pos position) uint64 {
	if p.instrSub < 0 {
		return 0
	}
	return pos[p.instrSub]
}

func (p *parser) lineOf(pos position) (uint32, error) {
	if p.lineSub < 0 {
		return 0, nil
	}
	l := pos[p.lineSub]
	if l > 1<<32-1 {
		return 0, fmt.Errorf("line %d out of range: %w", l, ErrSyntax)
	}
	return uint32(l), nil
}

func (p *parser) grow() error {
	if p.records >= p.opts.MaxRecords {
		return fmt.Errorf("more than %d distinct records: %w", p.opts.MaxRecords, ErrLimit)
	}
	p.records++
	return nil
}

func addCosts(dst, src []uint64) error {
	for i, v := range src {
		s := dst[i] + v
		if s < v {
			return fmt.Errorf("cost sum overflows: %w", ErrLimit)
		}
		dst[i] = s
	}
	return nil
}

func addCount(dst *uint64, v uint64) error {
	s := *dst + v
	if s < v {
		return fmt.Errorf("count sum overflows: %w", ErrLimit)
	}
	*dst = s
	return nil
}

func (p *parser) addSelf(pos position, costs []uint64) error {
	line, err := p.lineOf(pos)
	if err != nil {
		return err
	}
	k := selfKey{p.obID, p.addr(pos)}
	if p.instrSub < 0 {
		k.addr = uint64(line) // without addresses, lines are the positions
	}
	if i, ok := p.instrs[k]; ok {
		return addCosts(p.prof.Instrs[i].Self, costs)
	}
	if err := p.grow(); err != nil {
		return err
	}
	file := p.fi
	if file == "" {
		file = p.fl
	}
	p.instrs[k] = len(p.prof.Instrs)
	p.prof.Instrs = append(p.prof.Instrs, Instr{
		Object: p.ob, Addr: k.addr, Function: p.fn, File: file, Line: line, Self: slices.Clone(costs),
	})
	return nil
}

func (p *parser) addJump(pos position) error {
	k := jumpKey{p.ob, p.addr(pos), p.addr(p.pendTarget), p.pendCond}
	if i, ok := p.jumps[k]; ok {
		j := &p.prof.Jumps[i]
		if err := addCount(&j.Taken, p.pendCount); err != nil {
			return err
		}
		return addCount(&j.Executed, p.pendExec)
	}
	if err := p.grow(); err != nil {
		return err
	}
	p.jumps[k] = len(p.prof.Jumps)
	p.prof.Jumps = append(p.prof.Jumps, Jump{
		Object: p.ob, From: k.from, To: k.to, Conditional: p.pendCond,
		Taken: p.pendCount, Executed: p.pendExec,
	})
	return nil
}

func (p *parser) addCall(pos position, costs []uint64) error {
	k := callKey{object: p.ob, calleeObject: p.pendObject, from: p.addr(pos), to: p.addr(p.pendTarget)}
	if i, ok := p.calls[k]; ok {
		c := &p.prof.Calls[i]
		if err := addCount(&c.Count, p.pendCount); err != nil {
			return err
		}
		return addCosts(c.Inclusive, costs)
	}
	if err := p.grow(); err != nil {
		return err
	}
	p.calls[k] = len(p.prof.Calls)
	p.prof.Calls = append(p.prof.Calls, Call{
		Object: p.ob, From: k.from, CalleeObject: k.calleeObject, Callee: p.pendCallee,
		To: k.to, Count: p.pendCount, Inclusive: slices.Clone(costs),
	})
	return nil
}

func (p *parser) finish() *Profile {
	pr := p.prof
	slices.SortFunc(pr.Instrs, func(a, b Instr) int {
		return compareKey(instrKey{a.Object, a.Addr}, instrKey{b.Object, b.Addr})
	})
	slices.SortFunc(pr.Jumps, func(a, b Jump) int {
		return cmp.Or(cmp.Compare(a.Object, b.Object), cmp.Compare(a.From, b.From),
			cmp.Compare(a.To, b.To), compareBool(a.Conditional, b.Conditional))
	})
	slices.SortFunc(pr.Calls, func(a, b Call) int {
		return cmp.Or(cmp.Compare(a.Object, b.Object), cmp.Compare(a.From, b.From),
			cmp.Compare(a.CalleeObject, b.CalleeObject), cmp.Compare(a.To, b.To))
	})
	return pr
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
