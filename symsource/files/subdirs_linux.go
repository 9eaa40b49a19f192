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
// it, which its parent's does not show. subdirsMinAge is how long a listing is used even
// when the directory changed: a directory someone keeps filling is listed a few times a
// second, not at every look of every target (each looker asks for what changed since the
// listing it saw last, so a later listing shows what this one missed).
const (
	subdirsMaxAge = time.Second
	subdirsMinAge = 200 * time.Millisecond
)

// maxSubdirEntries bounds what one listing reads of a directory: one that holds more (a
// host's $HOME/.debug/jit after months of JVMs, or a directory made to be large) has the
// rest of its subdirectories left to the jitdump files the processes map.
const maxSubdirEntries = 8192

// subdirCache holds the listings of jitdump directories' subdirectories, by the directory's
// identity: every process of a host looks in the same /tmp/.debug/jit and $HOME/.debug/jit,
// and one listing with a stat per entry, taken once, serves them all. A directory seen
// through another mount (a private /tmp) is another file, so another entry.
type subdirCache struct {
	mu      sync.Mutex
	entries map[dirID]subdirListing
}

type dirID struct{ dev, ino uint64 }

// subdirListing is one directory's subdirectories, and symlinks that may lead to one, as
// listed at taken, when the directory's time was mtime; truncated: it held more than
// maxSubdirEntries entries, of which the listing has the first.
type subdirListing struct {
	mtime     unix.Timespec
	taken     time.Time
	subs      []subdir
	truncated bool
}

type subdir struct {
	name  string
	mtime time.Time // the entry's own time (a symlink's, not its target's)
	uid   uint32
}

// list returns the subdirectories of the open directory f, from the cache while f is the
// directory listed and the listing is younger than subdirsMinAge, or unchanged and younger
// than subdirsMaxAge.
func (c *subdirCache) list(f *os.File) subdirListing {
	var st unix.Stat_t
	now := time.Now()
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return listSubdirs(f, now)
	}
	id := dirID{dev: uint64(st.Dev), ino: st.Ino}
	c.mu.Lock()
	l, ok := c.entries[id]
	c.mu.Unlock()
	if age := now.Sub(l.taken); ok && (age < subdirsMinAge || l.mtime == st.Mtim && age < subdirsMaxAge) {
		return l
	}
	l = listSubdirs(f, now)
	l.mtime = st.Mtim
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
	return l
}

// listSubdirs lists the open directory f's subdirectories and symlinks with their times and
// owners, taken at now: at most maxSubdirEntries entries.
func listSubdirs(f *os.File, now time.Time) subdirListing {
	l := subdirListing{taken: now}
	for read := 0; ; {
		entries, err := f.ReadDir(min(256, maxSubdirEntries-read))
		read += len(entries)
		for _, e := range entries {
			if t := e.Type(); t != fs.ModeDir && t != fs.ModeSymlink {
				continue
			}
			var st unix.Stat_t
			if unix.Fstatat(int(f.Fd()), e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue // gone
			}
			l.subs = append(l.subs, subdir{name: e.Name(), mtime: time.Unix(st.Mtim.Unix()), uid: st.Uid})
		}
		if err != nil || len(entries) == 0 {
			return l
		}
		if read >= maxSubdirEntries {
			more, _ := f.ReadDir(1)
			l.truncated = len(more) > 0
			return l
		}
	}
}
