package daemon

import (
	"bufio"
	"bytes"
	"os"
	"sort"
	"strconv"
)

// mapping is one line of /proc/PID/maps.
type mapping struct {
	start, end uint64
	name       string // path, "[heap]", "[vdso]", ..., or "[anon]" for an unnamed mapping
}

// procMaps caches a process's mappings to name the places samples outside JIT code fell in.
// It is not safe for concurrent use.
type procMaps struct {
	pid      int
	mappings []mapping // ascending start
	gone     bool
}

// classify names the mapping ip lies in, reading /proc/PID/maps again once when ip is in
// none of the cached ones (the process may have mapped it since). It returns "[unknown]"
// when the process is gone or ip is in no mapping.
func (m *procMaps) classify(ip uint64) string {
	if name, ok := m.find(ip); ok {
		return name
	}
	if m.gone {
		return "[unknown]"
	}
	m.reload()
	if name, ok := m.find(ip); ok {
		return name
	}
	return "[unknown]"
}

func (m *procMaps) find(ip uint64) (string, bool) {
	i := sort.Search(len(m.mappings), func(i int) bool { return m.mappings[i].end > ip })
	if i < len(m.mappings) && m.mappings[i].start <= ip {
		return m.mappings[i].name, true
	}
	return "", false
}

func (m *procMaps) reload() {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(m.pid) + "/maps")
	if err != nil {
		m.gone = true
		return
	}
	m.mappings = parseMaps(data)
}

// parseMaps reads the lines of /proc/PID/maps: "start-end perms offset dev inode [name]".
func parseMaps(data []byte) []mapping {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 5 {
			continue
		}
		dash := bytes.IndexByte(fields[0], '-')
		if dash < 0 {
			continue
		}
		start, err1 := strconv.ParseUint(string(fields[0][:dash]), 16, 64)
		end, err2 := strconv.ParseUint(string(fields[0][dash+1:]), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		name := "[anon]"
		if len(fields) >= 6 {
			name = string(bytes.Join(fields[5:], []byte(" ")))
		}
		out = append(out, mapping{start: start, end: end, name: name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}
