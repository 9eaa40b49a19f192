package files

import (
	"io/fs"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// subdirsMaxAge bounds how long a listing of a directory's subdirectories is used while
// the directory itself is unchanged: a subdirectory's own time moves when a file is made in
// it, which its parent's does not show.
const subdirsMaxAge = time.Second

// subdirCache holds the listings of jitdump directories' subdirectories, by the directory's
// identity: every process of a host looks in the same /tmp/.debug/jit and $HOME/.debug/jit,
// and one listing with a stat per entry, taken once, serves them all. A directory seen
// through another mount (a private /tmp) is another file, so another entry.
type subdirCache struct {
	mu      sync.Mutex
	entries map[dirID]subdirListing
}

type dirID struct{ dev, ino uint64 }

// subdirListing is one directory's subdirectories, symlinks and other entries that may lead
// to one, as listed when the directory's time was mtime.
type subdirListing struct {
	mtime unix.Timespec
	taken time.Time
	subs  []subdir
}

type subdir struct {
	name string
	// mtime is the subdirectory's time; zero for a symlink or an entry whose type or time
	// could not be read (kept whatever a target's start).
	mtime time.Time
}

// list returns the subdirectories of the open directory f, from the cache while f is the
// directory listed and unchanged and the listing is younger than subdirsMaxAge.
func (c *subdirCache) list(f *os.File) []subdir {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return listSubdirs(f)
	}
	id, now := dirID{dev: uint64(st.Dev), ino: st.Ino}, time.Now()
	c.mu.Lock()
	l, ok := c.entries[id]
	c.mu.Unlock()
	if ok && l.mtime == st.Mtim && now.Sub(l.taken) < subdirsMaxAge {
		return l.subs
	}
	l = subdirListing{mtime: st.Mtim, taken: now, subs: listSubdirs(f)}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[dirID]subdirListing{}
	}
	for k, old := range c.entries { // listings too old to use cost memory only
		if now.Sub(old.taken) >= subdirsMaxAge {
			delete(c.entries, k)
		}
	}
	c.entries[id] = l
	c.mu.Unlock()
	return l.subs
}

// listSubdirs lists the open directory f's subdirectories with their times, and the entries
// that may lead to one.
func listSubdirs(f *os.File) []subdir {
	entries, _ := f.ReadDir(-1)
	var out []subdir
	for _, e := range entries {
		switch e.Type() {
		case fs.ModeDir:
			var st unix.Stat_t
			s := subdir{name: e.Name()}
			if unix.Fstatat(int(f.Fd()), e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				s.mtime = time.Unix(st.Mtim.Unix())
			}
			out = append(out, s)
		case fs.ModeSymlink, fs.ModeIrregular:
			out = append(out, subdir{name: e.Name()})
		}
	}
	return out
}
