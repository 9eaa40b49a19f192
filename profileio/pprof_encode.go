package profileio

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/profd/profd/codeobj"
)

// Field numbers of profile.proto (github.com/google/pprof/proto/profile.proto).
const (
	pbProfileSampleType        = 1
	pbProfileSample            = 2
	pbProfileMapping           = 3
	pbProfileLocation          = 4
	pbProfileFunction          = 5
	pbProfileStringTable       = 6
	pbProfileDropFrames        = 7
	pbProfileKeepFrames        = 8
	pbProfileTimeNanos         = 9
	pbProfileDurationNanos     = 10
	pbProfilePeriodType        = 11
	pbProfilePeriod            = 12
	pbProfileComment           = 13
	pbProfileDefaultSampleType = 14
)

// pprofEncoder marshals a *profile.Profile as profile.proto. It does what the pprof
// package's own Write does without its per-message bookkeeping, which took most of a
// flush's time for a 10k-function capture; the result parses to the same profile.
type pprofEncoder struct {
	strings map[string]int64
	table   []string
	msg     []byte // the current nested message
	inner   []byte // a message nested in msg
	scratch []byte // packed fields' bytes
	keys    []string
}

func (e *pprofEncoder) str(s string) int64 {
	if i, ok := e.strings[s]; ok {
		return i
	}
	// profile.proto's strings are UTF-8, as protobuf's decoders insist (and OTLP's profiles,
	// made from this one), whatever bytes a JIT's names, a file's path or a command line
	// hold: each invalid byte is written as U+FFFD.
	valid := strings.ToValidUTF8(s, "\uFFFD")
	if i, ok := e.strings[valid]; ok {
		e.strings[s] = i
		return i
	}
	i := int64(len(e.table))
	e.strings[s], e.strings[valid] = i, i
	e.table = append(e.table, valid)
	return i
}

// pprofLine is a location's line: its function's ID and line, 0 when not known.
type pprofLine struct {
	fn   uint64
	line int64
}

func appendPbTag(b []byte, field, wireType int) []byte {
	return binary.AppendUvarint(b, uint64(field)<<3|uint64(wireType))
}

// appendVarint appends a varint field, leaving out zero as proto3 does.
func appendPbVarint(b []byte, field int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(appendPbTag(b, field, 0), v)
}

func appendPbBool(b []byte, field int, v bool) []byte {
	if !v {
		return b
	}
	return appendPbVarint(b, field, 1)
}

func appendPbBytes(b []byte, field int, data []byte) []byte {
	b = binary.AppendUvarint(appendPbTag(b, field, 2), uint64(len(data)))
	return append(b, data...)
}

// appendPacked appends a packed repeated varint field.
func appendPbPacked[T int64 | uint64](b []byte, field int, vs []T, scratch []byte) ([]byte, []byte) {
	if len(vs) == 0 {
		return b, scratch
	}
	scratch = scratch[:0]
	for _, v := range vs {
		scratch = binary.AppendUvarint(scratch, uint64(v))
	}
	return appendPbBytes(b, field, scratch), scratch
}

func (e *pprofEncoder) valueType(b []byte, field int, vt *profile.ValueType) []byte {
	m := appendPbVarint(nil, 1, uint64(e.str(vt.Type)))
	m = appendPbVarint(m, 2, uint64(e.str(vt.Unit)))
	return appendPbBytes(b, field, m)
}

func newPprofEncoder() *pprofEncoder {
	return &pprofEncoder{strings: map[string]int64{"": 0}, table: []string{""}}
}

// profileFields appends p's own fields: all but its samples, mappings, locations,
// functions and string table.
func (e *pprofEncoder) profileFields(b []byte, p *profile.Profile) []byte {
	for _, vt := range p.SampleType {
		b = e.valueType(b, pbProfileSampleType, vt)
	}
	b = appendPbVarint(b, pbProfileDropFrames, uint64(e.str(p.DropFrames)))
	b = appendPbVarint(b, pbProfileKeepFrames, uint64(e.str(p.KeepFrames)))
	b = appendPbVarint(b, pbProfileTimeNanos, uint64(p.TimeNanos))
	b = appendPbVarint(b, pbProfileDurationNanos, uint64(p.DurationNanos))
	if p.PeriodType != nil {
		b = e.valueType(b, pbProfilePeriodType, p.PeriodType)
	}
	b = appendPbVarint(b, pbProfilePeriod, uint64(p.Period))
	var comments []int64
	for _, c := range p.Comments {
		comments = append(comments, e.str(c))
	}
	b, _ = appendPbPacked(b, pbProfileComment, comments, nil)
	if p.DefaultSampleType != "" {
		b = appendPbVarint(b, pbProfileDefaultSampleType, uint64(e.str(p.DefaultSampleType)))
	}
	return b
}

