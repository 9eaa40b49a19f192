package collector

import (
	"encoding/binary"
	"testing"

	"go.opentelemetry.io/collector/pdata/pprofile"
)

func record(t testing.TB, pd pprofile.Profiles) []byte {
	var m pprofile.ProtoMarshaler
	b, err := m.MarshalProfiles(pd)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func sampleRequest(name string) pprofile.Profiles {
	pd := pprofile.NewProfiles()
	pd.Dictionary().StringTable().Append("", name)
	pd.ResourceProfiles().AppendEmpty().ScopeProfiles().AppendEmpty().Profiles().AppendEmpty().Samples().AppendEmpty().Values().Append(7)
	return pd
}

func TestDecodeRequests(t *testing.T) {
	b := append(record(t, sampleRequest("a")), record(t, sampleRequest("b"))...)
	got, err := DecodeRequests(b)
	if err != nil || len(got) != 2 || got[1].Dictionary().StringTable().At(1) != "b" || got[0].SampleCount() != 1 {
		t.Fatalf("got %d requests, %v", len(got), err)
	}
	// A record the exporter is still writing is left out.
	got, err = DecodeRequests(b[:len(b)-3])
	if err != nil || len(got) != 1 {
		t.Fatalf("truncated: got %d requests, %v; want the first", len(got), err)
	}
}

// FuzzDecodeRequests: any bytes give requests or an error, never a panic or an allocation
// the input's lengths ask for.
func FuzzDecodeRequests(f *testing.F) {
	f.Add(record(f, sampleRequest("a")))
	f.Add([]byte{0, 0, 0, 2, 0x0a, 0x00})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, _ := DecodeRequests(b)
		if len(got) > len(b)/4 {
			t.Fatalf("%d requests from %d bytes", len(got), len(b))
		}
	})
}
