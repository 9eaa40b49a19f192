package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/profd/profd/daemon"
)

// Config is what the metrics server serves, and where.
type Config struct {
	Addr   string                    // HOST:PORT to listen on; port 0 picks a free one (Server.Addr says which)
	Stats  func() daemon.Stats       // the daemon's counters, read at each scrape (daemon.Counters.Read)
	Export func() daemon.ExportStats // an exporter's counters, read at each scrape; nil: no export metrics
	Logger *slog.Logger
}

// ErrListen marks an address the server cannot listen on: in use, not this host's, or not
// HOST:PORT. It is the operator's to change.
var ErrListen = errors.New("cannot listen")

// closeTimeout bounds how long Close waits for scrapes in progress.
const closeTimeout = 2 * time.Second

// Server serves /metrics until Close.
type Server struct {
	ln   net.Listener
	http *http.Server
	wg   sync.WaitGroup
	log  *slog.Logger
}

// Start listens on cfg.Addr (a failure wraps ErrListen) and serves /metrics on a goroutine
// of its own until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Stats == nil {
		return nil, errors.New("metrics: no Stats to serve")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{stats: cfg.Stats, export: cfg.Export},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: errorLog{log}, MaxRequestsInFlight: 4, Timeout: 10 * time.Second}))
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %s: %w: %w", cfg.Addr, ErrListen, err)
	}
	s := &Server{ln: ln, log: log, http: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

func (s *Server) serve() {
	defer s.wg.Done()
	if err := s.http.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("profd: metrics server stopped; profiling goes on without it", "addr", s.Addr(), "err", err)
	}
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops listening, lets the scrapes in progress finish (for at most closeTimeout) and
// waits for the server's goroutines.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if err != nil {
		err = s.http.Close()
	}
	s.wg.Wait()
	return err
}

// errorLog is promhttp's logger: errors of a scrape.
type errorLog struct{ log *slog.Logger }

func (l errorLog) Println(v ...any) { l.log.Warn("profd: metrics scrape", "err", fmt.Sprint(v...)) }