// stringTable appends the string table. It goes last: only then is every string known.
// Fields may come in any order in protobuf.
func (e *pprofEncoder) stringTable(b []byte) []byte {
	for _, s := range e.table {
		b = binary.AppendUvarint(appendPbTag(b, pbProfileStringTable, 2), uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// pprofChunk is how much of a profile's encoding marshalCapturePprof holds before it
// hands it on.
const pprofChunk = 256 << 10

// marshalCapturePprof encodes c's profile.proto, built straight from c without a
// *profile.Profile in between, which would allocate per location and line, and hands the
// encoding to write in pieces of about pprofChunk bytes as it goes: a profile's fields may
// come in any order, so its samples, mappings and locations are written as they are made,
// and only its functions and strings are held to the end.
func marshalCapturePprof(write func([]byte), c *Capture) {
	e := newPprofEncoder()
	h := pprofHeader(c)
	period := h.Period
	b := e.profileFields(nil, h)
	field := func(num int, msg []byte) {
		b = appendPbBytes(b, num, msg)
		if len(b) >= pprofChunk {
			write(b)
			b = b[:0]
		}
	}

	type funcKey struct{ name, file string }
	type function struct {
		name, file string
		startLine  int64
	}
	var funcs []function // ID i+1
	funcIDs := map[funcKey]uint64{}
	functionID := func(name, file string, startLine int64) uint64 {
		k := funcKey{name, file}
		if id := funcIDs[k]; id != 0 {
			f := &funcs[id-1]
			if startLine > 0 && (f.startLine == 0 || startLine < f.startLine) {
				f.startLine = startLine
			}
			return id
		}
		funcs = append(funcs, function{name, file, startLine})
		funcIDs[k] = uint64(len(funcs))
		return uint64(len(funcs))
	}
	labels := pprofLabelKeys{pid: uint64(e.str("pid")), tid: uint64(e.str("tid")), comm: uint64(e.str("comm")),
		event: uint64(e.str("event")), eventName: uint64(e.str(c.Meta.Event))}
	if c.Meta.Event == "" {
		labels.event = 0
	}
	labels.addProcessLabels(e, c)
	var locID, mappingID uint64
	// location appends a location in the current mapping with lines, innermost first
	// (pprof's order: the last is the function the others were inlined into).
	location := func(addr uint64, lines ...pprofLine) uint64 {
		locID++
		e.msg = appendPbVarint(e.msg[:0], 1, locID)
		e.msg = appendPbVarint(e.msg, 2, mappingID)
		e.msg = appendPbVarint(e.msg, 3, addr)
		for _, l := range lines {
			e.inner = appendPbVarint(e.inner[:0], 1, l.fn)
			e.inner = appendPbVarint(e.inner, 2, uint64(l.line))
			e.msg = appendPbBytes(e.msg, 4, e.inner)
		}
		field(pbProfileLocation, e.msg)
		return locID
	}
	// sample appends a sample of n at the locations ids (leaf first), labelled with its
	// process, its thread (tid > 0) and the event.
	sample := func(ids []uint64, n uint64, pid, tid uint32, comm string) {
		v := int64(min(n, 1<<62))
		e.msg, e.scratch = appendPbPacked(e.msg[:0], 1, ids, e.scratch)
		e.inner = binary.AppendUvarint(e.inner[:0], uint64(v))
		e.inner = binary.AppendUvarint(e.inner, uint64(v*period))
		e.msg = appendPbBytes(e.msg, 2, e.inner)
		e.msg = labels.append(e, e.msg, pid, tid, comm)
		field(pbProfileSample, e.msg)
	}
	mapping := func(start, limit, offset uint64, file, buildID string, hasFunctions, hasLines bool) {
		mappingID++
		e.msg = appendPbVarint(e.msg[:0], 1, mappingID)
		e.msg = appendPbVarint(e.msg, 2, start)
		e.msg = appendPbVarint(e.msg, 3, limit)
		e.msg = appendPbVarint(e.msg, 4, offset)
		e.msg = appendPbVarint(e.msg, 5, uint64(e.str(file)))
		e.msg = appendPbVarint(e.msg, 6, uint64(e.str(buildID)))
		e.msg = appendPbBool(e.msg, 7, hasFunctions)
		e.msg = appendPbBool(e.msg, 8, hasLines)
		e.msg = appendPbBool(e.msg, 9, hasLines)
		field(pbProfileMapping, e.msg)
	}
	// jitLocation is the location of addr in JIT code object co: its function and line.
	jitLocation := func(co *codeobj.Object, addr uint64) uint64 {
		var fn uint64
		var line int64
		if len(co.Lines) > 0 {
			if l := co.Lines[codeobj.CoveringLine(co.Lines, addr)]; l.Addr <= addr {
				fn, line = functionID(co.Name, l.File, int64(l.Line)), int64(l.Line)
			}
		}
		if fn == 0 {
			fn = functionID(co.Name, "", 0)
		}
		return location(addr, pprofLine{fn, line})
	}
	jitMapping := func(o *CaptureObject) {
		co := &o.Object
		mapping(co.Addr, co.Addr+co.Size, 0, fmt.Sprintf("[jit pid %d] %s", o.Pid, co.Name), "", true, len(co.Lines) > 0)
	}

	// The main mapping (pprof's "File:") is the executable the processes run, first: as the
	// process's mapping of it, whose functions profd named, when it has one (pprof merging
	// profiles takes the first of two mappings alike, and names again from the file the
	// functions of one without them).
	if p := mainProcess(c); p != nil {
		var start, limit, offset uint64
		var buildID string
		var named, lines bool
		for _, m := range c.Native {
			if m.Pid == p.Pid && m.File == p.Executable {
				start, limit, offset, buildID, named, lines = m.Start, m.Limit, m.Offset, m.BuildID, true, len(m.Lines) > 0
				break
			}
		}
		mapping(start, limit, offset, p.Executable, buildID, named, lines)
	}
	// nativeLocation is the location of addr in native mapping m, in function fn: a line
	// for each call inlined there, then fn's, at their source positions where m has them.
	var lines []pprofLine
	nativeLocation := func(m *NativeMapping, addr uint64, fn string) uint64 {
		calls, pos := m.Inlined[addr], m.Lines[addr]
		if len(pos) != len(calls)+1 {
			pos = nil
		}
		at := func(i int) (string, int64) {
			if pos == nil {
				return "", 0
			}
			return pos[i].File, int64(pos[i].Line)
		}
		lines = lines[:0]
		for i, call := range calls {
			file, line := at(i)
			lines = append(lines, pprofLine{functionID(call, file, 0), line})
		}
		file, line := at(len(calls))
		lines = append(lines, pprofLine{functionID(fn, file, 0), line})
		return location(addr, lines...)
	}
	if len(c.Stacks) > 0 {
		marshalStacks(c, stackEncoder{
			jitMapping: jitMapping, mapping: mapping, location: location, jitLocation: jitLocation,
			nativeLocation: nativeLocation,
			functionID:     func(name string) uint64 { return functionID(name, "", 0) },
			sample:         sample,
		})
	} else {
		outside := c.outsideCounts()
		var id [1]uint64
		for _, o := range c.Objects {
			if len(o.Samples) == 0 {
				continue
			}
			jitMapping(o)
			for _, s := range o.Samples {
				id[0] = jitLocation(&o.Object, o.Object.Addr+s.Offset)
				sample(id[:], s.Count, o.Pid, 0, "")
			}
		}
		// Native code: the process's mapping of the file, a location per sampled address
		// named by the file's symbol.
		for _, m := range c.Native {
			if len(m.Samples) == 0 {
				continue
			}
			mapping(m.Start, m.Limit, m.Offset, m.File, m.BuildID, true, len(m.Lines) > 0)
			for _, s := range m.Samples {
				id[0] = nativeLocation(m, s.Address, nativeName(m, s))
				sample(id[:], s.Count, m.Pid, 0, "")
			}
		}
		unmapped := outside
		sort.SliceStable(unmapped, func(i, j int) bool { return unmapped[i].Pid < unmapped[j].Pid })
		for _, u := range unmapped {
			mapping(0, 0, 0, u.Mapping, "", false, false)
			id[0] = location(0, pprofLine{fn: functionID(outsideName(u.Mapping), "", 0)})
			sample(id[:], u.Count, u.Pid, 0, "")
		}
	}
	for i, f := range funcs {
		e.msg = appendPbVarint(e.msg[:0], 1, uint64(i+1))
		name := uint64(e.str(f.name))
		e.msg = appendPbVarint(e.msg, 2, name)
		e.msg = appendPbVarint(e.msg, 3, name)
		e.msg = appendPbVarint(e.msg, 4, uint64(e.str(f.file)))
		e.msg = appendPbVarint(e.msg, 5, uint64(f.startLine))
		field(pbProfileFunction, e.msg)
	}
	write(e.stringTable(b))
}

// mainProcess is the first of c's processes whose executable is known, nil when none is.
func mainProcess(c *Capture) *Process {
	for i := range c.Processes {
		if c.Processes[i].Executable != "" {
			return &c.Processes[i]
		}
	}
	return nil
}
