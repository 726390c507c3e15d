package storage

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Embedded is a single-member etcd running inside this process.
type Embedded struct {
	etcd *embed.Etcd
	// Endpoint is the client URL (http://127.0.0.1:<port>).
	Endpoint string
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartEmbedded starts a single-member etcd keeping its data under dir, with
// client and peer listeners on free 127.0.0.1 ports. An existing data dir is
// reused, so objects survive a restart. Stop it with Close.
func StartEmbedded(ctx context.Context, dir string) (*Embedded, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		e, err := startEmbedded(ctx, dir)
		if err == nil {
			return e, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startEmbedded(ctx context.Context, dir string) (*Embedded, error) {
	cport, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	pport, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "svcnet"
	cfg.Dir = dir
	curl, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", cport))
	purl, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", pport))
	cfg.ListenClientUrls = []url.URL{*curl}
	cfg.AdvertiseClientUrls = []url.URL{*curl}
	cfg.ListenPeerUrls = []url.URL{*purl}
	cfg.AdvertisePeerUrls = []url.URL{*purl}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, purl.String())
	cfg.LogLevel = "error"
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// The peer URL changes between starts; a single member never talks to peers.
	cfg.StrictReconfigCheck = false
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s: not ready after 30s", dir)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	slog.Debug("embedded etcd ready", "dir", dir, "endpoint", curl.String())
	return &Embedded{etcd: e, Endpoint: curl.String()}, nil
}

// Close stops the embedded etcd.
func (e *Embedded) Close() { e.etcd.Close() }

// NewClient connects to etcd at the given endpoints.
func NewClient(endpoints []string) (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
		// Objects up to the apiserver's 3 MiB body limit must fit.
		MaxCallSendMsgSize: 8 << 20,
		MaxCallRecvMsgSize: 0,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client %v: %w", endpoints, err)
	}
	return c, nil
}
