package otlpexport

import (
	"encoding/binary"
	"slices"
	"sort"

	"github.com/google/pprof/profile"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// dictBuilder fills a ProfilesDictionary, each table deduplicated, index 0 of each the
// zero value as OTLP requires.
type dictBuilder struct {
	d         pprofile.ProfilesDictionary
	strings   map[string]int32
	functions map[*profile.Function]int32
	mappings  map[*profile.Mapping]int32
	locations map[*profile.Location]int32
	stacks    map[string]int32
	attrs     map[attrKey]int32
	buf       []byte
	idx       []int32
}

type attrKey struct {
	key, unit string
	str       string
	num       int64
	isNum     bool
}

func newDictBuilder(d pprofile.ProfilesDictionary) *dictBuilder {
	b := &dictBuilder{
		d:         d,
		strings:   map[string]int32{"": 0},
		functions: map[*profile.Function]int32{},
		mappings:  map[*profile.Mapping]int32{},
		locations: map[*profile.Location]int32{},
		stacks:    map[string]int32{"": 0},
		attrs:     map[attrKey]int32{},
	}
	d.StringTable().Append("")
	d.FunctionTable().AppendEmpty()
	d.MappingTable().AppendEmpty()
	d.LocationTable().AppendEmpty()
	d.StackTable().AppendEmpty()
	d.AttributeTable().AppendEmpty()
	d.LinkTable().AppendEmpty()
	return b
}

func (b *dictBuilder) str(s string) int32 {
	if i, ok := b.strings[s]; ok {
		return i
	}
	i := int32(b.d.StringTable().Len())
	b.d.StringTable().Append(s)
	b.strings[s] = i
	return i
}

func (b *dictBuilder) attr(k attrKey) int32 {
	if i, ok := b.attrs[k]; ok {
		return i
	}
	t := b.d.AttributeTable()
	i := int32(t.Len())
	a := t.AppendEmpty()
	a.SetKeyStrindex(b.str(k.key))
	if k.unit != "" {
		a.SetUnitStrindex(b.str(k.unit))
	}
	if k.isNum {
		a.Value().SetInt(k.num)
	} else {
		a.Value().SetStr(k.str)
	}
	b.attrs[k] = i
	return i
}

func (b *dictBuilder) function(f *profile.Function) int32 {
	if i, ok := b.functions[f]; ok {
		return i
	}
	t := b.d.FunctionTable()
	i := int32(t.Len())
	of := t.AppendEmpty()
	of.SetNameStrindex(b.str(f.Name))
	of.SetSystemNameStrindex(b.str(f.SystemName))
	of.SetFilenameStrindex(b.str(f.Filename))
	of.SetStartLine(f.StartLine)
	b.functions[f] = i
	return i
}

func (b *dictBuilder) mapping(m *profile.Mapping) int32 {
	if i, ok := b.mappings[m]; ok {
		return i
	}
	t := b.d.MappingTable()
	i := int32(t.Len())
	om := t.AppendEmpty()
	om.SetMemoryStart(m.Start)
	om.SetMemoryLimit(m.Limit)
	om.SetFileOffset(m.Offset)
	om.SetFilenameStrindex(b.str(m.File))
	if m.BuildID != "" {
		om.AttributeIndices().Append(b.attr(attrKey{key: attrBuildIDGNU, str: m.BuildID}))
	}
	b.mappings[m] = i
	return i
}

func (b *dictBuilder) location(l *profile.Location) int32 {
	if i, ok := b.locations[l]; ok {
		return i
	}
	var mi int32
	if l.Mapping != nil {
		mi = b.mapping(l.Mapping)
	}
	fis := make([]int32, len(l.Line))
	for j, ln := range l.Line {
		if ln.Function != nil {
			fis[j] = b.function(ln.Function)
		}
	}
	t := b.d.LocationTable()
	i := int32(t.Len())
	ol := t.AppendEmpty()
	ol.SetMappingIndex(mi)
	ol.SetAddress(l.Address)
	for j, ln := range l.Line {
		oln := ol.Lines().AppendEmpty()
		oln.SetFunctionIndex(fis[j])
		oln.SetLine(ln.Line)
		oln.SetColumn(ln.Column)
	}
	b.locations[l] = i
	return i
}

// stack is the stack table index of a sample's locations, leaf first as in pprof.
func (b *dictBuilder) stack(locs []*profile.Location) int32 {
	b.idx = b.idx[:0]
	b.buf = b.buf[:0]
	for _, l := range locs {
		li := b.location(l)
		b.idx = append(b.idx, li)
		b.buf = binary.LittleEndian.AppendUint32(b.buf, uint32(li))
	}
	if i, ok := b.stacks[string(b.buf)]; ok {
		return i
	}
	t := b.d.StackTable()
	i := int32(t.Len())
	t.AppendEmpty().LocationIndices().FromRaw(slices.Clone(b.idx))
	b.stacks[string(b.buf)] = i
	return i
}

// sampleAttributes are the attribute indices of a sample's labels but "pid", keys sorted.
func (b *dictBuilder) sampleAttributes(s *profile.Sample) []int32 {
	var out []int32
	for _, k := range sortedKeys(s.Label) {
		for _, v := range s.Label[k] {
			out = append(out, b.attr(attrKey{key: labelKey(k), str: v}))
		}
	}
	for _, k := range sortedKeys(s.NumLabel) {
		if k == "pid" {
			continue
		}
		units := s.NumUnit[k]
		for j, v := range s.NumLabel[k] {
			var unit string
			if j < len(units) {
				unit = units[j]
			}
			out = append(out, b.attr(attrKey{key: labelKey(k), num: v, isNum: true, unit: unit}))
		}
	}
	return out
}

func labelKey(k string) string {
	if r, ok := labelKeys[k]; ok {
		return r
	}
	return k
}

func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
