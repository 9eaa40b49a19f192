package jitmap

import (
	"debug/dwarf"
	"fmt"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

type lineEntryDW struct{ dwarf.LineEntry }
