package procfs

import (
	"bytes"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mapping is one line of /proc/PID/maps: "start-end perms offset dev inode [path]".
type Mapping struct {
	Start, End uint64
	Perms      string // "r-xp" and the like
	Offset     uint64 // file offset of Start
	Dev        string // "major:minor", hex
	Inode      uint64
	Path       string // file path in the process's mount namespace, "[heap]", "[vdso]", ... or "" for anonymous memory
	Deleted    bool   // the file was deleted (the kernel's " (deleted)" suffix, taken off Path)
}

// Executable reports whether the mapping may hold code.
func (m *Mapping) Executable() bool { return len(m.Perms) >= 3 && m.Perms[2] == 'x' }

// ID is the identity of the mapped file, its device and inode as the line gives them; zero
// when the line names none (anonymous memory, the kernel's areas).
func (m *Mapping) ID() FileID {
	major, minor, ok := strings.Cut(m.Dev, ":")
	maj, err1 := strconv.ParseUint(major, 16, 32)
	mnr, err2 := strconv.ParseUint(minor, 16, 32)
	if !ok || err1 != nil || err2 != nil || m.Inode == 0 {
		return FileID{}
	}
	return FileID{Dev: unix.Mkdev(uint32(maj), uint32(mnr)), Ino: m.Inode}
}

// Anonymous reports whether the mapping is backed by no file and no special kernel area:
// where JITs put their code.
func (m *Mapping) Anonymous() bool { return m.Path == "" }

// ReadMaps reads pid's mappings, ascending by start. A maps file over its bound yields the
// mappings read and an error wrapping ErrTooLarge.
func ReadMaps(pid uint32) ([]Mapping, error) {
	data, err := readBounded(Path(pid, "maps"), mapsBytes)
	if data == nil {
		return nil, err
	}
	return ParseMaps(data), err
}

// ParseMaps parses the lines of a maps file, skipping those that do not parse, and returns
// the mappings ascending by start.
func ParseMaps(data []byte) []Mapping {
	var out []Mapping
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if m, ok := parseMapping(line); ok {
			out = append(out, m)
		}
	}
	if !sort.SliceIsSorted(out, func(i, j int) bool { return out[i].Start < out[j].Start }) {
		sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	}
	return out
}

func parseMapping(line []byte) (Mapping, bool) {
	var m Mapping
	var field [5][]byte
	rest := line
	for i := range field {
		rest = bytes.TrimLeft(rest, " ")
		j := bytes.IndexByte(rest, ' ')
		if j < 0 {
			if i < 4 {
				return m, false
			}
			j = len(rest)
		}
		field[i], rest = rest[:j], rest[j:]
	}
	dash := bytes.IndexByte(field[0], '-')
	if dash < 0 {
		return m, false
	}
	var err [4]error
	m.Start, err[0] = strconv.ParseUint(string(field[0][:dash]), 16, 64)
	m.End, err[1] = strconv.ParseUint(string(field[0][dash+1:]), 16, 64)
	m.Offset, err[2] = strconv.ParseUint(string(field[2]), 16, 64)
	m.Inode, err[3] = strconv.ParseUint(string(field[4]), 10, 64)
	for _, e := range err {
		if e != nil {
			return m, false
		}
	}
	if m.End <= m.Start {
		return m, false
	}
	m.Perms, m.Dev = string(field[1]), string(field[3])
	// The path starts after the padding; it may hold spaces.
	path := bytes.TrimLeft(rest, " ")
	if p, ok := bytes.CutSuffix(path, []byte(" (deleted)")); ok {
		path, m.Deleted = p, true
	}
	m.Path = string(path)
	return m, true
}

// Find returns the mapping of maps (ascending, as ReadMaps returns them) holding addr.
func Find(maps []Mapping, addr uint64) (*Mapping, bool) {
	i := sort.Search(len(maps), func(i int) bool { return maps[i].End > addr })
	if i < len(maps) && maps[i].Start <= addr {
		return &maps[i], true
	}
	return nil, false
}
