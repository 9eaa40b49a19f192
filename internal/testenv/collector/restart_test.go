package collector

import (
	"context"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestRecordCutByKill: a Collector killed while it wrote a record leaves a part of it in its
// file; started again, it cuts that part, so that the requests it receives after are read.
func TestRecordCutByKill(t *testing.T) {
	c := Start(t)
	c.Kill()
	rec := record(t, sampleRequest("cut"))
	f, err := os.OpenFile(c.out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(rec[:len(rec)/2]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	c.Restart()

	conn, err := grpc.NewClient(c.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pprofileotlp.NewGRPCClient(conn).Export(ctx, pprofileotlp.NewExportRequestFromProfiles(sampleRequest("after"))); err != nil {
		t.Fatal(err)
	}
	got := c.Received(t)
	if len(got) != 1 || got[0].Dictionary().StringTable().At(1) != "after" {
		t.Fatalf("received %d requests, want the one sent after the restart", len(got))
	}
}
