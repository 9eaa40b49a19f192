package callgrind

// Default bounds of Options.
const (
	DefaultMaxLineBytes = 1 << 20  // C++ names can be long; a megabyte is not a name
	DefaultMaxNames     = 1 << 22  // compressed names per id space
	DefaultMaxEvents    = 64       // event types per cost line
	DefaultMaxRecords   = 16 << 20 // distinct instructions + jumps + calls
)

// Options bounds what Parse accepts. The zero value uses the defaults.
type Options struct {
	MaxLineBytes int
	MaxNames     int
	MaxEvents    int
	MaxRecords   int
}

func (o Options) withDefaults() Options {
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	if o.MaxNames <= 0 {
		o.MaxNames = DefaultMaxNames
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.MaxRecords <= 0 {
		o.MaxRecords = DefaultMaxRecords
	}
	return o
}
