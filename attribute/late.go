package attribute

import (
	"maps"
	"slices"

	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
)

// NameUnnamed names c's unnamed counts (samples in JIT memory that no symbol named while
// they were counted) by the code objects jit had at their addresses at their times, as
// Counts names the samples it keeps unnamed: a count that spans a change of the code is
// split between the versions in proportion to their time. Each object that names samples is
// added to c with them (its Version cleared: the capture numbers objects by ID); what no
// object names stays in c.Unnamed. It returns how many samples it named and how many stay
// unnamed.
func NameUnnamed(c *profileio.Capture, jit *jitmap.Map) (named, left uint64) {
	added := map[uint64]*profileio.CaptureObject{} // by version
	offsets := map[uint64]map[uint64]uint64{}      // by version
	var kept []profileio.UnnamedCount
	for _, u := range c.Unnamed {
		n, first, last := nameCount(jit, u.Pid, u.IP, u.Count, u.FirstNs, u.LastNs, func(r jitmap.Ref, n uint64) {
			if added[r.Version] == nil {
				added[r.Version] = &profileio.CaptureObject{Pid: u.Pid, Object: *r.Obj}
				offsets[r.Version] = map[uint64]uint64{}
			}
			offsets[r.Version][u.IP-r.Addr] += n
			named += n
		})
		if n > 0 {
			kept = append(kept, profileio.UnnamedCount{Pid: u.Pid, IP: u.IP, FirstNs: first, LastNs: last, Count: n})
			left += n
		}
	}
	c.Unnamed = kept
	for _, v := range slices.Sorted(maps.Keys(added)) {
		co := added[v]
		co.ID = profileio.ObjectID(len(c.Objects))
		co.Object.Version = 0
		for _, off := range slices.Sorted(maps.Keys(offsets[v])) {
			co.Samples = append(co.Samples, profileio.OffsetCount{Offset: off, Count: offsets[v][off]})
		}
		c.Objects = append(c.Objects, co)
	}
	return named, left
}
