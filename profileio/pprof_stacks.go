package profileio

import (
	"cmp"
	"slices"

	"github.com/profd/profd/codeobj"
)

// pprofLabelKeys are the string indices of the sample labels' keys, and of the event's
// name (0 leaves the event label out).
type pprofLabelKeys struct {
	pid, tid, comm, event, eventName uint64
	// process holds each process's string labels (processLabels), as key and value indices.
	process map[uint32][][2]uint64
}

// addProcessLabels notes the labels of c's processes: "cgroup" where its cgroup is known,
// "container_id" where that cgroup names a container.
func (k *pprofLabelKeys) addProcessLabels(e *pprofEncoder, c *Capture) {
	for _, p := range c.Processes {
		for _, l := range processLabels(p) {
			if k.process == nil {
				k.process = map[uint32][][2]uint64{}
			}
			k.process[p.Pid] = append(k.process[p.Pid], [2]uint64{uint64(e.str(l[0])), uint64(e.str(l[1]))})
		}
	}
}

// processLabels are the string labels of process p's samples, as key and value.
func processLabels(p Process) [][2]string {
	var out [][2]string
	if p.CgroupPath != "" {
		out = append(out, [2]string{"cgroup", p.CgroupPath})
	}
	if p.ContainerID != "" {
		out = append(out, [2]string{"container_id", p.ContainerID})
	}
	return out
}

// append appends a sample's labels: "pid" and, for a known thread, "tid" (numeric), "comm"
// (the thread's name), "event", and its process's (processLabels).
func (k pprofLabelKeys) append(e *pprofEncoder, b []byte, pid, tid uint32, comm string) []byte {
	label := func(key uint64, str uint64, num int64) {
		e.inner = appendPbVarint(e.inner[:0], 1, key)
		e.inner = appendPbVarint(e.inner, 2, str)
		e.inner = appendPbVarint(e.inner, 3, uint64(num))
		b = appendPbBytes(b, 3, e.inner)
	}
	label(k.pid, 0, int64(pid))
	if tid != 0 {
		label(k.tid, 0, int64(tid))
	}
	if comm != "" {
		label(k.comm, uint64(e.str(comm)), 0)
	}
	if k.event != 0 {
		label(k.event, k.eventName, 0)
	}
	for _, l := range k.process[pid] {
		label(l[0], l[1], 0)
	}
	return b
}

// stackEncoder is what marshalStacks needs of marshalCapturePprof's encoder.
type stackEncoder struct {
	jitMapping     func(o *CaptureObject)                                                               // a mapping for o's code
	mapping        func(start, limit, offset uint64, file, buildID string, hasFunctions, hasLines bool) // any other mapping
	location       func(addr uint64, lines ...pprofLine) uint64                                         // a location in the last mapping
	jitLocation    func(co *codeobj.Object, addr uint64) uint64                                         // a location in the last mapping, in co's code
	nativeLocation func(m *NativeMapping, addr uint64, fn string) uint64                                // a location in native mapping m, the last
	functionID     func(name string) uint64
	sample         func(ids []uint64, n uint64, pid, tid uint32, comm string)
}

// marshalStacks appends c.Stacks as samples with their call chains: a location per distinct
// frame, in the mapping of its code (a JIT object's, a native file's as the process mapped
// it, else one per process and mapping name).
func marshalStacks(c *Capture, enc stackEncoder) {
	// Mappings first, each followed by its locations, as the leaf-only profile does.
	type frameKey struct {
		obj     ObjectID
		pid     uint32
		addr    uint64
		fn, mpg string
	}
	ids := map[frameKey]int32{} // each distinct frame's index in order
	var order []frameKey
	n := 0
	for _, st := range c.Stacks {
		n += len(st.Frames)
	}
	frames := make([]int32, 0, n) // the stacks' frames in turn, by index in order
	for _, st := range c.Stacks {
		for _, f := range st.Frames {
			k := frameKey{obj: f.Object, addr: f.Address}
			if !f.JIT() {
				k.pid, k.fn, k.mpg = st.Pid, f.Function, f.Mapping
			}
			id, ok := ids[k]
			if !ok {
				id = int32(len(order))
				ids[k] = id
				order = append(order, k)
			}
			frames = append(frames, id)
		}
	}
	// Group frames by mapping: JIT objects by ID, native frames by the process's mapping of
	// their file that holds the address, the rest by (pid, mapping name).
	type mappingKey struct {
		obj    ObjectID
		native *NativeMapping
		pid    uint32
		name   string
	}
	byMapping := map[mappingKey][]int32{}
	var mappingOrder []mappingKey
	for id, k := range order {
		mk := mappingKey{obj: k.obj}
		if k.obj == NoObject {
			mk.pid, mk.name = k.pid, k.mpg
			if mk.native = c.NativeAt(k.pid, k.mpg, k.addr); mk.native != nil {
				mk.name = ""
			}
		}
		if _, ok := byMapping[mk]; !ok {
			mappingOrder = append(mappingOrder, mk)
		}
		byMapping[mk] = append(byMapping[mk], int32(id))
	}
	slices.SortStableFunc(mappingOrder, func(a, b mappingKey) int {
		return cmp.Or(cmp.Compare(a.obj, b.obj), cmp.Compare(a.pid, b.pid))
	})
	locations := make([]uint64, len(order)) // each distinct frame's location ID
	for _, mk := range mappingOrder {
		switch {
		case mk.obj != NoObject:
			enc.jitMapping(c.Objects[mk.obj])
		case mk.native != nil:
			m := mk.native
			enc.mapping(m.Start, m.Limit, m.Offset, m.File, m.BuildID, true, len(m.Lines) > 0)
		default:
			enc.mapping(0, 0, 0, mk.name, "", mk.name == KernelMapping, false)
		}
		for _, id := range byMapping[mk] {
			k := order[id]
			if k.obj != NoObject {
				locations[id] = enc.jitLocation(&c.Objects[k.obj].Object, k.addr)
				continue
			}
			name := k.fn
			if name == "" {
				name = outsideName(k.mpg)
			}
			if mk.native != nil {
				locations[id] = enc.nativeLocation(mk.native, k.addr, name)
				continue
			}
			locations[id] = enc.location(k.addr, pprofLine{fn: enc.functionID(name)})
		}
	}
	var locIDs []uint64
	for _, st := range c.Stacks {
		locIDs = locIDs[:0]
		for _, id := range frames[:len(st.Frames)] {
			locIDs = append(locIDs, locations[id])
		}
		frames = frames[len(st.Frames):]
		enc.sample(locIDs, st.Count, st.Pid, st.Tid, st.Comm)
	}
}
