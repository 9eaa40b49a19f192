package attribute

import "strings"

// procMaps caches a process's mappings to name the places samples outside JIT code fell in.
// It is not safe for concurrent use.
type procMaps struct {
	pid      uint32
	look     Lookup
	mappings []Mapping // ascending start
	gone     bool
	// made: once gone, the executable mappings it made as the kernel reported them
	// (Lookup.MadeMappings), for the addresses mappings does not hold.
	made []Mapping
	used bool // looked in since forgetIdle last ran
	// read: the mappings were read during the drain being attributed (add clears it at
	// each). Every sample of a drain was taken before it, so a second read would find no
	// mapping the first did not: a process that maps code, runs it and unmaps it, again
	// and again, would otherwise have them read once for each address it ran.
	read bool
}

// forgetIdle lets go of the cached mappings unless a lookup used them since the last call:
// a process that draws no sample (most of a host's, under --all) keeps none, where a JIT
// runtime's may be thousands; its next sample reads them again.
func (m *procMaps) forgetIdle() {
	if !m.used {
		m.mappings, m.made = nil, nil
	}
	m.used = false
}

// lookup names the mapping ip lies in (its path, "[heap]" and the like, or "[anon]") and
// returns it, asking for the mappings again when ip is in none of the cached ones or in one
// not executable (the process may have mapped it, or made it executable, since: V8 maps
// node's builtins from its file into memory it reserved before), once a drain. It returns
// "[unknown]" and nil when ip is in no mapping known, read while the process lived or, once
// it is gone, made as its records told.
func (m *procMaps) lookup(ip uint64) (string, *Mapping) {
	m.used = true
	mp, ok := m.find(ip)
	if (!ok || !mp.Executable) && !m.gone && !m.read {
		maps, err := m.look.Mappings(m.pid)
		if maps == nil && err != nil {
			m.gone, m.made = true, m.look.MadeMappings(m.pid)
		} else {
			m.mappings, m.read = maps, true
		}
		mp, ok = m.find(ip)
	}
	return runName(mp, ok)
}

// lookupCached is lookup without asking for the mappings again: for addresses that may be
// in no mapping at all. A mapping that cannot have run the code is none: the cached
// mappings are older than the sample.
func (m *procMaps) lookupCached(ip uint64) (string, *Mapping) {
	m.used = true
	return runName(m.find(ip))
}

// lookupCaller is lookup for a caller's return address, which a frame pointer chain gone
// astray takes from wherever its frame pointer led, data included: an address in memory
// that is not executable is in no code, once the mappings read during this drain say so
// (a JIT that made the page executable after the cached read shows it so then), and an
// address past every mapping does not ask for them again.
func (m *procMaps) lookupCaller(ip uint64) (string, *Mapping) {
	m.used = true
	mp, ok := m.find(ip)
	if ok && !mp.Executable && !m.gone && !m.read {
		if maps, err := m.look.Mappings(m.pid); maps != nil || err == nil {
			m.mappings, m.read = maps, true
			mp, ok = m.find(ip)
		}
	}
	if ok && !mp.Executable {
		return "[unknown]", nil
	}
	return mappingName(mp, ok)
}

// find returns the cached mapping ip lies in; for a process gone, one it made as its
// records told where the cached ones have none that may have run ip.
func (m *procMaps) find(ip uint64) (*Mapping, bool) {
	mp, ok := find(m.mappings, ip)
	if (!ok || !mayRun(mp)) && m.gone {
		if made, found := find(m.made, ip); found {
			return made, true
		}
	}
	return mp, ok
}

// runName is mappingName for a sampled instruction: a mapping that cannot have run it
// is "[unknown]" (the code that ran there is gone: never the data file there now).
func runName(mp *Mapping, ok bool) (string, *Mapping) {
	if ok && !mayRun(mp) {
		return "[unknown]", nil
	}
	return mappingName(mp, ok)
}

// mayRun reports whether a sampled instruction can have been in mp: an executable mapping,
// or JIT memory, whose permissions a JIT may have flipped since (write, then execute).
func mayRun(mp *Mapping) bool {
	name, _ := mappingName(mp, true)
	return mp.Executable || inJITMemory(name, mp)
}

// mappingName names the mapping mp that find found (ok): its path, "[anon]", or
// "[unknown]" and nil when there is none.
func mappingName(mp *Mapping, ok bool) (string, *Mapping) {
	switch {
	case !ok:
		return "[unknown]", nil
	case mp.Path == "":
		return "[anon]", mp
	}
	return mp.Path, mp
}

// JITMemory reports whether a mapping, by the name samples outside named code are counted
// under, can hold JIT code: anonymous memory, private or shared (MAP_SHARED|MAP_ANONYMOUS
// and mappings of /dev/zero show as /dev/zero, System V segments as /SYSV…), or shared
// memory a JIT maps twice, writable and executable (a memfd, a file of /dev/shm).
func JITMemory(mapping string) bool {
	return mapping == "[anon]" || strings.HasPrefix(mapping, "[anon:") || mapping == "/dev/zero" ||
		strings.HasPrefix(mapping, "/memfd:") || strings.HasPrefix(mapping, "/SYSV") || strings.HasPrefix(mapping, "/dev/shm/")
}

// inJITMemory is JITMemory for a sample in mapping mp (nil: in none) named mapping: not an
// ELF image's, whatever its name.
func inJITMemory(mapping string, mp *Mapping) bool {
	return JITMemory(mapping) && (mp == nil || !mp.ELF)
}

// isNative reports whether samples in mp are counted as native code: an executable
// mapping of a regular file (not JIT memory, unless an ELF image is mapped there), or the
// vdso, an ELF image the kernel maps (Lookup.OpenSymbols reads its symbols).
func isNative(mp *Mapping) bool {
	return mp.Executable && (len(mp.Path) > 0 && mp.Path[0] == '/' && !inJITMemory(mp.Path, mp) || mp.Path == "[vdso]")
}
