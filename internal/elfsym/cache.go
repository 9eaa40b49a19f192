package elfsym

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/procfs"
)

// Config configures a Cache. Zero fields take the defaults.
type Config struct {
	Options      // what is read of each file
	MaxFiles int // files a Cache holds tables of at once (DefaultMaxFiles); past it, about half are let go
	// StallAfter is how long one load may take before the next one starts beside it, and
	// Close stops waiting for it (DefaultStallAfter): a file system that does not answer (a
	// lost network server) holds the load, not every other.
	StallAfter time.Duration
	Logger     *slog.Logger
}

// DefaultMaxFiles is how many files a Cache keeps tables of.
const DefaultMaxFiles = 4096

// DefaultStallAfter is Config.StallAfter's default: a load of the largest file takes about
// a second.
const DefaultStallAfter = 10 * time.Second

func (c Config) withDefaults() Config {
	c.Options = c.Options.withDefaults()
	if c.MaxFiles <= 0 {
		c.MaxFiles = DefaultMaxFiles
	}
	if c.StallAfter <= 0 {
		c.StallAfter = DefaultStallAfter
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Errors a File's Wait returns.
var (
	ErrChanged   = errors.New("elfsym: file changed while it was read")
	ErrCacheFull = errors.New("elfsym: cache holds as many files as it may, all of them loading")
	ErrClosed    = errors.New("elfsym: cache closed")
)

// statKey tells a file from another, and from itself rewritten, when it has no build-id.
type statKey struct {
	dev, ino      uint64
	size, ctimeNs int64
	uid           uint32 // the file's owner: whose table a build-id's shares (buildKey)
}

// buildKey is whose table of a build-id another file with that build-id may take: a file of
// the same owner. A user who writes an ELF file with the build-id of a system library's,
// and other symbols, must not name the library's code in other users' profiles.
type buildKey struct {
	id  string
	uid uint32
}

// statOf is the key of open file f, its status as the kernel holds it (procfs.StatNoSync).
func statOf(f *os.File) (statKey, error) {
	st, err := procfs.StatNoSync(int(f.Fd()), "")
	if err != nil {
		return statKey{}, fmt.Errorf("elfsym: %s: %w", f.Name(), err)
	}
	return statxKey(&st), nil
}

// statxKey is the key of the file whose status is st.
func statxKey(st *unix.Statx_t) statKey {
	return statKey{dev: unix.Mkdev(st.Dev_major, st.Dev_minor), ino: st.Ino, size: int64(st.Size),
		ctimeNs: st.Ctime.Sec*1e9 + int64(st.Ctime.Nsec), uid: st.Uid}
}

// File is a file's table on its way: Wait returns it once it is loaded.
type File struct {
	done  chan struct{}
	table *Table
	err   error
}

// Wait waits until the table is loaded or ctx is done. A file whose symbols could be read
// only in part yields its table and the error.
func (f *File) Wait(ctx context.Context) (*Table, error) {
	select {
	case <-f.done:
		return f.table, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Cache loads the tables of ELF files, each once, in the background, one file at a time
// (but a load past Config.StallAfter, which the next one does not wait for). It is safe for
// concurrent use; Close stops the loads and waits for them, but those past StallAfter.
type Cache struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	one    chan struct{} // one load at a time

	mu      sync.Mutex
	byStat  map[statKey]*File
	byBuild map[buildKey]*Table
}

// NewCache makes an empty cache.
func NewCache(cfg Config) *Cache {
	ctx, cancel := context.WithCancel(context.Background())
	return &Cache{cfg: cfg.withDefaults(), ctx: ctx, cancel: cancel, one: make(chan struct{}, 1),
		byStat: map[statKey]*File{}, byBuild: map[buildKey]*Table{}}
}

// Close stops loading and waits for the loads under way, but those past StallAfter; their
// Files fail with ErrClosed.
func (c *Cache) Close() {
	c.cancel()
	c.wg.Wait()
}

// Open returns the table of file, which the cache now owns (it is closed when read, or
// at once when the cache has its table already). root is the directory the process sees
// as / (its /proc/PID/root), where debug files are looked for; path is the file's path
// under it, for its .gnu_debuglink. Open costs a fstat; the reading happens on the cache's
// goroutine.
func (c *Cache) Open(file *os.File, root, path string) *File {
	key, err := statOf(file)
	if err != nil {
		file.Close()
		return failed(fmt.Errorf("elfsym: %s: %w", path, err))
	}
	return c.start(key, func() (*os.File, statKey, error) { return file, key, nil }, file.Close, root, path)
}

// OpenLater is Open of a file not opened yet, which open opens on the cache's goroutine: an
// open that a file system holds (a lost network server) holds no caller. st is the file's
// status as the kernel holds it, asking no file system (procfs.StatNoSync), which tells a
// file whose table the cache has; a file open returns with another device or inode fails
// with ErrChanged.
func (c *Cache) OpenLater(st unix.Statx_t, open func() (*os.File, error), root, path string) *File {
	key := statxKey(&st)
	return c.start(key, func() (*os.File, statKey, error) {
		file, err := open()
		if err != nil {
			return nil, statKey{}, fmt.Errorf("elfsym: %s: %w", path, err)
		}
		now, err := statOf(file) // its size and time may be newer than st's
		if err != nil || now.dev != key.dev || now.ino != key.ino {
			file.Close()
			return nil, statKey{}, fmt.Errorf("%w: %s", ErrChanged, path)
		}
		return file, now, nil
	}, func() error { return nil }, root, path)
}

// start loads the table of the file of key on a goroutine of its own, one load at a time,
// unless the cache has it or is loading it: open opens it (with its status now), discard
// lets go of what open would have opened when it is not called.
func (c *Cache) start(key statKey, open func() (*os.File, statKey, error), discard func() error, root, path string) *File {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.byStat[key]; f != nil {
		discard()
		return f
	}
	if len(c.byStat) >= c.cfg.MaxFiles && !c.evictLocked() {
		discard()
		return failed(ErrCacheFull)
	}
	f := &File{done: make(chan struct{})}
	c.byStat[key] = f
	c.wg.Add(1)
	go func() {
		defer close(f.done)
		select {
		case c.one <- struct{}{}:
		case <-c.ctx.Done():
			discard()
			f.err = ErrClosed
			c.wg.Done()
			return
		}
		// Past StallAfter the next load starts, and Close no longer waits for this one.
		leave := sync.OnceFunc(func() { <-c.one; c.wg.Done() })
		stall := time.AfterFunc(c.cfg.StallAfter, leave)
		defer func() { stall.Stop(); leave() }()
		file, now, err := open()
		if err != nil {
			// Not kept: the next Open of the file tries again (a process of a few
			// milliseconds, gone before its file was opened, is no reason to leave the
			// processes of the same program after it unnamed).
			f.err = err
			c.mu.Lock()
			if c.byStat[key] == f {
				delete(c.byStat, key)
			}
			c.mu.Unlock()
			return
		}
		defer file.Close()
		f.table, f.err = c.load(file, now, root, path)
	}()
	return f
}

// evictLocked lets go of about half the loaded tables when the cache holds MaxFiles, the
// ones a map's order gives, and of the tables by build-id (what a process's counts hold of
// them stays theirs); a table let go is loaded again when a file of it is opened again. A run of weeks on a host that
// keeps running new programs so keeps naming them. It reports false when every file is
// still loading. Callers hold mu.
func (c *Cache) evictLocked() bool {
	n := 0
	for k, f := range c.byStat {
		select {
		case <-f.done:
		default:
			continue // loading: its goroutine and its caller hold it
		}
		delete(c.byStat, k)
		if n++; n >= c.cfg.MaxFiles/2 {
			break
		}
	}
	clear(c.byBuild)
	return n > 0
}

// Loaded is a File whose table t is loaded already: one read from elsewhere than a file
// (the vdso, from a process's memory).
func Loaded(t *Table) *File {
	f := &File{done: make(chan struct{}), table: t}
	close(f.done)
	return f
}

func failed(err error) *File {
	f := &File{done: make(chan struct{}), err: err}
	close(f.done)
	return f
}

// load reads file's table, or takes the one of another file with its build-id.
func (c *Cache) load(file *os.File, key statKey, root, path string) (*Table, error) {
	ef, err := openELF(file, key.size)
	if err != nil {
		return nil, fmt.Errorf("elfsym: %s: %w", path, err)
	}
	id := ef.buildID()
	if id != "" {
		c.mu.Lock()
		t := c.byBuild[buildKey{id, key.uid}]
		c.mu.Unlock()
		if t != nil {
			return t, nil
		}
	}
	b := newBuilder(c.cfg.Options)
	err = b.addFile(ef, func() (*debugFile, string) { return c.findDebug(ef, id, root, path) })
	if after, err := statOf(file); err != nil || after != key {
		return nil, fmt.Errorf("%w: %s", ErrChanged, path)
	}
	t := b.table(ef.loads(), id)
	if t.Capped {
		c.cfg.Logger.Warn("elfsym: file has more symbols than profd keeps; the rest are not named",
			"file", path, "kept", t.Len(), "max_symbols", c.cfg.MaxSymbols, "max_string_bytes", c.cfg.MaxStringBytes)
	}
	if id != "" {
		c.mu.Lock()
		if len(c.byBuild) >= c.cfg.MaxFiles {
			clear(c.byBuild) // those tables stay with the files that hold them
		}
		c.byBuild[buildKey{id, key.uid}] = t
		c.mu.Unlock()
	}
	return t, err
}
