package oracle

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/tools/accuracy/callgrind"
)

// DefaultJITObject is the object name callgrind gives to code in anonymous memory, where
// lli's MCJIT puts what it emits.
const DefaultJITObject = "???"

// JoinOptions tunes Join. The zero value is usable.
type JoinOptions struct {
	JITObject string // callgrind object of the JIT code; "" means DefaultJITObject
	Event     string // callgrind event to count; "" means "Ir" (instructions executed)
}

// Join attributes the callgrind profile's JIT-code costs, jumps and calls to the code objects
// of the same run (from its jitdump), giving exact per-instruction counts and exact
// instruction-to-instruction edge counts per function. objs must not overlap (lli-14 never
// reuses addresses within a run); objects that never ran are kept with empty counts.
func Join(p *callgrind.Profile, objs []codeobj.Object, opts JoinOptions) (*Result, error) {
	if opts.JITObject == "" {
		opts.JITObject = DefaultJITObject
	}
	if opts.Event == "" {
		opts.Event = "Ir"
	}
	ev := p.EventIndex(opts.Event)
	if ev < 0 {
		return nil, fmt.Errorf("oracle: event %q (have %v): %w", opts.Event, p.Events, ErrNoEvent)
	}
	objs = slices.Clone(objs)
	slices.SortFunc(objs, func(a, b codeobj.Object) int { return cmp.Compare(a.Addr, b.Addr) })
	for i := range objs {
		if uint64(len(objs[i].Code)) != objs[i].Size {
			return nil, fmt.Errorf("oracle: code object %s at %#x+%d: %w", objs[i].Name, objs[i].Addr, objs[i].Size, ErrNoCode)
		}
		if i > 0 && objs[i-1].Addr+objs[i-1].Size > objs[i].Addr {
			return nil, fmt.Errorf("oracle: code objects %s at %#x+%d and %s at %#x: %w",
				objs[i-1].Name, objs[i-1].Addr, objs[i-1].Size, objs[i].Name, objs[i].Addr, ErrOverlap)
		}
	}
	find := func(addr uint64) int {
		i, _ := slices.BinarySearchFunc(objs, addr, func(o codeobj.Object, a uint64) int {
			if o.Addr > a {
				return 1
			}
			return -1
		})
		if i == 0 || !objs[i-1].Contains(addr) {
			return -1
		}
		return i - 1
	}

	r := &Result{Version: Version, Pid: p.Pid, Command: p.Cmd, Event: opts.Event, Callgrind: p.Creator}
	fns := make([]Function, len(objs))
	for i, o := range objs {
		fns[i] = Function{Name: o.Name, Addr: Addr(o.Addr), Size: o.Size, Code: Hex(o.Code), Counts: map[Addr]uint64{}}
	}

	for _, in := range p.Instrs {
		if in.Object != opts.JITObject {
			continue
		}
		c := in.Self[ev]
		i := find(in.Addr)
		if i < 0 {
			r.Unattributed += c
			continue
		}
		if c > 0 {
			fns[i].Counts[Addr(in.Addr)] += c
			fns[i].Instructions += c
			r.JITInstructions += c
		}
	}

	jumpsInto := map[uint64]uint64{}
	takenFrom := map[uint64]uint64{}
	for _, j := range p.Jumps {
		if j.Object != opts.JITObject {
			continue
		}
		jumpsInto[j.To] += j.Taken
		takenFrom[j.From] += j.Taken
		i := find(j.From)
		if i < 0 {
			continue
		}
		jj := Jump{From: Addr(j.From), To: Addr(j.To), Count: j.Taken, Conditional: j.Conditional}
		if j.Conditional {
			jj.Executed = j.Executed
		}
		fns[i].Jumps = append(fns[i].Jumps, jj)
		if k := find(j.To); k >= 0 && k != i && j.To == objs[k].Addr {
			fns[k].Entries += j.Taken
		}
	}
	callEntries := make([]uint64, len(objs))
	for _, c := range p.Calls {
		if c.CalleeObject == opts.JITObject {
			if k := find(c.To); k >= 0 && c.To == objs[k].Addr {
				fns[k].Entries += c.Count
				callEntries[k] += c.Count
			}
		}
		if c.Object != opts.JITObject {
			continue
		}
		i := find(c.From)
		if i < 0 {
			continue
		}
		cs := CallSite{From: Addr(c.From), To: Addr(c.To), Count: c.Count}
		if c.CalleeObject == opts.JITObject {
			if k := find(c.To); k >= 0 {
				cs.Callee = objs[k].Name
			}
		}
		fns[i].Calls = append(fns[i].Calls, cs)
	}

	for i := range fns {
		edges(&fns[i], objs[i], callEntries[i], jumpsInto, takenFrom)
	}
	r.Functions = fns
	return r, nil
}

// edges derives f's fall-through counts from its instruction counts and taken jumps, and
// checks that every instruction's count equals the flow into it: the fall-through from the
// instruction before, every jump to it, and for the entry the calls to it.
func edges(f *Function, o codeobj.Object, callEntries uint64, jumpsInto, takenFrom map[uint64]uint64) {
	instrs := decodeInstrs(o.Addr, o.Code)
	boundary := make(map[Addr]bool, len(instrs))
	for _, in := range instrs {
		boundary[Addr(in.addr)] = true
		if in.kind == flowUndecodable {
			f.Undecodable++
		}
	}
	for a, c := range f.Counts {
		if !boundary[a] {
			f.Unaligned += c
		}
	}
	f.Fallthroughs = []Edge{}
	if f.Jumps == nil {
		f.Jumps = []Jump{}
	}
	var inFall uint64 // fall-through into the current instruction
	for k, in := range instrs {
		count := f.Counts[Addr(in.addr)]
		inflow := inFall + jumpsInto[in.addr]
		if k == 0 {
			inflow += callEntries
		}
		if inflow != count && in.kind != flowUndecodable {
			f.Imbalances = append(f.Imbalances, Imbalance{Addr: Addr(in.addr), Count: count, Inflow: inflow})
		}
		inFall = 0
		if in.kind == flowNext || in.kind == flowConditional {
			if taken := takenFrom[in.addr]; taken < count {
				inFall = count - taken
			}
		}
		if inFall > 0 && k+1 < len(instrs) {
			f.Fallthroughs = append(f.Fallthroughs, Edge{From: Addr(in.addr), To: Addr(instrs[k+1].addr), Count: inFall})
		}
	}
}
