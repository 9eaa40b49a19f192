package oracle

import (
	"bytes"
	"reflect"
	"testing"
)

func FuzzReadJSON(f *testing.F) {
	f.Add([]byte(`{"version":1,"pid":1,"event":"Ir","jit_instructions":3,"unattributed_instructions":0,` +
		`"functions":[{"name":"f","addr":"0x10","size":2,"code":"c390","entries":1,"instructions":3,` +
		`"counts":{"0x10":3},"jumps":[{"from":"0x10","to":"0x10","count":2,"conditional":true,"executed":3}],` +
		`"fallthroughs":[{"from":"0x10","to":"0x11","count":1}]}]}`))
	f.Add([]byte(`{"version":1,"functions":[{"addr":"10"}]}`))
	f.Add([]byte(`{"version":1,"functions":[{"code":"zz"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ReadJSON(bytes.NewReader(data))
		if err != nil {
			return
		}
		// What reads must write and read back the same.
		var buf bytes.Buffer
		if err := r.WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := ReadJSON(&buf)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if !reflect.DeepEqual(normal(r), normal(back)) {
			t.Fatalf("round trip changed\n%+v\n%+v", r, back)
		}
	})
}

// normal makes nil and empty slices and maps compare equal (JSON cannot tell them apart
// after omitempty).
func normal(r *Result) *Result {
	c := *r
	c.Functions = append([]Function(nil), r.Functions...)
	for i := range c.Functions {
		f := &c.Functions[i]
		if len(f.Counts) == 0 {
			f.Counts = nil
		}
		if len(f.Jumps) == 0 {
			f.Jumps = nil
		}
		if len(f.Fallthroughs) == 0 {
			f.Fallthroughs = nil
		}
		if len(f.Calls) == 0 {
			f.Calls = nil
		}
		if len(f.Imbalances) == 0 {
			f.Imbalances = nil
		}
		if len(f.Code) == 0 {
			f.Code = nil
		}
	}
	if len(c.Functions) == 0 {
		c.Functions = nil
	}
	return &c
}
